"""Chaos on real traffic: faults injected into an elastic job on a loopback cluster.

The job (:mod:`~streamscale.scenarios.chaos_driver`) runs the micro-benchmark generator,
its offered rate read from a load trace, into a keyed calculator whose every output row
carries its input tuple's ``seq`` into a JSON Lines file sink, under the ``elastic``
policy with executors requested and released, in a child process on a checkpoint. This
process injects faults of four kinds, in a seeded order that cycles through all of them,
one in each of ``faults`` equal slices of the replay (from the first committed tuples to
shortly before the trace's end), at a seeded time within its slice (:func:`fault_plan`):

* ``executor-mid-batch`` — an executor JVM SIGKILLed while it runs tasks of a batch;
* ``executor-warm-release`` — one SIGKILLed while it is being warmed up (while the
  warm-up job's tasks run on it, the watch having found it cold) or, for every fourth
  of this kind, released (right after Spark was asked to kill it);
* ``driver`` — the driver process (Python and its JVM) SIGKILLed and started again on
  the checkpoint;
* ``worker`` — a standalone worker JVM that hosts executors of the job SIGKILLed (its
  executors go with it) and a new worker started in its place.

Each fault waits for the recovery of the one before (the next committed batch). Once
every tuple of the window is committed, the run is judged against pandas over the same
tuples (:func:`check_exact`). Per fault (:func:`recoveries`): what it hit (:func:`hit`),
the recovery time, the backlog's recovery (:func:`backlog_recovery_s`) and the tuples it
delayed; the figures per kind count the faults that hit work in flight only
(:func:`recovery_by_kind`).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamscale.errors import StreamscaleError

if TYPE_CHECKING:
    from streamscale.scenarios.chaos_driver import DriverProcess

__all__ = ["KINDS", "ChaosConfig", "ChaosRun", "PlannedFault", "backlog_recovery_s",
           "check_exact", "fault_plan", "fault_times", "hit", "recovery_by_kind",
           "run_chaos"]  # fmt: skip

KINDS = ("executor-mid-batch", "executor-warm-release", "driver", "worker")
#: what a fault hit (:func:`hit`): work in flight, an executor being released, or nothing
IN_FLIGHT, RELEASING, IDLE = "in flight", "releasing", "idle"
#: of the warm-release faults, every ``RELEASE_EVERY``-th aims at a release (the others
#: at a warm-up, whose tasks are work in flight; a release is not)
RELEASE_EVERY = 4
BUNDLED_TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "occupancy_6005.csv"


@dataclass(frozen=True)
class ChaosConfig:
    """The run: the trace's window replayed in ``minutes`` at ``peak_rate`` (20 ms waited
    per tuple: 100 t/s needs 2 cores), at most ``max_executors`` of ``executor_cores``,
    ``faults`` faults (``kinds``), one in each slice of the replay (:func:`fault_plan`),
    at least ``min_gap_s`` after the last one recovered."""

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
    min_gap_s: float = 3.0
    #: the last slice ends this many seconds before the trace does (at most a tenth of
    #: it), so that the last fault still finds tuples offered
    tail_s: float = 30.0
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
    #: every line of ``events.jsonl`` (the driver processes' start-up steps among them)
    events: list[dict[str, Any]] = field(default_factory=list)
    plan: list[PlannedFault] = field(default_factory=list)
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


def _kind_order(cfg: ChaosConfig, rng: random.Random) -> Iterator[str]:
    """Kinds without end: each round of ``cfg.kinds`` in a seeded order."""
    while True:
        cycle = list(cfg.kinds)
        rng.shuffle(cycle)
        yield from cycle


@dataclass(frozen=True)
class PlannedFault:
    """One fault of the plan: its kind, the moment it aims at (``phase``: ``warming`` or
    ``releasing`` for a warm-release fault), its slice ``[lo_s, hi_s)`` and its time
    ``at_s`` in it, in seconds after the generator's start."""

    kind: str
    phase: str | None
    lo_s: float
    hi_s: float
    at_s: float


def fault_times(
    n: int, start_s: float, end_s: float, seed: int
) -> list[tuple[float, float, float]]:
    """``n`` slices of equal length over ``[start_s, end_s)``, each ``(lo, hi, t)`` with
    one time ``t`` drawn uniformly within it (seeded): every slice gets one fault."""
    if n <= 0:
        return []
    rng = random.Random(seed)
    width = max(0.0, end_s - start_s) / n
    out = []
    for i in range(n):
        lo = start_s + i * width
        out.append((lo, lo + width, lo + rng.random() * width))
    return out


