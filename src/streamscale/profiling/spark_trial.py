"""Profiling trials on Spark: generator source → task on one core with τ threads → sink.

Trials run as a Structured Streaming query over the ``streamscale_generator``
source (one partition). Starting a query costs seconds, so the rates one
thread count will be tried at, in ascending order, are one query whose source
follows a staircase schedule: a warm-up, then ``seconds`` at each rate; each
step is judged when it ends and the query stops at the first unstable one. In ``foreachBatch`` the micro-batch goes to a
single Python worker that pins itself to one CPU core
(``os.sched_setaffinity``; threads it starts inherit the mask) and runs the
task with a pool of τ threads — the "one resource slot" of paper 004, §5.1.
The sink is the driver: every tuple's latency is its completion time minus its
event (emission) time. A step is stable when the slope of its tuples' latency
against time is at most λ_L^max and the worker was not saturated (see
:func:`summarize`); CPU % is the worker's CPU seconds over the
wall time of the trial, memory % the worker's resident memory above what it
held before the task was built, against one slot's share of the machine's
memory (total ÷ cores).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.profiling.profiler import TrialResult, latency_slope
from streamscale.profiling.tasks import Task, check_task, make_task

__all__ = ["SparkTrials", "default_core", "run_partition", "summarize"]

# Per Python worker: built tasks and the RSS before each was built (workers are reused).
_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Task, int]] = {}


def default_core() -> int | None:
    """The last core this process may run on (None where affinity is unsupported)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return max(os.sched_getaffinity(0))


def _task(name: str, params: tuple[tuple[str, str], ...]) -> tuple[Task, int]:
    import psutil

    key = (name, params)
    if key not in _CACHE:
        rss0 = psutil.Process().memory_info().rss
        _CACHE[key] = (make_task(name, dict(params)), rss0)
    return _CACHE[key]


def run_partition(
    name: str,
    params: tuple[tuple[str, str], ...],
    threads: int,
    core: int | None,
    rows: Iterator[Any],
) -> Iterator[dict[str, Any]]:
    """Worker side of a trial: run the task over a micro-batch on one core with τ threads."""
    import psutil

    data = [(int(r[0]), float(r[1])) for r in rows]
    if not data:
        return iter(())
    task, rss0 = _task(name, params)
    pinned = core is not None and hasattr(os, "sched_setaffinity")
    old = os.sched_getaffinity(0) if pinned else None
    if pinned:
        os.sched_setaffinity(0, {core})
    proc = psutil.Process()
    cpu0 = sum(proc.cpu_times()[:2])
    start = time.time()
    done = np.zeros(len(data))

    def work(i: int) -> None:
        task(data[i][0], 0.0)
        done[i] = time.time()

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(work, range(len(data))))
    finally:
        if pinned:
            os.sched_setaffinity(0, old)  # type: ignore[arg-type]
    end = time.time()
    return iter(
        [
            {
                "seq0": data[0][0],
                "seqs": [d[0] for d in data],
                "event": [d[1] for d in data],
                "done": done.tolist(),
                "cpu_s": sum(proc.cpu_times()[:2]) - cpu0,
                "start": start,
                "end": end,
                "rss": max(0, proc.memory_info().rss - rss0),
            }
        ]
    )


