"""``run_job``: run a job on Spark with an elastic keyed operator and the control loop.

Each micro-batch goes through :func:`streamscale.runtime.spark.operator.run_batch`
(the DataFrame/Arrow keyed stage every keyed operator runs on) inside ``foreachBatch``; at every batch boundary the runner feeds the batch to
the collector and runs one :func:`streamscale.control.loop.step` with the wall
clock, so a policy's plan takes effect from the next batch (paper 000, §3.2:
the boundary is the consistency point). State and Spark's offsets live under
``checkpoint``; running again on the same checkpoint resumes exactly where the
last committed batch ended.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamscale.control import Controller, Policy
from streamscale.control.policies import initial_plan, make_policy
from streamscale.control.stimulus import InputLog
from streamscale.model import Cluster, Node, Plan
from streamscale.runtime.run_config import RunParams, parse_params
from streamscale.runtime.spark.collector import SparkCollector
from streamscale.runtime.spark.drive import (
    backlog_of,
    control_step,
    drive_query,
    register_source,
    run_seed,
    share_by_default,
)
from streamscale.runtime.spark.history import RunHistory
from streamscale.runtime.spark.job import Job
from streamscale.runtime.spark.keyed import KeyedSpec
from streamscale.runtime.spark.metrics import BatchRecord, MetricsWriter, build_record
from streamscale.runtime.spark.operator import (
    LinearStage,
    TaskSinks,
    count_dead_letters,
    run_batch,
    warm_up,
)
from streamscale.runtime.spark.realizer import SparkRealizer, default_plan
from streamscale.runtime.spark.resources import Resources, is_cluster_master
from streamscale.runtime.spark.retention import prune_dead_letters
from streamscale.runtime.spark.session import require_classic
from streamscale.runtime.spark.state import VersionIndex, check_layout, state_backend
from streamscale.runtime.spark.watch import make_watch, warm_keyed_path

__all__ = [
    "BatchRecord",
    "RunResult",
    "drive_query",
    "run_job",
    "share_by_default",
    "summarize_run",
]

# Planning slots per core when no cluster is given: a unit is a Spark task, and
# tasks queue on the cores, so more (smaller) tasks than cores is how a skewed
# executor gets its share; every executor needs at least one.
_SLOTS_PER_CORE = 2


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run.

    ``throughput`` (tuples/s) and the latency percentiles are over the batches
    after the first (which carries Spark's start-up); ``efficiency`` is
    throughput ÷ the physical limit, ``cores ÷ mean per-tuple cost``.
    ``busy_s`` and ``cpu_s`` sum the keyed tasks' wall and CPU seconds: on a
    shared machine ``cpu_s`` far below ``busy_s`` means the cores were not ours.
    ``batches``, ``rows`` and ``max_tasks`` cover the whole run; ``records`` holds only
    the most recent batches (:data:`~streamscale.runtime.spark.history.RECENT_BATCHES`),
    and the percentiles come from a sketch of every latency (1 % relative error).
    ``plan`` is the newest plan: the one the last batch decided, which a next batch
    (or a resumed run) would take, even when the run stopped before it took effect.
    """

    records: list[BatchRecord]
    throughput: float
    p50_ms: float
    p99_ms: float
    efficiency: float
    dead_letters: int
    physical_limit: float = math.nan
    cores: int = 0
    plan: Plan | None = None
    busy_s: float = 0.0
    cpu_s: float = 0.0
    batches: int = 0
    rows: int = 0
    max_tasks: int = 0


def _resolve_policy(
    policy: str | Policy,
    job: Job,
    cluster: Cluster,
    params: Mapping[str, Any],
    seed: int | None,
) -> tuple[Policy, Plan]:
    if not isinstance(policy, str):
        return policy, default_plan(job.topology, job.keyed, cluster)
    pol = make_policy(policy, job.topology, cluster, params=params, seed=seed)
    return pol, initial_plan(policy, job.topology, cluster, params=params)