def fault_plan(cfg: ChaosConfig, start_s: float, end_s: float) -> list[PlannedFault]:
    """``cfg.faults`` faults over ``[start_s, end_s)`` (seconds of the replay), one per
    slice (:func:`fault_times`), the kinds in a seeded order that goes through every kind
    before it repeats one; every :data:`RELEASE_EVERY`-th warm-release fault aims at a
    release, the others at a warm-up."""
    rng = random.Random(cfg.seed)
    kinds = _kind_order(cfg, rng)
    plan, warm = [], 0
    for lo, hi, at in fault_times(cfg.faults, start_s, end_s, cfg.seed):
        kind, phase = next(kinds), None
        if kind == "executor-warm-release":
            phase = "releasing" if warm % RELEASE_EVERY == RELEASE_EVERY - 1 else "warming"
            warm += 1
        plan.append(PlannedFault(kind, phase, round(lo, 3), round(hi, 3), round(at, 3)))
    return plan


def hit(fault: Mapping[str, Any]) -> str:
    """What ``fault`` hit (:data:`IN_FLIGHT`, :data:`RELEASING` or :data:`IDLE`), from what
    was recorded at it. The driver holds the query (its offsets, the batch running or the
    next one): in flight. A worker: the executors of the job it hosted (none: idle). An
    executor: released when streamscale had asked Spark to kill it or Spark was removing
    it (``releasing``, or a ``phase`` that says so); else in flight when Spark's status
    store showed tasks of the job on it (a batch's, or its warm-up's), else idle."""
    kind = fault["kind"]
    if kind == "driver":
        return IN_FLIGHT
    if kind == "worker":
        return IN_FLIGHT if fault.get("executors") else IDLE
    if fault.get("releasing") or str(fault.get("phase", "")).startswith("releasing"):
        return RELEASING
    return IN_FLIGHT if (fault.get("active_tasks") or 0) > 0 else IDLE


def _median_max(xs: Sequence[float]) -> tuple[float | None, float | None]:
    return (round(statistics.median(xs), 2), round(max(xs), 2)) if xs else (None, None)


