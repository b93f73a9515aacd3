"""Chaos on real traffic: faults injected into an elastic job on a loopback cluster.

The job (:mod:`~streamscale.scenarios.chaos_driver`) runs the micro-benchmark generator,
its offered rate read from a load trace, into a keyed calculator whose every output row
carries its input tuple's ``seq`` into a JSON Lines file sink, under the ``elastic``
policy with executors requested and released, in a child process on a checkpoint. From
the first committed tuples on, at seeded random times, this process injects faults of four
kinds, in a seeded order that cycles through all of them:

* ``executor-mid-batch`` — an executor JVM SIGKILLed while it runs tasks of a batch;
* ``executor-warm-release`` — one SIGKILLed while it is being warmed up (within a second
  of the watch finding it cold) or released (right after Spark was asked to kill it);
* ``driver`` — the driver process (Python and its JVM) SIGKILLed and started again on
  the checkpoint;
* ``worker`` — a standalone worker JVM SIGKILLed (its executors go with it) and a new
  worker started in its place.

Each fault waits for the recovery of the one before (the next committed batch) and a
seeded gap. When every tuple of the trace's window has been committed, the run is judged
against pandas over the same tuples (the generator is deterministic): every key's state,
every sink row exactly once (the seqs' set and multiset against the offered range), and
each output's running count (a tuple applied twice or skipped shifts it). Per fault: the
recovery time (fault to the next committed batch) and the tuples it delayed (offered by
then and not committed at the fault).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError

__all__ = ["KINDS", "ChaosConfig", "ChaosRun", "check_exact", "run_chaos"]

KINDS = ("executor-mid-batch", "executor-warm-release", "driver", "worker")
BUNDLED_TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "occupancy_6005.csv"


@dataclass(frozen=True)
class ChaosConfig:
    """The run: the trace's window replayed in ``minutes`` at ``peak_rate`` (20 ms waited
    per tuple: 100 t/s needs 2 cores), at most ``max_executors`` of ``executor_cores``,
    ``faults`` faults (``kinds``) each a seeded ``gap_s`` after the last one recovered."""

    trace: str = str(BUNDLED_TRACE)
    window: str | None = None
    minutes: float = 12.0
    peak_rate: float = 100.0
    cost_ms: float = 20.0
    keys: int = 1000
    alpha: float = 0.5
    omega: float = 2.0
    shards: int = 16
    instances: int = 4
    trigger_s: float = 2.0
    executor_cores: int = 1
    max_executors: int = 4
    faults: int = 20
    kinds: tuple[str, ...] = KINDS
    gap_s: tuple[float, float] = (3.0, 12.0)
    seed: int = 7
    #: how long a fault may take to recover before the next is injected all the same
    recovery_timeout_s: float = 240.0
    #: how long an armed executor fault may wait for its moment (a batch, a warm-up or
    #: a release) before it is withdrawn and counted as skipped
    arm_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in KINDS]
        if bad:
            raise StreamscaleError(f"unknown fault kind (known: {', '.join(KINDS)})", item=bad[0])
        if not self.kinds or self.faults < 0 or self.minutes <= 0 or self.peak_rate <= 0:
            raise StreamscaleError("need kinds, faults >= 0, minutes > 0, peak rate > 0",
                                   item="chaos")  # fmt: skip

    def options(self) -> dict[str, str]:
        """The generator's options: the trace, and ``total`` = the tuples of its window."""
        from streamscale.runtime.spark.sources.sources import GeneratorSpec

        opts = {"keys": str(self.keys), "alpha": str(self.alpha), "omega": str(self.omega),
                "cost_ms": str(self.cost_ms), "payload_bytes": "64", "seed": str(self.seed),
                "trace": self.trace, "trace_minutes": str(self.minutes),
                "peak_rate": str(self.peak_rate)}  # fmt: skip
        if self.window is not None:
            opts["trace_window"] = self.window
        total = GeneratorSpec.from_options(opts).available(self.minutes * 60.0)
        return {**opts, "total": str(total)}


@dataclass
class ChaosRun:
    """What happened: the faults (each with its recovery), the commits, the restarts."""

    faults: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    commits: list[dict[str, Any]] = field(default_factory=list)
    driver_starts: int = 0
    unplanned_exits: list[int] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    error: str | None = None