@dataclass
class SparkTrials:
    """``run_trial(threads, rate, then)`` for :func:`streamscale.profiling.profiler.profile`, on Spark.

    Parameters
    ----------
    spark
        A SparkSession (local or cluster); the generator source is registered on it.
    task
        A bundled task (:data:`streamscale.profiling.tasks.TASKS`).
    seconds
        Length of each rate step (the paper ran 12-minute trials).
    warmup
        Seconds at the first rate before its step is measured (query start-up).
    max_latency_slope
        λ_L^max in seconds of latency per second. The paper used ≈0.001 over
        12-minute trials; over a step of a few seconds, micro-batch jitter of a
        few hundred milliseconds alone reads as 0.1-0.3 s/s, so the default is
        0.5 and the busy share (which an overload pushes past 1 at once) does
        the fine work.
    max_utilization
        Highest share of a step the task's worker may be busy and still be stable.
    trigger_ms
        Micro-batch interval.
    core
        CPU core to confine the task to (default: the last allowed core).
    """

    spark: Any
    task: str
    seconds: float = 3.0
    warmup: float = 3.0
    max_latency_slope: float = 0.5
    max_utilization: float = 0.9
    trigger_ms: int = 200
    core: int | None = field(default_factory=default_core)
    task_params: Mapping[str, Any] = field(default_factory=dict)
    workdir: Path | None = None

    def __post_init__(self) -> None:
        from streamscale.runtime.spark.sources.sources import register_sources

        register_sources(self.spark)
        check_task(self.task, self.task_params)  # fail early on an unknown task or parameter
        self._tmp = self.workdir or Path(tempfile.mkdtemp(prefix="streamscale-profile-"))
        self._n = 0
        self._query: Any = None
        self._threads = 0
        self._steps: list[float] = []
        self._step = 0
        self._batches: list[dict[str, Any]] = []
        self._spec: Any = None
        self._t0 = 0.0
        self._stop = [False]
        self._lead = 0.0
        self._jobs: list[tuple[float, float]] = []
        self._started: float | None = None

    def close(self) -> None:
        """Stop the running query, if any, between two micro-batches."""
        if self._query is None:
            return
        self._stop[0] = True
        deadline = time.time() + 10.0
        try:
            # Interrupting a running foreachBatch makes Spark log a long spurious trace.
            while self._query.isActive and self._query.status.get("isTriggerActive"):
                if time.time() > deadline:
                    break
                time.sleep(0.05)
            self._query.stop()
        finally:
            self._query = None

    def __call__(self, threads: int, rate: float, then: Sequence[float] = ()) -> TrialResult:
        expected = self._steps[self._step] if self._step < len(self._steps) else None
        if self._query is None or threads != self._threads or expected != rate:
            self._start(threads, [rate, *then])
        try:
            res = self._judge()
        except BaseException:
            self.close()
            raise
        self._step += 1
        if not res.stable or self._step >= len(self._steps):
            self.close()
        return res

    def _warm(self, params: tuple[tuple[str, str], ...]) -> float:
        """Start a Python worker and build the task in it; returns seconds taken."""
        name, t = self.task, time.time()
        self.spark.sparkContext.parallelize([0], 1).mapPartitions(
            lambda it: iter([_task(name, params)[1]])
        ).collect()
        return time.time() - t

    def _start(self, threads: int, steps: list[float]) -> None:
        from pyspark.sql import functions as F

        from streamscale.runtime.spark.sources.sources import GeneratorSpec

        self.close()
        params = tuple(sorted((str(k), str(v)) for k, v in self.task_params.items()))
        if self._jobs and self._started is not None:
            # The last query's first micro-batch shows how long start-up really takes.
            self._lead = max(2.0, min(self._lead, 1.5 * (self._jobs[0][1] - self._started)))
        elif not self._lead:
            # Query start-up is a few job round trips; the warm-up job times one.
            self._lead = max(3.0, 3.0 * self._warm(params))
        self._n += 1
        self._threads, self._steps, self._step = threads, steps, 0
        schedule = (
            (0.0, steps[0]),
            *((self.warmup + k * self.seconds, r) for k, r in enumerate(steps)),
        )
        # Emission starts at t0, once the query is up, so start-up leaves no backlog.
        self._t0 = time.time() + self._lead
        self._spec = GeneratorSpec(
            keys=1000,
            cost_ms=0.0,
            payload_bytes=16,
            rate=steps[0],
            schedule=schedule,
            seed=self._n,
            partitions=1,
            start_time=self._t0,
        )
        self._batches = batches = []
        self._jobs = jobs = []
        self._stop = stop = [False]
        name, core = self.task, self.core

        def sink(df: Any, batch_id: int) -> None:
            if stop[0]:
                return
            t = time.time()
            rdd = df.select("seq", F.col("event_time").cast("double")).coalesce(1).rdd
            out = rdd.mapPartitions(
                lambda it: run_partition(name, params, threads, core, it)
            ).collect()
            batches.extend(out)
            jobs.append((t, time.time()))

        src = self.spark.readStream.format("streamscale_generator").options(
            **self._spec.to_options()
        )
        self._started = time.time()
        self._query = (
            src.load()
            .writeStream.foreachBatch(sink)
            .trigger(processingTime=f"{self.trigger_ms} milliseconds")
            .option("checkpointLocation", str(self._tmp / f"trial-{self._n}"))
            .start()
        )

    def _judge(self) -> TrialResult:
        """Wait until every tuple of the current step has been processed, then judge it.

        Micro-batches carry contiguous, ascending offset ranges, so once a
        processed tuple reaches the step's end the whole step is done.
        """
        k, rate = self._step, self._steps[self._step]
        a = self.warmup + k * self.seconds
        b = a + self.seconds
        lo, hi = self._spec.available(a), self._spec.available(b)
        give_up = self._t0 + b + max(120.0, 20.0 * self.seconds)
        while True:
            if self._query.exception() is not None:
                raise StreamscaleError(
                    f"trial query failed: {str(self._query.exception()).splitlines()[0]}",
                    item=f"task {self.task}",
                )
            if any(x["seqs"][-1] >= hi - 1 for x in self._batches) or time.time() > give_up:
                break
            time.sleep(0.05)
        return summarize(
            self._threads,
            rate,
            self._batches,
            lo,
            hi,
            self._t0 + a,
            self._t0 + b,
            self.max_latency_slope,
            self.max_utilization,
        )