def linear_stage(job: Job, backend: Any, base: Path) -> LinearStage:
    """The keyed stage of ``job`` for a run: the keyed function with the stateless
    operators after it and the file sinks in its reduce tasks, the ones before it as
    ``mapInPandas`` stages; relative sink paths and ``dead_letters/`` under ``base``."""
    op = job.operator

    def side(names: tuple[str, ...]) -> tuple[tuple[Any, Mapping[str, Any]], ...]:
        return tuple((job.functions[n], dict(job.topology.operator(n).params)) for n in names)

    files = tuple(
        (s.format, str((base / s.path).resolve()))
        for s in job.sinks
        if s.format in ("jsonl", "parquet") and s.path
    )
    spec = KeyedSpec(
        operator=job.keyed,
        key=str(op.key),
        executors=op.instances,
        shards=op.shards,
        fn=job.functions[job.keyed],
        fn_params=dict(op.params),
        required=tuple(getattr(job.functions[job.keyed], "required_fields", ())),
        backend=backend,
        after=side(job.after),
        task_sink=TaskSinks(files) if files else None,
        sample_rows=max((s.rows for s in job.sinks if s.format == "console"), default=0),
        emit=False,
    )
    return LinearStage(
        spec=spec,
        before=tuple(zip(job.before, side(job.before), strict=True)),
        dead_letter_dir=str((base / "dead_letters").resolve()),
        sink_dirs=tuple(path for _, path in files),
    )


