"""Restart-based rescaling: what a Spark user can build today, as Flink's autoscaler does.

The calculator runs as Spark's own ``transformWithStateInPandas`` on RocksDB
(:mod:`~streamscale.scenarios.tws`). After every batch a DS2 controller
(:func:`~streamscale.planning.allocation.ds2.ds2_parallelism`) reads, over a window of
the last batches, the offered rate (the source's available offsets, as Kafka's end
offsets would give it), the backlog, and the *true* processing rate — rows per second
of busy time, which the processor adds up in a Spark accumulator. When the parallelism
it asks for differs from the query's (scale-in only below the utilization boundary and
after the stabilization interval), the decision is applied as Flink applies it:

1. executors are requested for the new parallelism (one task per slot);
2. the query is stopped — a batch it interrupts is not committed;
3. its state is repartitioned offline
   (``spark._streamingCheckpointManager.repartition(checkpoint, n)``; an interrupted batch
   is skipped, ``enforce_exactly_once_sink=False``, and its input read again after the
   restart — the sink here is ``noop``, so nothing is duplicated);
4. the query restarts on the same checkpoint with ``n`` shuffle partitions.

Each rescale is recorded: when it was decided, the parallelism before and after, the
stop, repartition and restart times; its downtime (stop to the restarted query's first
committed batch) becomes the next decision's ``restart_s`` (Flink's observed restart
time). Where the API refuses (an operator it cannot repartition), the refusal is
recorded in one line and the query restarts with its old partitions on the new
executors.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.planning.allocation.ds2 import ds2_parallelism
from streamscale.scenarios.scoring import Request

__all__ = ["Ds2Settings", "Ds2Window", "decide", "rescale", "run_restart_ds2"]


@dataclass(frozen=True)
class Ds2Settings:
    """The controller's settings, after Flink's autoscaler options of the same meaning.

    Flink's defaults are sized for jobs that run for days (metrics window 15 min,
    stabilization 5 min, catch-up 30 min); these are the same rules at the scenario's
    time scale, every one named in the output.
    """

    #: ``job.autoscaler.utilization.target``
    target_utilization: float = 0.7
    #: ``job.autoscaler.utilization.boundary``: scale in only below target − boundary
    utilization_boundary: float = 0.3
    #: ``job.autoscaler.metrics.window``, in batches
    window_batches: int = 3
    #: ``job.autoscaler.stabilization.interval``: no rescale this soon after the last
    stabilization_s: float = 10.0
    #: ``job.autoscaler.restart.time`` before any restart was observed
    restart_s: float = 10.0
    #: ``job.autoscaler.catch-up.duration`` (default: half the latency target)
    catch_up_s: float | None = None


@dataclass(frozen=True, slots=True)
class Ds2Window:
    """What the controller saw over its window of batches."""

    offered_rate: float
    backlog: float
    rows: int
    busy_s: float
    elapsed_s: float


def decide(
    w: Ds2Window,
    parallelism: int,
    *,
    settings: Ds2Settings,
    catch_up_s: float,
    restart_s: float,
    slots_per_executor: int,
    max_parallelism: int,
) -> int:
    """The parallelism to rescale to (``parallelism`` itself: no rescale).

    DS2's one step on the true rate; the result is rounded up to whole executors (one
    task per slot). Scale-in only when the window's utilization (busy time over the
    slots' time) is below ``target − boundary``.

    Examples
    --------
    >>> s = Ds2Settings()
    >>> w = Ds2Window(offered_rate=300.0, backlog=600.0, rows=400, busy_s=8.0, elapsed_s=6.0)
    >>> decide(w, 4, settings=s, catch_up_s=5.0, restart_s=10.0, slots_per_executor=2,
    ...        max_parallelism=16)  # true rate 50/s per task: (300 + 840) / 35 -> 16
    16
    """
    if w.busy_s <= 0 or w.rows <= 0:
        return parallelism
    true_rate = w.rows / w.busy_s
    p = ds2_parallelism(
        w.offered_rate,
        w.backlog,
        true_rate,
        target_utilization=settings.target_utilization,
        catch_up_s=catch_up_s,
        restart_s=restart_s,
        max_parallelism=max_parallelism,
    )
    p = min(max_parallelism, slots_per_executor * math.ceil(p / slots_per_executor))
    if p < parallelism:
        utilization = w.busy_s / max(w.elapsed_s * parallelism, 1e-9)
        if utilization >= settings.target_utilization - settings.utilization_boundary:
            return parallelism
    return p


def run_restart_ds2(
    master: str,
    cfg: Any,
    *,
    on_batch: Callable[[dict[str, Any]], None],
    settings: Ds2Settings | None = None,
) -> Any:
    """The surge scenario (``cfg``: a :class:`~streamscale.scenarios.surge.SurgeConfig`)
    under restart-based DS2 rescaling; a :class:`~streamscale.scenarios.surge.SurgeOutcome`."""
    from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.runtime.spark.sources.sources import GeneratorSpec, register_sources
    from streamscale.scenarios.spark_log import ProgressLog, executor_spans
    from streamscale.scenarios.surge_outcome import ExecutorSampler, SurgeOutcome
    from streamscale.scenarios.tws import ROCKSDB_CONF, calculator_query

    st = settings or Ds2Settings()
    catch_up = st.catch_up_s if st.catch_up_s is not None else cfg.latency_target_ms / 2000.0
    cores, max_ex = cfg.executor_cores, cfg.max_executors
    # Spark's own stateful operator: no streamscale steering, Spark's locality as before
    conf = executor_conf(cores, max_ex, pin=False, separate_hosts=False,
                         quick_start=cfg.quick_start, steer_wait_s=None)  # fmt: skip
    conf.update(ROCKSDB_CONF)
    outcome = SurgeOutcome("restart-ds2")
    p = cfg.static_executors(cfg.base_rate) * cores
    outcome.settings = {**asdict(st), "catch_up_s": catch_up, "initial_parallelism": p,
                        **ROCKSDB_CONF}  # fmt: skip
    spark = build_session(master, app_name="streamscale-surge-restart-ds2", conf=conf)
    sc = spark.sparkContext
    register_sources(spark)
    spec = GeneratorSpec.from_options(cfg.source_options())
    busy = sc.accumulator(0.0)
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-restart-"))
    ck = str((scratch / "ck").resolve())
    log = ProgressLog().attach(spark)
    sampler = ExecutorSampler(sc)

    def start(n: int) -> Any:
        spark.conf.set("spark.sql.shuffle.partitions", str(n))
        df = spark.readStream.format("streamscale_generator").options(**cfg.source_options())
        out = calculator_query(df.load(), cost_kind="wall", busy=busy)
        return (
            out.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", ck)
            .trigger(processingTime=f"{cfg.trigger_s} seconds")
            .start()
        )

    try:
        resources = ExecutorResources(sc, cores_per_executor=cores, max_executors=max_ex,
                                      initial_executors=p // cores, pin=False,
                                      warm_new=False)  # fmt: skip
        resources.settle(120.0)
        with sampler:
            _drive(start, ck, p, cfg, st, catch_up, spec, log, busy, resources, outcome, on_batch)
        outcome.end_s = time.time()
        outcome.spans = log.seq_spans()
        t0 = log.t0()
        outcome.t0 = math.nan if t0 is None else t0
        outcome.executors = executor_spans(sc)
        outcome.samples = list(sampler.samples)
        outcome.requests = [Request(t, n) for t, n in resources.requests]
    except StreamscaleError as exc:
        outcome.error = str(exc)
    finally:
        for q in spark.streams.active:
            q.stop()
        log.detach()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


def _drive(
    start: Callable[[int], Any],
    checkpoint: str,
    p: int,
    cfg: Any,
    st: Ds2Settings,
    catch_up: float,
    spec: Any,
    log: Any,
    busy: Any,
    resources: Any,
    outcome: Any,
    on_batch: Callable[[dict[str, Any]], None],
) -> None:
    cores, max_p = cfg.executor_cores, cfg.max_executors * cfg.executor_cores
    query = start(p)
    deadline = time.time() + cfg.duration_s
    window: deque[tuple[float, int, float, int]] = deque(maxlen=st.window_batches)
    seen, last_busy = 0, 0.0
    # as Flink's autoscaler after a job (re)start: no decision within the stabilization
    # interval, and the first batch of each run (start-up, recovery) is not a sample
    restart_s, calm_until = st.restart_s, time.time() + st.stabilization_s
    first_of_run = True
    pending: dict[str, Any] | None = None  # the last rescale, until its first batch
    while time.time() < deadline:
        if query.exception() is not None:
            raise StreamscaleError(f"batch failed: {query.exception()}", item="restart-ds2")
        time.sleep(0.1)
        with log._lock:
            new = [e for e in log.events[seen:] if e.run_id == str(query.runId)]
            seen = len(log.events)
        for e in new:
            b = float(busy.value)
            end = e.end_offset.get("seq", 0) if isinstance(e.end_offset, dict) else 0
            if not first_of_run:
                window.append((e.end_s, e.rows, b - last_busy, int(end)))
            first_of_run = False
            last_busy = b
            on_batch({"policy": "restart-ds2", "batch": e.batch_id, "rows": e.rows,
                      "executors": len(resources.alive()), "partitions": p})  # fmt: skip
            if pending is not None and e.rows > 0:
                pending["downtime_s"] = e.end_s - pending["stopped_at"]
                restart_s = pending["downtime_s"]
                outcome.rescales.append(pending)
                pending = None
        t0 = log.t0()
        if len(window) < st.window_batches or t0 is None or time.time() < calm_until:
            continue
        now = time.time()
        span = max(window[-1][0] - window[0][0], cfg.trigger_s)
        w = Ds2Window(
            offered_rate=(spec.available(now - t0) - spec.available(now - t0 - span)) / span,
            backlog=max(0.0, float(spec.available(now - t0) - window[-1][3])),
            rows=sum(x[1] for x in list(window)[1:]),
            busy_s=sum(x[2] for x in list(window)[1:]),
            elapsed_s=span,
        )
        target = decide(w, p, settings=st, catch_up_s=catch_up, restart_s=restart_s,
                        slots_per_executor=cores, max_parallelism=max_p)  # fmt: skip
        if target == p:
            continue
        pending = rescale(query, start, p, target, cores, resources, log._spark, checkpoint)
        pending["window"] = asdict(w)
        query = pending.pop("query")
        p = pending["applied"]
        window.clear()
        first_of_run = True
        calm_until = time.time() + st.stabilization_s
    query.stop()
    if pending is not None:
        outcome.rescales.append(pending)


def rescale(
    query: Any, start: Callable[[int], Any], p: int, target: int, cores: int,
    resources: Any, spark: Any, checkpoint: str,
) -> dict[str, Any]:  # fmt: skip
    """Stop, repartition offline, restart: the rescale's record (``applied``: the
    partitions the query restarted with) and the new ``query``. ``resources``: the
    executors to resize (``None``: a fixed cluster)."""
    rec: dict[str, Any] = {"decided_at": time.time(), "from": p, "to": target}
    if target > p and resources is not None:  # executors start during the stop and repartition
        resources.scale_to(target // cores)
    query.stop()
    rec["stopped_at"] = time.time()
    applied = target
    try:
        spark._streamingCheckpointManager.repartition(checkpoint, target, False)
        rec["repartition_s"] = time.time() - rec["stopped_at"]
    except Exception as exc:  # the API refused: restart on the old partitions
        rec["refused"] = str(exc).strip().splitlines()[0][:300]
        applied = p
    if target < p and resources is not None:
        resources.scale_to(target // cores)
    rec["query"] = start(applied)
    rec["restarted_at"] = time.time()
    rec["applied"] = applied
    return rec
