"""The driver process of a chaos run (:mod:`~streamscale.scenarios.chaos`).

``python -m streamscale.scenarios.chaos_driver CONFIG_JSON`` runs the chaos job — the
micro-benchmark generator on a load trace into :func:`chaos_calculator`, whose outputs
carry each tuple's ``seq`` into a JSON Lines file sink — under the ``elastic`` policy with
executors requested and released on a standalone cluster, on a checkpoint that a
restarted process resumes. The supervising process SIGKILLs this process and starts it
again; it arms the executor faults through a file (``arm.json``) that this process's
:class:`FaultAgent` carries out where only the driver can time them: an executor killed
while its tasks run, or while it is being warmed up or released. Every committed batch
and every fault carried out is one line of ``events.jsonl`` (wall-clock seconds).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from streamscale.runtime.spark.executors.resources import ExecutorResources
from streamscale.runtime.spark.keyed.functions import calculator

__all__ = [
    "ChaosResources",
    "FaultAgent",
    "chaos_calculator",
    "executor_pids",
    "main",
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


@dataclass
class ChaosResources(ExecutorResources):
    """:class:`ExecutorResources` that, when :attr:`armed`, SIGKILLs an executor at the
    moment it is being warmed up (found cold by the watch, whose warm-up job then runs on
    it) or released (Spark just asked to kill it)."""

    agent: FaultAgent | None = None

    def cold_executors(self) -> list[str]:
        cold = super().cold_executors()
        if cold and self.agent is not None and self.agent.take(WARM_RELEASE):
            victim = cold[0]
            delay = self.agent.rng.uniform(0.2, 1.0)  # while its warm-up job runs
            threading.Timer(delay, self.agent.kill, (victim, "warming", self)).start()
        return cold

    def _kill(self, ids: Any) -> bool:
        ok = super()._kill(ids)
        if ok and ids and self.agent is not None and self.agent.take(WARM_RELEASE):
            self.agent.kill(next(iter(ids)), "releasing", self)
        return ok


@dataclass
class FaultAgent:
    """Carries out the executor fault the supervisor arms in ``arm.json``."""

    sc: Any
    work: Path
    incarnation: int
    seed: int
    rng: random.Random = field(init=False)
    armed: str | None = None
    #: the armings carried out or withdrawn (``arm.json``'s ``id``): never twice
    spent: set[int] = field(default_factory=set)
    _arm_id: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 1000 + self.incarnation)

    def take(self, kind: str) -> bool:
        """Whether ``kind`` is armed; disarms it (one fault per arming)."""
        with self._lock:
            if self.armed != kind:
                return False
            self.armed = None
            if self._arm_id is not None:
                self.spent.add(self._arm_id)
        with contextlib.suppress(FileNotFoundError):
            (self.work / "arm.json").unlink()
        return True

    def kill(self, executor: str, phase: str, res: ExecutorResources | None = None) -> None:
        pid = executor_pids(self.sc.applicationId).get(executor)
        if pid is None:
            miss = {"ev": "miss", "executor": executor, "phase": phase, "wall": time.time()}
            append_event(self.work / "events.jsonl", miss)
            return
        warmed = res is not None and executor in res.warmed
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        kind = MID_BATCH if phase == "running tasks" else WARM_RELEASE
        append_event(self.work / "events.jsonl", {
            "ev": "fault", "kind": kind, "wall": time.time(), "executor": executor,
            "pid": pid, "phase": phase if not warmed else f"{phase} (already warm)",
            "incarnation": self.incarnation})  # fmt: skip

    def _busy_executor(self) -> str | None:
        """An executor running tasks now (Spark's status store), chosen at random."""
        seq = self.sc._jsc.sc().statusStore().executorList(True)
        busy = []
        for i in range(seq.size()):
            e = seq.apply(i)
            if e.id() != "driver" and e.isActive() and e.activeTasks() > 0:
                busy.append(str(e.id()))
        return self.rng.choice(sorted(busy)) if busy else None

    def run(self) -> None:
        arm = self.work / "arm.json"
        while not self._stop.wait(0.1):
            try:
                got = json.loads(arm.read_text()) if arm.exists() else {}
                kind, arm_id = got.get("kind"), got.get("id")
            except (OSError, ValueError, AttributeError):
                continue
            with self._lock:
                self.armed = None if arm_id in self.spent else kind
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
    from streamscale.runtime.spark.executors.resources import executor_conf
    from streamscale.runtime.spark.executors.session import build_session

    work, inc = Path(cfg["work"]), int(cfg["incarnation"])
    events, sink = work / "events.jsonl", work / "sink"
    conf = executor_conf(cfg["executor_cores"], cfg["max_executors"], pin=False,
                         separate_hosts=False, quick_start=True)  # fmt: skip
    spark = build_session(cfg["master"], app_name="streamscale-chaos", conf=conf)
    sc = spark.sparkContext
    agent = FaultAgent(sc, work, inc, cfg["seed"]).start()
    res = ChaosResources(sc, cores_per_executor=cfg["executor_cores"],
                         max_executors=cfg["max_executors"], initial_executors=1, pin=False,
                         agent=agent)  # fmt: skip
    res.settle(180.0)
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