def run_job(
    spark: Any,
    job: Job,
    *,
    policy: str | Policy,
    duration_s: float,
    checkpoint: Path,
    out: Path | None = None,
    params: Mapping[str, Any] | RunParams | None = None,
    on_batch: Callable[[BatchRecord], None] | None = None,
    max_batches: int | None = None,
    seed: int | None = None,
    cluster: Cluster | None = None,
    resources: Resources | None = None,
    plan: Plan | None = None,
    state_url: str | None = None,
) -> RunResult:
    """Run ``job`` for ``duration_s`` seconds (or ``max_batches`` batches) under ``policy``.

    Parameters
    ----------
    spark
        A SparkSession (see :func:`streamscale.runtime.spark.session.build_session`).
    job
        The job to run.
    policy
        A policy name from :mod:`streamscale.control.policies`, or a policy object.
    duration_s
        Wall seconds from the query's start until it is stopped.
    checkpoint
        Directory for Spark's offsets (``spark/``) and shard state (``state/``).
    out
        When given: ``metrics.jsonl`` (one line per batch) and ``dead_letters/``
        go there (dead letters go under ``checkpoint`` otherwise).
    params
        The policy's, the controller's and the watch's settings: parsed
        :class:`~streamscale.runtime.run_config.RunParams` (from the edge), or a mapping the
        one parse (:func:`~streamscale.runtime.run_config.parse_params`) reads here.
    on_batch
        Called with each batch's record (in the driver, at the batch boundary).
    max_batches
        Stop after this many batches.
    seed
        Passed to the policy.
    cluster
        Nodes to plan for. Default: one node ``local`` with
        ``max(parallelism, executors) × 2`` slots (units are Spark tasks that
        queue on the cores); the physical limit uses Spark's default
        parallelism as the core count.
    resources
        Executors that follow the plan (:mod:`streamscale.runtime.spark.resources`):
        planning uses its capacity model, and at each batch boundary, after the
        batch's state committed, the plan's cores become executors.
    plan
        The plan of the first batch (default: the policy's initial plan).
    state_url
        Where the keyed state lives (:data:`~streamscale.runtime.spark.state_api.STATE_URL`:
        a path, ``file://DIR?fsync=1``, ``s3://bucket/prefix?endpoint=…``); default
        ``checkpoint/state``. On a cluster of several hosts it must be a store every
        executor reaches.

    Raises
    ------
    StreamscaleError
        The batch failed (an operator function raised: the message names it);
        its state was not committed and running again retries the batch.
    """
    require_classic(spark)
    checkpoint = Path(checkpoint)
    sc = spark.sparkContext
    physical = int(sc.defaultParallelism)
    if resources is not None:
        cluster = resources.cluster()
        cores = cluster.total_cores
    elif cluster is None:
        slots = max(physical, job.operator.instances) * _SLOTS_PER_CORE
        cluster = Cluster.build([Node("local", cores=slots)])
        cores = physical
    else:
        cores = cluster.total_cores
    run_params = parse_params(policy if isinstance(policy, str) else None, params)
    watch_cfg, ctl_cfg = run_params.watch, run_params.controller
    pol_params = share_by_default(policy, run_params.policy, resources)
    seed = run_seed(seed)
    pol, initial = _resolve_policy(policy, job, cluster, pol_params, seed)
    initial = plan if plan is not None else initial
    register_source(spark, job)
    watch, watch_options = make_watch(
        watch_cfg, policy=pol, policy_params=pol_params, resources=resources,
        source_format=job.source_format, source_options=job.source_options,
        checkpoint=checkpoint, trigger_s=job.trigger_s,
    )  # fmt: skip

    op = job.operator
    backend = state_backend(state_url or checkpoint / "state")  # e.g. s3://bucket/prefix
    check_layout(backend, job.keyed, op.instances, op.shards)
    index = VersionIndex(backend, job.keyed, op.instances * op.shards)
    base = Path(out) if out is not None else checkpoint
    kept = run_params.output
    writer = (
        MetricsWriter(Path(out) / "metrics.jsonl", max_mb=kept["metrics_max_mb"],
                      keep=kept["metrics_keep"])
        if out is not None
        else None
    )  # fmt: skip
    stage = linear_stage(job, backend, base)
    pruned = [0]  # dead letters removed by the retention limit, over the run
    console = any(s.format == "console" for s in job.sinks)

    warm_up(sc, physical)
    if is_cluster_master(str(sc.master)):
        # executors' JVMs start cold on the keyed stage's path (shuffle, Arrow, the pandas
        # worker): warmed here, the query's first batch does not carry it
        warm_keyed_path(sc, physical)
    clock = time.monotonic
    t0 = clock()
    realizer = SparkRealizer(job.topology, job.keyed, initial)
    query_ref: list[Any] = []
    collector = SparkCollector(
        job.topology,
        job.keyed,
        cluster,
        realizer,
        start=0.0,
        backlog=lambda: backlog_of(query_ref[0], job, taken[0]) if query_ref else 0.0,
        interval_s=job.trigger_s,
        offered=None if watch is None else (lambda: watch.rate),
    )
    controller = Controller(pol, ctl_cfg)
    inputs = InputLog.start(
        pol, params=pol_params, seed=seed, config=ctl_cfg, topology=job.topology, cluster=cluster
    )
    history = RunHistory()
    in_batch = threading.Event()
    done = threading.Event()
    last_end = [0.0]
    taken = [0]
    seen_requests = [0]

    def on_micro_batch(batch_df: Any, batch_id: int) -> None:
        in_batch.set()
        try:
            # tasks only for cores ready to run them (executors still starting get none)
            ready = getattr(resources, "ready_cores", None)
            ready_cores = ready() if ready is not None else None
            pmap = realizer.begin_batch(ready_cores or None)
            upto = min(batch_id - 1, backend.committed(job.keyed))
            hints, drops = index.hints(upto)
            attempt = uuid.uuid4().hex
            placed = (
                None
                if resources is None
                else resources.locations(realizer.active, units=pmap.units)
            )
            stats = run_batch(
                batch_df, stage, batch_id=batch_id, upto=upto, pmap=pmap, attempt=attempt,
                hints=hints, drops=drops, placed=placed,
            )  # fmt: skip
            index.committed(batch_id, attempt, (g for t in stats.tasks for g in t.shards), hints)
            taken[0] = stats.rows + stats.dead_letters
            collector.observe(stats)
            realizer.observe({g: v[1] for t in stats.tasks for g, v in t.shards.items()})
            now = clock() - t0
            extra: dict[str, Any] = {
                "units": list(pmap.units),
                "backlog": collector.backlog,
                # state read from the store, not a worker's cache: shards that moved here
                "state_read_bytes": sum(t.state_read_bytes for t in stats.tasks),
                "ready_cores": ready_cores,
                "stage_s": stats.duration_s,
                # per task, longest first: (worker daemon, busy s, rows) — where a long
                # batch spent its time
                "task_runs": sorted(
                    ((t.executor, round(t.busy_s, 3), t.rows) for t in stats.tasks),
                    key=lambda r: -r[1],
                ),
            }
            if stats.planned:
                extra["placement"] = stats.placement()
                # Spark's executor ids that ran the keyed tasks (its status store)
                extra["task_executors"] = sorted({r.executor for r in stats.runs})
            if stats.dead_letters:
                gone = prune_dead_letters(
                    stage.dead_letter_dir, kept["dead_letters_max_mb"] * 2**20
                )
                if gone:
                    pruned[0] += gone
                    extra["dead_letters_pruned"] = gone
            applied = control_step(
                controller, collector, realizer, resources, now, extra, log=inputs
            )
            if resources is not None:
                extra["cost_kind"] = job.cost_kind
            if watch is not None:
                watch.live.observe(
                    rows=stats.rows, busy_s=sum(t.busy_s for t in stats.tasks),
                    cycle_s=now - last_end[0], planned_cores=realizer.current().allocation.total,
                    longest_s=max((t.busy_s for t in stats.tasks), default=0.0),
                )  # fmt: skip
                extra["admission_limit"] = watch.update_admission()
                extra["mid_batch_requests"] = [r[1] for r in watch.requests[seen_requests[0] :]]
                seen_requests[0] = len(watch.requests)
                extra["watch_inputs"] = watch.drain_inputs()
            for a in applied:
                extra.setdefault("figures", []).append(dict(a.figures))
            rec, lat = build_record(
                stats,
                time=now,
                since_previous_s=now - last_end[0],
                cores=cores,
                policy=getattr(pol, "name", str(policy)),
                extra=extra,
            )
            last_end[0] = now
            history.add(rec, lat)
            if writer is not None:
                writer.write(rec)
            for t in stats.tasks if console else ():
                for row in t.sample:
                    print(f"[{job.keyed} batch {batch_id}] {json.dumps(row, default=str)}")
            if on_batch is not None:
                on_batch(rec)
            if max_batches is not None and len(history) >= max_batches:
                done.set()
        finally:
            in_batch.clear()

    reader = spark.readStream.format(job.source_format)
    if job.source_options or watch_options:
        reader = reader.options(**dict(job.source_options), **watch_options)
    writer_stream = (
        reader.load()
        .writeStream.foreachBatch(on_micro_batch)
        .option("checkpointLocation", str((checkpoint / "spark").resolve()))
        .queryName(f"streamscale-{job.keyed}-{id(realizer)}")
    )
    if job.trigger_s > 0:
        writer_stream = writer_stream.trigger(processingTime=f"{job.trigger_s} seconds")
    query = writer_stream.start()
    query_ref.append(query)
    if watch is not None:
        watch.start()
    try:
        drive_query(
            query,
            stop_at=t0 + duration_s,
            done=done,
            in_batch=in_batch,
            records=history.recent,
            item=f"operator {job.keyed}",
        )
    finally:
        if watch is not None:
            watch.stop()
    return summarize_run(
        history,
        job,
        cores,
        dead_letters=count_dead_letters(stage.dead_letter_dir) + pruned[0],
        plan=realizer.current(),
    )


def summarize_run(
    history: RunHistory,
    job: Job,
    cores: int,
    *,
    dead_letters: int,
    plan: Plan | None,
) -> RunResult:
    """Throughput, latency percentiles and efficiency of a run (the first batch is warm-up).

    Shared by the elastic runner and the Spark-native baseline so both report alike.
    """
    cost = job.cost_ms
    if cost and job.source_format == "streamscale_generator":
        from streamscale.runtime.spark.sources import expected_cost_ms

        cost = expected_cost_ms(cost)  # N(μ, 0.5μ) truncated at 0 has a mean above μ
    limit = cores / (cost / 1000.0) if cost else math.nan
    throughput = history.throughput()
    return RunResult(
        records=list(history.recent),
        throughput=throughput,
        p50_ms=history.quantile(0.50),
        p99_ms=history.quantile(0.99),
        efficiency=throughput / limit if cost else math.nan,
        dead_letters=dead_letters,
        physical_limit=limit,
        cores=cores,
        plan=plan,
        busy_s=history.busy_s,
        cpu_s=history.cpu_s,
        batches=history.batches,
        rows=history.rows,
        max_tasks=history.max_tasks,
    )