class _Events:
    """``events.jsonl`` of the driver processes, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.lines = path, 0, []

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.lines
        with self.path.open() as f:
            f.seek(self.pos)
            chunk = f.read()
        done = chunk[: chunk.rfind("\n") + 1]
        self.pos += len(done.encode())
        self.lines.extend(json.loads(x) for x in done.splitlines() if x.strip())
        return self.lines

    def commits_after(self, t: float) -> list[dict[str, Any]]:
        return [e for e in self.poll() if e["ev"] == "commit" and e["wall"] > t]

    def done(self, total: int) -> bool:
        return any(e["ev"] == "commit" and (e["seq_hi"] or -1) >= total - 1 for e in self.poll())


class _Driver:
    """The driver child process: started, SIGKILLed (its whole process group), restarted."""

    def __init__(self, cfg: dict[str, Any], work: Path) -> None:
        self.cfg, self.work, self.proc = cfg, work, None
        self.incarnation = -1

    def start(self) -> None:
        self.incarnation += 1
        cfg = {**self.cfg, "incarnation": self.incarnation}
        log = (self.work / f"driver-{self.incarnation}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamscale.scenarios.chaos_driver", json.dumps(cfg)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
        log.close()

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(60)

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


def _restart_worker(info: Any, name: str) -> tuple[int, int]:
    """SIGKILL the worker ``name`` of the loopback cluster ``info`` and start a new one in
    its place, as :func:`~streamscale.runtime.spark.cluster.cluster.cluster_up` starts
    workers; the cluster record names the new process. Returns (old pid, new pid)."""
    import pyspark

    from streamscale.runtime.spark.cluster import cluster as cl

    d = Path(info.directory)
    rec = cl.read_record(d) or info
    old = rec.pids[name]
    with contextlib.suppress(ProcessLookupError):
        os.kill(old, signal.SIGKILL)
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(d / "work"), "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    with open(rec.logs[name], "ab") as out:
        proc = subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
             rec.master_url, "--host", "127.0.0.1", "--cores", str(rec.cores),
             "--memory", rec.memory, "--webui-port", "0"],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    new = replace(rec, pids={**rec.pids, name: proc.pid})
    (d / "cluster.json").write_text(json.dumps(asdict(new), indent=2))
    with contextlib.suppress(ChildProcessError):  # reap the killed one if it was ours
        os.waitpid(old, os.WNOHANG)
    return old, proc.pid


def _kind_order(cfg: ChaosConfig, rng: random.Random) -> Iterator[str]:
    """Kinds without end: each round of ``cfg.kinds`` in a seeded order."""
    while True:
        cycle = list(cfg.kinds)
        rng.shuffle(cycle)
        yield from cycle


def run_chaos(
    info: Any,
    cfg: ChaosConfig,
    work: Path,
    *,
    log: Callable[[str], None] = lambda s: None,
    max_wall_s: float | None = None,
) -> ChaosRun:
    """Run the chaos job on the loopback cluster ``info`` (from ``cluster_up``) with its
    checkpoint, sink and logs in ``work``; inject ``cfg.faults`` faults; return when every
    tuple of the window is committed (or after ``max_wall_s``: the run is then judged on
    what it committed)."""
    work.mkdir(parents=True, exist_ok=True)
    opts = cfg.options()
    total = int(opts["total"])
    # a safety deadline: a driver restart took up to 4 minutes on a 2-core host at load 24
    longest = cfg.minutes * 60.0 + cfg.faults * 240.0 + 600.0
    child = {"work": str(work), "master": info.master_url, "options": opts,
             "executor_cores": cfg.executor_cores, "max_executors": cfg.max_executors,
             "shards": cfg.shards, "trigger_s": cfg.trigger_s,
             # Elasticutor's elastic executors need a core each
             "instances": min(cfg.instances, cfg.max_executors * cfg.executor_cores),
             "catch_up_s": 5.0, "seed": cfg.seed, "duration_s": longest}  # fmt: skip
    rng = random.Random(cfg.seed)
    kinds = _kind_order(cfg, rng)
    events = _Events(work / "events.jsonl")
    driver = _Driver(child, work)
    run = ChaosRun(started=time.time())
    deadline = run.started + (max_wall_s or longest)
    workers = sorted(n for n in info.pids if n != "master")

    def supervise() -> bool:
        """Restart a driver that exited without finishing; ``True`` once all committed."""
        if events.done(total):
            return True
        code = driver.exited()
        if code is not None:
            run.unplanned_exits.append(code)
            last_start = max((e["wall"] for e in events.poll() if e["ev"] == "start"), default=0)
            if len(run.unplanned_exits) >= 3 and not events.commits_after(last_start):
                raise StreamscaleError(f"the driver exits with {code} before committing a batch "
                                       f"(see {work}/driver-*.log)", item="chaos")  # fmt: skip
            log(f"driver exited with {code} before the end: restarting it")
            driver.start()
            run.driver_starts += 1
        return False

    def wait(pred: Callable[[], bool], seconds: float) -> bool:
        end = time.time() + seconds
        while time.time() < end and time.time() < deadline:
            if pred():
                return True
            if supervise():
                return pred()
            time.sleep(0.2)
        return False

    driver.start()
    run.driver_starts = 1
    try:
        # the first batches that carried tuples (a query's first batch may be empty)
        if not wait(lambda: any(e["seq_hi"] is not None for e in events.commits_after(0)), 600):
            raise StreamscaleError("no tuple committed within 600 s", item=str(work))
        # a fault that found no moment is not counted: the faults go on until cfg.faults
        # were made (or every tuple was committed)
        for i, kind in enumerate(kinds):
            if len(run.faults) >= cfg.faults:
                break
            last = run.faults[-1]["wall"] if run.faults else 0.0
            wait(lambda t=last: bool(events.commits_after(t)), cfg.recovery_timeout_s)
            gap = rng.uniform(*cfg.gap_s)
            if wait(lambda: events.done(total), gap) or events.done(total):
                log("every tuple committed before the faults ran out")
                break
            if time.time() >= deadline:
                break
            fault = _inject(kind, i, driver, events, info, workers, rng, cfg, work)
            if fault is None:
                run.skipped.append({"kind": kind, "wall": time.time()})
                log(f"{kind} found no moment within {cfg.arm_timeout_s:g} s: skipped")
                continue
            if fault["kind"] == "driver":
                run.driver_starts += 1
            run.faults.append(fault)
            log(f"fault {len(run.faults)}: {fault['kind']} ({fault.get('phase', '')})")
        wait(lambda: events.done(total), max(0.0, deadline - time.time()))
        if not events.done(total):
            run.error = "not every tuple was committed before the run's deadline"
    except BaseException:
        driver.kill()
        raise
    finally:
        # the driver stops its query after the last batch and exits
        end = time.time() + (90 if events.done(total) else 0)
        while driver.exited() is None and time.time() < end:
            time.sleep(0.2)
        driver.kill()
        run.ended = time.time()
    run.commits = [e for e in events.poll() if e["ev"] == "commit"]
    return run


def _inject(
    kind: str, i: int, driver: _Driver, events: _Events, info: Any, workers: list[str],
    rng: random.Random, cfg: ChaosConfig, work: Path,
) -> dict[str, Any] | None:  # fmt: skip
    """Inject one fault; its record (``wall``: when), or ``None`` when none was made."""
    if kind == "driver":
        t = time.time()
        driver.kill()
        driver.start()
        return {"kind": kind, "wall": t, "phase": "driver process group SIGKILLed, restarted"}
    if kind == "worker":
        name = rng.choice(workers)
        t = time.time()
        old, new = _restart_worker(info, name)
        return {"kind": kind, "wall": t, "worker": name, "pid": old, "new_pid": new,
                "phase": "worker JVM SIGKILLed, a new one started"}  # fmt: skip
    seen = len([e for e in events.poll() if e["ev"] == "fault"])
    arm = work / "arm.json"
    tmp = arm.with_suffix(".tmp")
    tmp.write_text(json.dumps({"kind": kind, "id": i}))
    tmp.replace(arm)
    end = time.time() + cfg.arm_timeout_s
    while time.time() < end:
        got = [e for e in events.poll() if e["ev"] == "fault"]
        if len(got) > seen:
            return {k: v for k, v in got[-1].items() if k != "ev"}
        if driver.exited() is not None:
            break
        time.sleep(0.2)
    with contextlib.suppress(FileNotFoundError):
        arm.unlink()
    time.sleep(0.5)  # carried out as it was withdrawn?
    got = [e for e in events.poll() if e["ev"] == "fault"]
    return {k: v for k, v in got[-1].items() if k != "ev"} if len(got) > seen else None


def _t0(ckpt: Path) -> float | None:
    """The generator's start time, from Spark's oldest offset log entry kept (every offset
    carries it; Spark purges the oldest entries of a long run)."""
    d = ckpt / "spark" / "offsets"
    files = sorted((f for f in d.glob("*") if f.name.isdigit()), key=lambda f: int(f.name))
    for f in files[:1]:
        for line in reversed(f.read_text().splitlines()):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                got = json.loads(line)
                if isinstance(got, dict) and "t0" in got:
                    return float(got["t0"])
    return None


def recoveries(run: ChaosRun, cfg: ChaosConfig, work: Path) -> list[dict[str, Any]]:
    """Per fault: seconds from the fault to the next committed batch, and the tuples it
    delayed — offered by that commit (the generator's schedule) and not committed at the
    fault."""
    from streamscale.runtime.spark.sources.sources import GeneratorSpec

    opts = cfg.options()
    spec = GeneratorSpec.from_options(opts)
    t0 = _t0(work / "ckpt")
    out = []
    for f in run.faults:
        before = [c for c in run.commits if c["wall"] <= f["wall"] and c["seq_hi"] is not None]
        after = [c for c in run.commits if c["wall"] > f["wall"]]
        row = {**f, "t_s": round(f["wall"] - run.started, 2)}
        row.pop("wall")
        if after:
            rec = after[0]["wall"]
            row["recovery_s"] = round(rec - f["wall"], 2)
            done = max((c["seq_hi"] for c in before), default=-1) + 1
            if t0 is not None:
                row["delayed"] = max(0, spec.available(rec - t0) - done)
        else:
            row["recovery_s"] = None
        out.append(row)
    return out


def check_exact(work: Path, options: dict[str, str], total: int) -> dict[str, Any]:
    """The run against pandas over tuples ``0 .. total-1``: the sink's seqs (lost,
    duplicated, unexpected), each output's running count and sum, each key's state."""
    import pandas as pd

    from streamscale.runtime.spark.sources.sources import generate
    from streamscale.runtime.spark.state.state import LocalStateBackend

    rows = []
    for f in sorted((work / "sink").glob("batch_id=*/part-*.json")):
        rows.append(pd.read_json(f, lines=True, dtype={"key": str}))
    sink = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        {"key": [], "count": [], "sum": [], "seq": []})  # fmt: skip
    want = generate(options, 0, total)
    counts = Counter(sink["seq"].astype(int).tolist())
    offered = set(range(total))
    lost = len(offered - counts.keys())
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    unexpected = sum(n for s, n in counts.items() if s not in offered)
    # each output row's running count and sum: pandas' cumulative ones at that tuple
    w = want[["key", "value", "seq"]].copy()
    w["count"] = w.groupby("key").cumcount() + 1
    w["sum"] = w.groupby("key")["value"].cumsum()
    got = sink.drop_duplicates("seq").merge(w, on="seq", suffixes=("", "_want"))
    outputs_exact = bool(
        len(got) == len(sink.drop_duplicates("seq"))
        and (got["key"].astype(str) == got["key_want"]).all()
        and (got["count"] == got["count_want"]).all()
        and ((got["sum"] - got["sum_want"]).abs() <= 1e-6 * got["sum_want"].abs().clip(1)).all()
    )
    state: dict[str, list[float]] = {}
    for shard in LocalStateBackend(work / "ckpt" / "state").load_all("calc").values():
        state.update(shard)
    agg = want.groupby("key")["value"].agg(["count", "sum"])
    state_exact = set(state) == set(agg.index) and all(
        int(state[k][0]) == int(agg.at[k, "count"])
        and math.isclose(float(state[k][1]), float(agg.at[k, "sum"]), rel_tol=1e-9, abs_tol=1e-6)
        for k in agg.index
    )
    return {"offered": total, "sink_rows": len(sink), "lost": lost,
            "duplicated": duplicated, "unexpected": unexpected, "outputs_exact": outputs_exact,
            "state_exact": bool(state_exact), "keys": len(agg)}  # fmt: skip


def summarize(run: ChaosRun, cfg: ChaosConfig, work: Path) -> dict[str, Any]:
    """The run's figures (the benchmark's line without its configuration)."""
    opts = cfg.options()
    exact = check_exact(work, opts, int(opts["total"]))
    per = recoveries(run, cfg, work)
    rec = [f["recovery_s"] for f in per if f.get("recovery_s") is not None]
    by_kind = Counter(f["kind"] for f in per)
    med_kind = {
        k: round(statistics.median(x), 2)
        for k in KINDS
        if (x := [f["recovery_s"] for f in per if f["kind"] == k and f.get("recovery_s")])
    }
    return {
        "faults": len(per),
        **exact,
        "recovery_median_s": round(statistics.median(rec), 2) if rec else None,
        "recovery_max_s": round(max(rec), 2) if rec else None,
        "unrecovered": sum(1 for f in per if f.get("recovery_s") is None),
        "per_kind": {k: by_kind.get(k, 0) for k in KINDS},
        "recovery_median_by_kind_s": med_kind,
        "delayed_tuples": sum(f["delayed"] for f in per)
        if all("delayed" in f for f in per)
        else None,
        "skipped": len(run.skipped),
        "driver_starts": run.driver_starts,
        "unplanned_driver_exits": run.unplanned_exits,
        "batches": len(run.commits),
        "wall_s": round(run.ended - run.started, 1),
        "error": run.error,
        "fault_list": per,
    }
