"""The driver process of a chaos run (:mod:`~streamscale.scenarios.chaos`).

``python -m streamscale.scenarios.chaos_driver CONFIG_JSON`` runs the chaos job — the
micro-benchmark generator on a load trace into :func:`chaos_calculator`, whose outputs
carry each tuple's ``seq`` into a JSON Lines file sink — under the ``elastic`` policy with
executors requested and released on a standalone cluster, on a checkpoint that a
restarted process resumes. The supervising process SIGKILLs this process and starts it
again; it arms the executor faults through a file (``arm.json``) that this process's
:class:`FaultAgent` carries out where only the driver can time them: an executor killed
while its tasks run, or while it is being warmed up or released. Every committed batch,
every fault carried out and each step of the process's start-up (``proc``: the process
started, ``main``: its imports done, ``session``: its Spark session built, ``start``: its
first executor settled, ``query``: Spark started the streaming query) is one line of
``events.jsonl`` (wall-clock seconds).

The supervisor's handles on the processes live here too: :class:`DriverProcess` (this
module run as a child, killed and restarted) and the standalone workers'
(:func:`restart_worker`, :func:`hosted_executors`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from streamscale.runtime.spark.executors.resources import ExecutorResources
from streamscale.runtime.spark.keyed.functions import calculator

__all__ = [
    "ChaosResources",
    "DriverProcess",
    "FaultAgent",
    "chaos_calculator",
    "executor_pids",
    "hosted_executors",
    "main",
    "restart_worker",
    "sink_seqs",
]

#: the executor faults this process carries out when armed
MID_BATCH, WARM_RELEASE = "executor-mid-batch", "executor-warm-release"


def chaos_calculator(
    rows: pd.DataFrame, state: dict[Any, Any], *, cost_kind: str = "wall"
) -> pd.DataFrame:
    """Paper 000's calculator with each output row carrying its input tuple's ``seq``:
    one row per tuple, so a sink holds every tuple exactly once or shows that it does not."""
    out = calculator(rows, state, cost_kind=cost_kind)
    out["seq"] = rows["seq"].to_numpy()
    return out


chaos_calculator.required_fields = ("cost_ms", "seq")  # type: ignore[attr-defined]


def append_event(path: Path, event: dict[str, Any]) -> None:
    """One line of ``events.jsonl``, flushed and synced (the process may die next)."""
    with path.open("a") as f:
        f.write(json.dumps(event) + "\n")
        f.flush()
        os.fsync(f.fileno())


def sink_seqs(sink: Path, batch_id: int | None = None) -> list[int]:
    """The ``seq`` of every row the file sink holds (one batch's, or all batches')."""
    pattern = f"batch_id={batch_id}" if batch_id is not None else "batch_id=*"
    seqs: list[int] = []
    for f in sorted(sink.glob(f"{pattern}/part-*.json")):
        with f.open() as fh:
            seqs.extend(json.loads(line)["seq"] for line in fh if line.strip())
    return seqs


def executor_pids(app_id: str) -> dict[str, int]:
    """Executor id → process id of this application's executor JVMs (from ``/proc``)."""
    out: dict[str, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            args = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args:
            continue
        words = [a.decode(errors="replace") for a in args]
        with contextlib.suppress(ValueError, IndexError):
            if words[words.index("--app-id") + 1] == app_id:
                out[words[words.index("--executor-id") + 1]] = int(d)
    return out


class DriverProcess:
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


def _parent_pid(pid: int) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return None


def hosted_executors(info: Any, name: str, app_id: str) -> list[str]:
    """The executors of application ``app_id`` that the worker ``name`` of the loopback
    cluster ``info`` runs (its child processes)."""
    from streamscale.runtime.spark.cluster import cluster as cl

    rec = cl.read_record(Path(info.directory)) or info
    pid = rec.pids.get(name)
    return sorted(e for e, p in executor_pids(app_id).items() if _parent_pid(p) == pid)


def restart_worker(info: Any, name: str) -> tuple[int, int]:
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


@dataclass
class ChaosResources(ExecutorResources):
    """:class:`ExecutorResources` whose :attr:`agent` SIGKILLs an executor, when armed
    to, while it is being warmed up (found cold by the watch, whose warm-up job then runs
    on it: killed once Spark shows that job's tasks on it) or released (Spark just asked
    to kill it)."""

    agent: FaultAgent | None = None

    def cold_executors(self) -> list[str]:
        cold = super().cold_executors()
        if cold and self.agent is not None:
            self.agent.watch_warming(cold[0])
        return cold

    def _kill(self, ids: Any) -> bool:
        ok = super()._kill(ids)
        if ok and ids and self.agent is not None and self.agent.take(WARM_RELEASE, "releasing"):
            self.agent.kill(next(iter(ids)), "releasing")
        return ok

    def releasing(self, executor: str) -> bool:
        """Whether this run asked Spark to kill ``executor`` (it is still listed)."""
        with self._lock:
            return executor in self._killed


@dataclass
class FaultAgent:
    """Carries out the executor fault the supervisor arms in ``arm.json`` (its ``kind``,
    and for a warm-release fault the ``phase`` it aims at: ``warming`` or ``releasing``)."""

    sc: Any
    work: Path
    incarnation: int
    seed: int
    rng: random.Random = field(init=False)
    armed: tuple[str, str | None] | None = None
    res: ChaosResources | None = None
    #: the armings carried out or withdrawn (``arm.json``'s ``id``): never twice
    spent: set[int] = field(default_factory=set)
    _arm_id: int | None = None
    _watching: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 1000 + self.incarnation)

    def is_armed(self, kind: str, phase: str | None = None) -> bool:
        with self._lock:
            return self.armed == (kind, phase)

    def take(self, kind: str, phase: str | None = None) -> bool:
        """Whether ``kind`` (at ``phase``) is armed; disarms it (one fault per arming)."""
        with self._lock:
            if self.armed != (kind, phase):
                return False
            self.armed = None
            if self._arm_id is not None:
                self.spent.add(self._arm_id)
        with contextlib.suppress(FileNotFoundError):
            (self.work / "arm.json").unlink()
        return True

    def status(self, executor: str) -> tuple[int, bool]:
        """``executor``'s running tasks in Spark's status store, and whether Spark is
        removing it (listed, no longer active)."""
        seq = self.sc._jsc.sc().statusStore().executorList(False)
        for i in range(seq.size()):
            e = seq.apply(i)
            if str(e.id()) == executor:
                return int(e.activeTasks()), not bool(e.isActive())
        return 0, False

    def watch_warming(self, executor: str) -> None:
        """When a warm-up fault is armed: SIGKILL ``executor`` (just found cold) once Spark
        shows tasks on it — its warm-up job's — within 5 s; else leave the fault armed."""
        with self._lock:
            if self.armed != (WARM_RELEASE, "warming") or executor in self._watching:
                return
            self._watching.add(executor)

        def watch() -> None:
            end = time.monotonic() + 5.0
            try:
                while time.monotonic() < end and self.is_armed(WARM_RELEASE, "warming"):
                    if self.status(executor)[0] > 0:
                        if self.take(WARM_RELEASE, "warming"):
                            self.kill(executor, "warming")
                        return
                    time.sleep(0.05)
            finally:
                with self._lock:
                    self._watching.discard(executor)

        threading.Thread(target=watch, name="streamscale-chaos-warming", daemon=True).start()

    def kill(self, executor: str, phase: str) -> None:
        """SIGKILL ``executor``'s JVM; the event records its running tasks and whether it
        was being released (this run asked Spark to kill it, or Spark was removing it)."""
        pid = executor_pids(self.sc.applicationId).get(executor)
        if pid is None:
            miss = {"ev": "miss", "executor": executor, "phase": phase, "wall": time.time()}
            append_event(self.work / "events.jsonl", miss)
            return
        res = self.res
        tasks, removing = self.status(executor)
        releasing = (
            removing or phase == "releasing" or (res is not None and res.releasing(executor))
        )
        warmed = res is not None and executor in res.warmed
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        kind = MID_BATCH if phase == "running tasks" else WARM_RELEASE
        append_event(self.work / "events.jsonl", {
            "ev": "fault", "kind": kind, "wall": time.time(), "executor": executor,
            "pid": pid, "phase": phase if not warmed else f"{phase} (already warm)",
            "active_tasks": tasks, "releasing": releasing,
            "incarnation": self.incarnation})  # fmt: skip

    def _busy_executor(self) -> str | None:
        """An executor running tasks now (Spark's status store) and not being released,
        chosen at random."""
        seq = self.sc._jsc.sc().statusStore().executorList(True)
        busy = []
        for i in range(seq.size()):
            e = seq.apply(i)
            if e.id() != "driver" and e.isActive() and e.activeTasks() > 0:
                busy.append(str(e.id()))
        if self.res is not None:
            busy = [e for e in busy if not self.res.releasing(e)]
        return self.rng.choice(sorted(busy)) if busy else None

    def run(self) -> None:
        arm = self.work / "arm.json"
        while not self._stop.wait(0.1):
            try:
                got = json.loads(arm.read_text()) if arm.exists() else {}
                kind, phase, arm_id = got.get("kind"), got.get("phase"), got.get("id")
            except (OSError, ValueError, AttributeError):
                continue
            with self._lock:
                self.armed = None if kind is None or arm_id in self.spent else (kind, phase)
                self._arm_id = arm_id
            if kind == MID_BATCH:
                victim = self._busy_executor()
                if victim is not None and self.take(MID_BATCH):
                    self.kill(victim, "running tasks")

    def start(self) -> FaultAgent:
        threading.Thread(target=self.run, name="streamscale-chaos-agent", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()


def _listen_for_start(spark: Any, events: Path, inc: int) -> None:
    """A ``query`` event when Spark starts the streaming query (its own timestamp)."""
    from datetime import datetime

    from pyspark.sql.streaming import StreamingQueryListener

    class Started(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            wall = time.time()
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                wall = datetime.fromisoformat(str(event.timestamp)).timestamp()
            append_event(events, {"ev": "query", "wall": wall, "incarnation": inc})

        def onQueryProgress(self, event: Any) -> None:
            return None

        def onQueryIdle(self, event: Any) -> None:
            return None

        def onQueryTerminated(self, event: Any) -> None:
            return None

    spark.streams.addListener(Started())


def _process_started() -> float | None:
    """This process's start, in epoch seconds: its start tick after boot (``/proc``)
    against the seconds since boot now (``/proc/uptime``, to a hundredth of a second)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        up = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (up - ticks / os.sysconf("SC_CLK_TCK"))
    return None


def _stop_when_done(spark: Any, batch_id: int) -> None:
    """Stop the query once Spark committed ``batch_id`` (its last batch)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for q in spark.streams.active:
            p = q.lastProgress
            if p is not None and int(p.get("batchId", -1)) >= batch_id:
                q.stop()
                return
        time.sleep(0.2)
    for q in spark.streams.active:
        q.stop()


def main(argv: list[str] | None = None) -> int:
    cfg = json.loads((argv if argv is not None else sys.argv[1:])[0])
    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.executors.resources import QUICK_START_JVM, executor_conf
    from streamscale.runtime.spark.executors.session import build_session

    work, inc = Path(cfg["work"]), int(cfg["incarnation"])
    events, sink = work / "events.jsonl", work / "sink"
    born = _process_started()
    if born is not None:
        append_event(events, {"ev": "proc", "wall": born, "incarnation": inc})
    append_event(events, {"ev": "main", "wall": time.time(), "incarnation": inc})
    conf = executor_conf(cfg["executor_cores"], cfg["max_executors"], pin=False,
                         separate_hosts=False, quick_start=True)  # fmt: skip
    # the driver JVM started as the executors' are (C1 only, one compiler thread, the
    # serial collector): it starts on the two cores the cluster's JVMs share, and its
    # start is most of a driver restart (a local session: 24-25 s against 36-41 s)
    conf["spark.driver.extraJavaOptions"] = QUICK_START_JVM
    spark = build_session(cfg["master"], app_name="streamscale-chaos", conf=conf)
    sc = spark.sparkContext
    append_event(events, {"ev": "session", "wall": time.time(), "incarnation": inc})
    agent = FaultAgent(sc, work, inc, cfg["seed"])
    res = ChaosResources(sc, cores_per_executor=cfg["executor_cores"],
                         max_executors=cfg["max_executors"], initial_executors=1, pin=False,
                         agent=agent)  # fmt: skip
    agent.res = res
    agent.start()
    res.settle(180.0)
    _listen_for_start(spark, events, inc)
    append_event(events, {"ev": "start", "wall": time.time(), "incarnation": inc,
                          "app": sc.applicationId})  # fmt: skip
    total = int(cfg["options"]["total"])
    job = Job.simple("calc", chaos_calculator, source_options=cfg["options"],
                     instances=cfg["instances"], shards=cfg["shards"],
                     cost_ms=float(cfg["options"]["cost_ms"]), trigger_s=cfg["trigger_s"],
                     sink={"format": "jsonl", "path": str(sink)},
                     params={"cost_kind": "wall"})  # fmt: skip

    def on_batch(rec: Any) -> None:
        seqs = sink_seqs(sink, rec.batch_id)
        hi = max(seqs) if seqs else None
        append_event(events, {"ev": "commit", "wall": time.time(), "batch": rec.batch_id,
                              "rows": rec.rows, "seq_hi": hi, "incarnation": inc,
                              "duration_s": round(float(rec.duration_s), 3),
                              "executors": len(res.alive())})  # fmt: skip
        if hi is not None and hi >= total - 1:
            threading.Thread(target=_stop_when_done, args=(spark, rec.batch_id),
                             daemon=True).start()  # fmt: skip

    target = cfg["trigger_s"] * 1000.0
    run_job(spark, job, policy="elastic", duration_s=cfg["duration_s"],
            checkpoint=work / "ckpt", out=work / f"run-{inc}",
            params={"latency_target_ms": target, "catch_up_s": cfg["catch_up_s"],
                    "catch_up_form": "latency"},
            on_batch=on_batch, seed=cfg["seed"], resources=res)  # fmt: skip
    agent.stop()
    append_event(events, {"ev": "end", "wall": time.time(), "incarnation": inc})
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