def recovery_by_kind(
    faults: Sequence[Mapping[str, Any]], kinds: Sequence[str] = KINDS
) -> dict[str, dict[str, Any]]:
    """Per kind: the faults that hit work in flight (``in_flight``), the median and the
    longest of their recoveries (``recovery_s``; one never recovered is left out), and
    the kind's faults that hit none (``not_in_flight``: released or idle)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        mine = [f for f in faults if f["kind"] == kind]
        live = [f for f in mine if hit(f) == IN_FLIGHT]
        med, top = _median_max([f["recovery_s"] for f in live if f.get("recovery_s") is not None])
        out[kind] = {"in_flight": len(live), "median_s": med, "max_s": top,
                     "not_in_flight": len(mine) - len(live)}  # fmt: skip
    return out


def committed_series(commits: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """``(wall, tuples committed by then)`` per commit, in wall-clock order: the generator's
    seqs are committed in order, so a commit's count is one past the highest seq any
    commit so far carried (an empty batch, or one run again after a restart, keeps it)."""
    out, done = [], 0
    for c in sorted(commits, key=lambda c: c["wall"]):
        if c.get("seq_hi") is not None:
            done = max(done, int(c["seq_hi"]) + 1)
        out.append((float(c["wall"]), done))
    return out


def backlog_recovery_s(
    fault_wall: float,
    committed: Sequence[tuple[float, int]],
    offered: Callable[[float], int],
    *,
    lookback_s: float,
) -> float | None:
    """Seconds from a fault to the first commit after it at which the backlog (``offered``
    at that moment minus the tuples ``committed``) is back to its level before the fault:
    the largest backlog at the commits of the ``lookback_s`` before it (the last commit
    before it when none is that recent). ``None``: no commit before the fault, or none
    after it brought the backlog back."""
    points = [(w, offered(w) - n) for w, n in committed]
    before = [b for w, b in points if w <= fault_wall]
    if not before:
        return None
    recent = [b for w, b in points if fault_wall - lookback_s <= w <= fault_wall]
    level = max(recent) if recent else before[-1]
    for w, b in points:
        if w > fault_wall and b <= level:
            return round(w - fault_wall, 2)
    return None


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
    from streamscale.scenarios.chaos_driver import DriverProcess

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
    rng = random.Random(cfg.seed + 1)  # the workers killed
    events = _Events(work / "events.jsonl")
    driver = DriverProcess(child, work)
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
        first = min(e["wall"] for e in events.commits_after(0) if e["seq_hi"] is not None)
        starts = [e["wall"] for e in events.poll() if e["ev"] == "start"]
        t0 = _t0(work / "ckpt") or min(starts, default=first)
        replay = cfg.minutes * 60.0
        run.plan = fault_plan(cfg, first - t0, replay - min(cfg.tail_s, replay / 10))
        arms = 0  # each arming of an executor fault has an id of its own
        for planned in run.plan:
            # the last fault's recovery (its next commit), then the planned moment
            last = run.faults[-1]["wall"] if run.faults else 0.0
            wait(lambda t=last: bool(events.commits_after(t)), cfg.recovery_timeout_s)
            fault = None
            while True:  # a fault that found no moment is tried again within its slice
                at = max(t0 + planned.at_s, time.time() + cfg.min_gap_s)
                if wait(lambda: events.done(total), at - time.time()) or events.done(total):
                    break
                if time.time() >= deadline:
                    break
                arms += 1
                fault = _inject(planned, arms, driver, events, info, workers, rng, cfg, work)
                if fault is not None:
                    break
                run.skipped.append({"kind": planned.kind, "phase": planned.phase,
                                    "wall": time.time()})  # fmt: skip
                log(f"{planned.kind} found no moment within {cfg.arm_timeout_s:g} s: skipped")
                if time.time() >= t0 + planned.hi_s:
                    break
            if fault is not None:
                run.driver_starts += int(fault["kind"] == "driver")
                run.faults.append(fault)
                log(f"fault {len(run.faults)}: {fault['kind']} ({fault.get('phase', '')})")
            if events.done(total) or time.time() >= deadline:
                if planned is not run.plan[-1]:
                    log("every tuple committed (or the deadline came) before the plan's end")
                break
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
    run.events = list(events.poll())
    run.commits = [e for e in run.events if e["ev"] == "commit"]
    return run


def _inject(
    planned: PlannedFault, i: int, driver: DriverProcess, events: _Events, info: Any,
    workers: list[str], rng: random.Random, cfg: ChaosConfig, work: Path,
) -> dict[str, Any] | None:  # fmt: skip
    """Inject one fault; its record (``wall``: when), or ``None`` when none was made."""
    from streamscale.scenarios.chaos_driver import hosted_executors, restart_worker

    kind = planned.kind
    if kind == "driver":
        t = time.time()
        driver.kill()
        driver.start()
        return {"kind": kind, "wall": t, "incarnation": driver.incarnation,
                "phase": "driver process group SIGKILLed, restarted"}  # fmt: skip
    if kind == "worker":
        app = [e["app"] for e in events.poll() if e["ev"] == "start"][-1:]
        hosts = {w: hosted_executors(info, w, app[0]) if app else [] for w in workers}
        name = rng.choice([w for w in workers if hosts[w]] or workers)
        t = time.time()
        old, new = restart_worker(info, name)
        return {"kind": kind, "wall": t, "worker": name, "pid": old, "new_pid": new,
                "executors": hosts[name], "phase": "worker JVM SIGKILLed, a new one started"}  # fmt: skip
    seen = len([e for e in events.poll() if e["ev"] == "fault"])
    arm = work / "arm.json"
    tmp = arm.with_suffix(".tmp")
    tmp.write_text(json.dumps({"kind": kind, "phase": planned.phase, "id": i}))
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


def _restart_steps(events: Sequence[Mapping[str, Any]], f: Mapping[str, Any]) -> dict[str, float]:
    """Where a driver restart's time went, from the new process's events: the process
    started (``spawn_s``: the old one killed and reaped), its imports done (``imports_s``),
    its Spark session built (``session_s``: the driver JVM), its first executor settled
    (``executors_s``), its streaming query started (``setup_s``: the plan, the state's
    version index, the executors' warm-up), its first batch started (``query_s``: Spark's
    offsets and commits read back) and ran (``first_batch_s``)."""
    mine = [e for e in events if e.get("incarnation") == f.get("incarnation")]
    at = {e["ev"]: e["wall"] for e in reversed(mine)}  # the first of each
    first = next((e for e in mine if e["ev"] == "commit"), None)
    marks = [("spawn_s", at.get("proc")), ("imports_s", at.get("main")),
             ("session_s", at.get("session")),
             ("executors_s", at.get("start")), ("setup_s", at.get("query")),
             ("query_s", first and first["wall"] - first.get("duration_s", 0.0)),
             ("first_batch_s", first and first["wall"])]  # fmt: skip
    out, prev = {}, f["wall"]
    for name, t in marks:
        if t is None:
            break
        out[name], prev = round(t - prev, 2), t
    return out


def recoveries(run: ChaosRun, cfg: ChaosConfig, work: Path) -> list[dict[str, Any]]:
    """Per fault: what it hit (:func:`hit`), seconds from the fault to the next committed
    batch, to the backlog's return to its level before the fault
    (:func:`backlog_recovery_s`, five triggers looked back; ``backlog_overlapped``: the
    next fault came before it), the tuples it delayed —
    offered by the next commit (the generator's schedule) and not committed at the fault
    — and, for a driver restart, where its time went (:func:`_restart_steps`)."""
    from streamscale.runtime.spark.sources.sources import GeneratorSpec

    spec = GeneratorSpec.from_options(cfg.options())
    t0 = _t0(work / "ckpt")
    series = committed_series(run.commits)
    out = []
    for f in run.faults:
        before = [c for c in run.commits if c["wall"] <= f["wall"] and c["seq_hi"] is not None]
        after = [c for c in run.commits if c["wall"] > f["wall"]]
        row = {**f, "t_s": round(f["wall"] - run.started, 2), "hit": hit(f)}
        row.pop("wall")
        row["recovery_s"] = round(after[0]["wall"] - f["wall"], 2) if after else None
        if after and t0 is not None:
            done = max((c["seq_hi"] for c in before), default=-1) + 1
            row["delayed"] = max(0, spec.available(after[0]["wall"] - t0) - done)
        if t0 is not None:
            row["replay_s"] = round(f["wall"] - t0, 2)
            back = backlog_recovery_s(
                f["wall"], series, lambda w: spec.available(w - t0), lookback_s=5 * cfg.trigger_s
            )
            nxt = min((g["wall"] for g in run.faults if g["wall"] > f["wall"]), default=None)
            row["backlog_recovery_s"] = back
            # the next fault came before the backlog was back: its time is in this figure
            row["backlog_overlapped"] = nxt is not None and (back is None or f["wall"] + back > nxt)
        if f["kind"] == "driver":
            row["restart"] = _restart_steps(run.events, f)
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
    """The run's figures (the benchmark's line without its configuration). The recovery
    figures count the faults that hit work in flight; ``not_in_flight`` the others
    (``releasing`` of them: an executor already being released)."""
    opts = cfg.options()
    exact = check_exact(work, opts, int(opts["total"]))
    per = recoveries(run, cfg, work)
    live = [f for f in per if f["hit"] == IN_FLIGHT]
    med, top = _median_max([f["recovery_s"] for f in live if f["recovery_s"] is not None])
    by_kind = recovery_by_kind(per, KINDS)
    backlog = [f.get("backlog_recovery_s") for f in live]
    at = [f["replay_s"] for f in per if "replay_s" in f]  # the faults' spread over the replay
    return {
        "faults": len(per),
        **exact,
        "recovery_by_kind": by_kind,
        "not_in_flight": len(per) - len(live),
        "releasing": sum(1 for f in per if f["hit"] == RELEASING),
        "backlog_recovery_max_s": max((b for b in backlog if b is not None), default=None),
        "backlog_unrecovered": sum(1 for b in backlog if b is None),
        "backlog_overlapped": sum(1 for f in live if f.get("backlog_overlapped")),
        "recovery_median_s": med,
        "recovery_max_s": top,
        "unrecovered": sum(1 for f in per if f.get("recovery_s") is None),
        "per_kind": {k: sum(1 for f in per if f["kind"] == k) for k in KINDS},
        "recovery_median_by_kind_s": {
            k: v["median_s"] for k, v in by_kind.items() if v["median_s"] is not None
        },
        "delayed_tuples": sum(f["delayed"] for f in per)
        if all("delayed" in f for f in per)
        else None,
        "plan": [asdict(p) for p in run.plan],
        "spread_s": [min(at, default=None), max(at, default=None)],
        "skipped": len(run.skipped),
        "driver_starts": run.driver_starts,
        "unplanned_driver_exits": run.unplanned_exits,
        "batches": len(run.commits),
        "wall_s": round(run.ended - run.started, 1),
        "error": run.error,
        "fault_list": per,
    }