def summarize(
    threads: int,
    rate: float,
    batches: list[dict[str, Any]],
    lo: int,
    hi: int,
    start: float,
    end: float,
    max_slope: float,
    max_utilization: float = 0.9,
) -> TrialResult:
    """Judge the step of tuples ``lo`` ≤ seq < ``hi`` emitted between ``start`` and ``end``.

    Stable when every tuple was processed, processing the step's tuples kept
    the task busy for at most ``max_utilization`` of the step's length
    (micro-batching hides Spark's per-batch overhead in bigger batches, so the
    task's busy share is what saturates), and —
    when at least three micro-batches carried the step, enough to fit a
    trend — the latency slope is at most ``max_slope``.
    """
    import psutil

    def cat(key: str) -> np.ndarray:
        return (
            np.concatenate([np.asarray(x[key], dtype=float) for x in batches])
            if batches
            else np.zeros(0)
        )

    seqs, done, event = cat("seqs"), cat("done"), cat("event")
    mask = (seqs >= lo) & (seqs < hi)
    lat = done[mask] - event[mask]
    # Busy time and CPU of each micro-batch, charged to the step by its share of the tuples:
    # the batch may run well after the step when Spark's per-batch overhead is high.
    busy = cpu_s = 0.0
    carried = 0
    for x in batches:
        q = np.asarray(x["seqs"])
        share = float(np.sum((q >= lo) & (q < hi))) / max(len(q), 1)
        if share > 0:
            carried += 1
            busy += share * (x["end"] - x["start"])
            cpu_s += share * x["cpu_s"]
    slope = latency_slope(done[mask], lat) if carried >= 3 else 0.0
    span = max(end - start, 1e-9)
    util = busy / span
    slot_bytes = psutil.virtual_memory().total / max(1, os.cpu_count() or 1)
    rss = max((x["rss"] for x in batches), default=0)
    complete = mask.sum() >= max(hi - lo, 1)
    return TrialResult(
        threads=threads,
        rate=rate,
        stable=bool(complete and util <= max_utilization and slope <= max_slope),
        latency_slope=slope,
        achieved_rate=float(mask.sum()) / span,
        cpu=round(min(100.0 * cpu_s / max(busy, span), 100.0), 3),
        memory=round(100.0 * rss / slot_bytes, 3),
        processed=int(mask.sum()),
        latency_p50_ms=float(np.median(lat) * 1000) if lat.size else 0.0,
        utilization=round(util, 4),
    )
