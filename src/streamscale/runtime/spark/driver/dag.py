"""``run_graph``: run a :class:`~streamscale.runtime.spark.driver.graph.JobGraph` on Spark.

Each micro-batch runs the whole DAG inside ``foreachBatch``
(:class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatchBody`); every keyed operator
runs through :func:`~streamscale.runtime.spark.keyed.keyed.run_keyed` with its own
shards, routing table (a :class:`~streamscale.runtime.spark.routing.realizer.SparkRealizer`
per keyed operator over one plan covering them all) and state. Only when the
whole DAG, sinks included, succeeded is the state of every keyed operator
committed, so a batch that fails or whose driver dies is replayed from the
checkpoint with the same input and overwrites its own partial output.

Under ``policy="static"`` the plan is fixed for the run (each keyed operator: one
unit per executor, :func:`~streamscale.runtime.spark.driver.graph.merged_default_plan`, or
the plan given). Under any other policy of :data:`~streamscale.control.POLICIES`
the controller plans the whole topology after every batch from a
:class:`~streamscale.runtime.spark.driver.graph_control.GraphCollector` snapshot, and a
:class:`~streamscale.runtime.spark.driver.graph_control.GraphRealizer` hands the plan to
every keyed operator's realizer for the next batch: each keyed operator gets its
own cores, tasks and routing, folded onto the cores ready to run them (executors still
starting get no task). With ``resources``, the plan's cores become executors at the
batch boundary; when the policy sizes cores from load and the source knows what it
offered, the watch (:mod:`~streamscale.runtime.spark.driver.watch`, once per job) reads the
source while a batch runs, requests executors mid-batch, warms those that arrive and
keeps the source's admission limit. The run keeps a bounded history
(:class:`~streamscale.runtime.spark.driver.history.RunHistory`) of the job's figures.
"""

from __future__ import annotations

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
from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, Plan
from streamscale.runtime.run_config import RUN_SETTINGS, RunParams, parse_params
from streamscale.runtime.spark.compat.event_time import QueryClock
from streamscale.runtime.spark.driver.drive import (
    BatchGate,
    drive_query,
    register_graph_source,
    run_seed,
    share_by_default,
)
from streamscale.runtime.spark.driver.fusion import fused_chains
from streamscale.runtime.spark.driver.graph import JobGraph, local_cluster, merged_default_plan
from streamscale.runtime.spark.driver.graph_batch import (
    GraphBatch,
    GraphBatchBody,
    GraphTotals,
    SourceProbe,
)
from streamscale.runtime.spark.driver.graph_control import GraphCollector, GraphRealizer
from streamscale.runtime.spark.driver.history import RunHistory
from streamscale.runtime.spark.driver.job import Job, fused_job
from streamscale.runtime.spark.driver.metrics import MetricsWriter
from streamscale.runtime.spark.driver.operator import linear_stage
from streamscale.runtime.spark.driver.query import StreamingQuery, start_query, wait_for
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.driver.watch import SourceWatch, make_watch, warm_keyed_path
from streamscale.runtime.spark.executors.resources import Resources, is_cluster_master
from streamscale.runtime.spark.executors.session import require_classic
from streamscale.runtime.spark.executors.warm import warm_up
from streamscale.runtime.spark.keyed.keyed import KeyedSpec, count_dead_letters
from streamscale.runtime.spark.routing.realizer import SparkRealizer
from streamscale.runtime.spark.sources.source_registry import source_offered
from streamscale.runtime.spark.state.state import (
    StateBackend,
    VersionIndex,
    check_layout,
    query_committed,
    state_backend,
)
from streamscale.settings import Frozen

__all__ = [
    "GraphBatch",
    "KeyedState",
    "PlanAndPolicy",
    "RunContext",
    "RunResult",
    "StreamingQuery",
    "Watched",
    "run_graph",
    "start_graph",
]


def start_graph(
    spark: Any,
    graph: JobGraph,
    *,
    duration_s: float,
    checkpoint: Path,
    out: Path | None = None,
    max_batches: int | None = None,
    plan: Plan | None = None,
    on_batch: Callable[[GraphBatch], None] | None = None,
    source_df: Any | None = None,
    policy: str | Policy,
    params: Mapping[str, Any] | RunParams | None = None,
    seed: int | None = None,
    cluster: Cluster | None = None,
    resources: Resources | None = None,
    state_url: str | None = None,
    available_now: bool = RUN_SETTINGS["available_now"].default,
    fuse: bool = True,
) -> StreamingQuery:
    """Start ``graph``; it runs for ``duration_s`` seconds (or ``max_batches`` batches)
    or until stopped (:meth:`StreamingQuery.stop
    <streamscale.runtime.spark.driver.query.StreamingQuery.stop>`).

    Parameters
    ----------
    spark
        A SparkSession.
    graph
        The job graph. One of the linear shape
        (:func:`~streamscale.runtime.spark.driver.job.fused_job`) runs its keyed operator,
        the stateless operators after it and its sinks in the reduce tasks
        (:func:`~streamscale.runtime.spark.driver.operator.linear_stage`), whoever built it.
    duration_s
        Wall seconds until the query is stopped (``math.inf``: until stopped).
    checkpoint
        Spark's offsets (``spark/``) and every keyed operator's state (``state/``).
    out
        Base of relative sink paths and of ``dead_letters/`` (default: ``checkpoint``);
        when given, each batch's line (``GraphBatch.to_json``) goes to
        ``out/metrics.jsonl`` (rotated as the output settings say).
    max_batches
        Stop once this many batches committed (a batch Spark already started when the
        limit is reached completes and commits too).
    plan
        Routing of every keyed operator (default: :func:`merged_default_plan`).
    on_batch
        Called in the driver after each batch committed.
    source_df
        A streaming DataFrame (any ``spark.readStream`` source) to read instead of the
        source operator's.
    policy
        ``static`` (a fixed plan), a policy name or a policy object; it plans every
        keyed operator after each batch.
    params
        The policy's, the controller's and the watch's settings: parsed
        :class:`~streamscale.runtime.run_config.RunParams` (from the edge), or a mapping the
        one parse (:func:`~streamscale.runtime.run_config.parse_params`) reads here.
    seed
        Seed of randomized policies.
    cluster
        Nodes to plan for (``--cluster``); default: the executors' capacity with
        ``resources``, else :func:`~streamscale.runtime.spark.driver.graph.local_cluster`.
    resources
        Executors to size from the plan (a cluster master), else the local cores.
    state_url
        Where every keyed operator's state lives (a path or any backend URL,
        ``s3://bucket/prefix?endpoint=…``); default ``checkpoint/state``. On several
        hosts it must be a store every executor reaches.
    available_now
        Process what the source holds when the run starts, then the batches without
        input that Spark would run to advance the watermark and fire timers, then
        stop (as ``trigger(availableNow=True)``); ``duration_s`` still bounds the run.
    fuse
        Run a linear graph's chain in its keyed operator's reduce tasks (on a source
        without a watermark), and each chain of declarative aggregations on one key in
        its first operator's (:func:`~streamscale.runtime.spark.driver.fusion.fused_chains`);
        ``False``: every operator in a stage of its own (the same results).

    Returns
    -------
    StreamingQuery
        The running job, once its Spark query started; its ``result()`` once it ended
        (:class:`RunResult`: no cores, physical limit or efficiency, which the graph does
        not know). A failed batch ends it with a :class:`StreamscaleError` naming the
        operator's error (nothing of it was committed; a run on ``checkpoint`` retries
        it); a setting, the state or the source refused raises one here.
    """
    require_classic(spark)
    ctx = _context(
        spark, graph, checkpoint=Path(checkpoint), out=out, plan=plan, policy=policy,
        params=params, seed=seed, cluster=cluster, resources=resources, state_url=state_url,
        own_source=source_df is None,  # else the caller's DataFrame, not graph.source_format
    )  # fmt: skip
    source_df, query_clock = _source(ctx, source_df, available_now=available_now)
    _warm(ctx)
    body = _body(
        ctx, query_clock, out=out, on_batch=on_batch, max_batches=max_batches, fuse=fuse
    )  # fmt: skip
    return _launch(ctx, body, source_df, duration_s=duration_s, available_now=available_now)


def run_graph(
    spark: Any,
    graph: JobGraph,
    *,
    duration_s: float,
    checkpoint: Path,
    out: Path | None = None,
    max_batches: int | None = None,
    plan: Plan | None = None,
    on_batch: Callable[[GraphBatch], None] | None = None,
    source_df: Any | None = None,
    policy: str | Policy,
    params: Mapping[str, Any] | RunParams | None = None,
    seed: int | None = None,
    cluster: Cluster | None = None,
    resources: Resources | None = None,
    state_url: str | None = None,
    available_now: bool = RUN_SETTINGS["available_now"].default,
    fuse: bool = True,
) -> RunResult:
    """Run ``graph`` for ``duration_s`` seconds (or ``max_batches`` batches): as
    :func:`start_graph`, and return its ``result()`` once the query ended (a failed batch
    raises its :class:`StreamscaleError`: nothing of it was committed)."""
    return wait_for(
        start_graph(
            spark, graph, duration_s=duration_s, checkpoint=checkpoint, out=out,
            max_batches=max_batches, plan=plan, on_batch=on_batch, source_df=source_df,
            policy=policy, params=params, seed=seed, cluster=cluster, resources=resources,
            state_url=state_url, available_now=available_now, fuse=fuse,
        )
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlanAndPolicy:
    """What a run plans with: the cluster planned for, the first plan, the policy, its
    name (the batch lines'), the parsed settings (the policy's own as ``policy_params``,
    ``share_cores`` derived) and the seed."""

    cluster: Cluster
    plan: Plan
    policy: Policy
    name: str
    run_params: RunParams
    policy_params: Frozen
    seed: int


@dataclass(frozen=True, slots=True)
class KeyedState:
    """Every keyed operator's spec, state version index and routing realizer, over one
    state backend."""

    backend: StateBackend
    specs: Mapping[str, KeyedSpec]
    indexes: Mapping[str, VersionIndex]
    realizers: Mapping[str, SparkRealizer]


@dataclass(frozen=True, slots=True)
class Watched:
    """The run's view of its source: the watch (``None``: nothing to watch), the source
    options it adds, the probe the collector and the batch body read, and whether the
    source is the job's own (not a caller's DataFrame)."""

    watch: SourceWatch | None
    options: Mapping[str, str]
    probe: SourceProbe
    own_source: bool


@dataclass(frozen=True, slots=True)
class RunContext:
    """One run of a job graph as :func:`run_graph` assembles it before its query starts:
    the session and graph, where it writes (``base``: sinks and ``dead_letters/``), the
    local cores, the executors, the plan and policy, the keyed state and the watch."""

    spark: Any
    graph: JobGraph
    checkpoint: Path
    base: Path
    dead_dir: str
    physical: int
    resources: Resources | None
    chosen: PlanAndPolicy
    keyed: KeyedState
    watched: Watched


def _context(
    spark: Any,
    graph: JobGraph,
    *,
    checkpoint: Path,
    out: Path | None,
    plan: Plan | None,
    policy: str | Policy,
    params: Mapping[str, Any] | RunParams | None,
    seed: int | None,
    cluster: Cluster | None,
    resources: Resources | None,
    state_url: str | None,
    own_source: bool,
) -> RunContext:
    """The run assembled from its steps: plan and policy, keyed state, the watch."""
    base = Path(out) if out is not None else checkpoint
    physical = int(spark.sparkContext.defaultParallelism)
    chosen = _plan_and_policy(
        graph, policy, params, physical=physical, seed=seed, plan=plan, cluster=cluster,
        resources=resources,
    )  # fmt: skip
    backend = state_backend(state_url or checkpoint / "state")
    keyed = _keyed_state(graph, backend, chosen.plan, query_committed(checkpoint / "spark"))
    return RunContext(
        spark=spark, graph=graph, checkpoint=checkpoint, base=base,
        dead_dir=str((base / "dead_letters").resolve()), physical=physical,
        resources=resources, chosen=chosen, keyed=keyed,
        watched=_watch(spark, graph, chosen, resources, checkpoint, own_source=own_source),
    )  # fmt: skip


def _plan_and_policy(
    graph: JobGraph,
    policy: str | Policy,
    params: Mapping[str, Any] | RunParams | None,
    *,
    physical: int,
    seed: int | None,
    plan: Plan | None,
    cluster: Cluster | None,
    resources: Resources | None,
) -> PlanAndPolicy:
    """The cluster (the executors' capacity, the one given, else :func:`local_cluster`),
    the settings parsed once, the policy and the first plan (the one given, else the
    policy's initial plan; ``static`` and a policy object: :func:`merged_default_plan`)."""
    if resources is not None:
        cluster = resources.cluster()
    elif cluster is None:
        instances = sum(graph.topology.operator(n).instances for n in graph.keyed)
        cluster = local_cluster(physical=physical, instances=instances)
    run_params = parse_params(policy if isinstance(policy, str) else None, params)
    pol_params = share_by_default(policy, run_params.policy, resources)
    seed = run_seed(seed)
    if isinstance(policy, str):
        pol = make_policy(policy, graph.topology, cluster, params=pol_params, seed=seed)
        if plan is None:
            plan = (
                merged_default_plan(graph, cluster)
                if policy == "static"
                else initial_plan(policy, graph.topology, cluster, params=pol_params)
            )
    else:
        pol = policy
        plan = plan if plan is not None else merged_default_plan(graph, cluster)
    return PlanAndPolicy(
        cluster=cluster, plan=plan, policy=pol, name=getattr(pol, "name", str(policy)),
        run_params=run_params, policy_params=pol_params, seed=seed,
    )  # fmt: skip


def _keyed_state(graph: JobGraph, backend: StateBackend, plan: Plan, committed: int) -> KeyedState:
    """Each keyed operator's spec, its state's layout checked against ``backend``, its
    version index (checked against ``committed``, the last batch the query committed) and
    its realizer starting from ``plan``."""
    specs: dict[str, KeyedSpec] = {}
    indexes: dict[str, VersionIndex] = {}
    realizers: dict[str, SparkRealizer] = {}
    for name in graph.keyed:
        op = graph.topology.operator(name)
        node = graph.nodes[name]
        assert node.fn is not None and node.key is not None
        specs[name] = KeyedSpec(
            operator=name,
            key=node.key,
            instances=op.instances,
            shards=op.shards,
            fn=node.fn,
            fn_params=dict(node.params),
            required=tuple(getattr(node.fn, "required_fields", ())),
            backend=backend,
            output_schema=_declared_output(node.fn),
        )
        check_layout(backend, name, op.instances, op.shards)
        indexes[name] = VersionIndex(
            backend, name, op.instances * op.shards, query_committed=committed
        )
        realizers[name] = SparkRealizer(graph.topology, name, plan)
    return KeyedState(backend=backend, specs=specs, indexes=indexes, realizers=realizers)


def _watch(
    spark: Any,
    graph: JobGraph,
    chosen: PlanAndPolicy,
    resources: Resources | None,
    checkpoint: Path,
    *,
    own_source: bool,
) -> Watched:
    """The job's own source registered, and the watch that reads the source while
    batches run: once per job (the source's), in the source's tuples (a query may turn a
    tuple into more or fewer keyed rows, so the batch tells it the tuples each batch
    admitted). What the source offered so far: the job's own registered source, or the
    one a caller's DataFrame declared it reads (``stream(df, source=...)``). The
    admission limit needs the reader's option: the job's own source only."""
    declared = own_source or "format" in graph.topology.operator(graph.source).params
    offered = source_offered(graph.source_format, graph.source_options) if declared else None
    watch: SourceWatch | None = None
    options: dict[str, str] = {}
    if own_source:
        register_graph_source(spark, graph)
    if declared:
        watch, options = make_watch(
            chosen.run_params.watch, policy=chosen.policy, policy_params=chosen.policy_params,
            resources=resources, source_format=graph.source_format,
            source_options=graph.source_options, checkpoint=checkpoint,
            trigger_s=graph.trigger_s, admission=own_source,
        )  # fmt: skip
    probe = SourceProbe(spark_dir=checkpoint / "spark", offered=offered, watch=watch)
    return Watched(watch=watch, options=options, probe=probe, own_source=own_source)


def _source(
    ctx: RunContext, source_df: Any | None, *, available_now: bool
) -> tuple[Any, QueryClock]:
    """The streaming DataFrame the query reads (the job's source with the watch's
    options, or the caller's, which must be streaming), paced by the query's clock."""
    graph, options = ctx.graph, ctx.watched.options
    if source_df is None:
        reader = ctx.spark.readStream.format(graph.source_format)
        if graph.source_options or options:
            reader = reader.options(**dict(graph.source_options), **options)
        source_df = reader.load()
    elif not getattr(source_df, "isStreaming", False):
        raise StreamscaleError(
            "stream() needs a streaming DataFrame (spark.readStream...)",
            item=f"operator {graph.source}",
        )
    query_clock = QueryClock.build(graph, source_df, ctx.checkpoint, available_now=available_now)
    return query_clock.paced(ctx.spark, source_df), query_clock


def _warm(ctx: RunContext) -> None:
    """Warm the Python workers; on a cluster master the executors' JVMs too, which start
    cold on the keyed stage's path (shuffle, Arrow, the pandas worker): warmed here, the
    query's first batch does not carry it."""
    sc = ctx.spark.sparkContext
    warm_up(sc, ctx.physical)
    if is_cluster_master(str(sc.master)):
        warm_keyed_path(sc, ctx.physical)


def _body(
    ctx: RunContext,
    query_clock: QueryClock,
    *,
    out: Path | None,
    on_batch: Callable[[GraphBatch], None] | None,
    max_batches: int | None,
    fuse: bool,
) -> GraphBatchBody:
    """The batch body with the collector, the controller (its inputs logged), the run's
    history and, with ``out``, the metrics file, whose line is written before
    ``on_batch`` sees the batch; a linear graph's keyed stage runs its chain fused
    (``fuse``, on a source without a watermark: :func:`fused_job`)."""
    graph, chosen, keyed, watched = ctx.graph, ctx.chosen, ctx.keyed, ctx.watched
    linear = fused_job(graph) if fuse and query_clock.watermark is None else None
    ctl_cfg = chosen.run_params.controller
    collector = GraphCollector(
        graph.topology,
        graph.keyed,
        chosen.cluster,
        keyed.realizers,
        start=0.0,
        backlog=watched.probe.backlog,
        interval_s=graph.trigger_s,
        offered=None if watched.watch is None else watched.probe.offered_rows,
        fused=linear is not None,
    )
    inputs = InputLog.start(
        chosen.policy, params=chosen.policy_params, seed=chosen.seed, config=ctl_cfg,
        topology=graph.topology, cluster=chosen.cluster,
    )  # fmt: skip
    kept = chosen.run_params.output
    log = None if out is None else MetricsWriter(
        Path(out) / "metrics.jsonl", max_mb=kept["metrics_max_mb"], keep=kept["metrics_keep"]
    )  # fmt: skip

    def each(b: GraphBatch) -> None:  # the line is written before the caller sees the batch
        if log is not None:
            log.write(b)
        if on_batch is not None:
            on_batch(b)

    return GraphBatchBody(
        spark=ctx.spark, graph=graph, specs=keyed.specs, indexes=keyed.indexes,
        realizers=keyed.realizers, realizer=GraphRealizer(keyed.realizers),
        collector=collector, controller=Controller(chosen.policy, ctl_cfg), inputs=inputs,
        backend=keyed.backend, resources=ctx.resources, watch=watched.watch, query_clock=query_clock,
        base=ctx.base, dead_dir=ctx.dead_dir, dead_letters_max_mb=kept["dead_letters_max_mb"],
        history=RunHistory(), totals=GraphTotals(), on_batch=each, max_batches=max_batches,
        start=time.monotonic(), policy=chosen.name,
        stage=None if linear is None else linear_stage(linear, keyed.backend, ctx.base),
        console=_console(linear), probe=watched.probe, own_source=watched.own_source,
        chains=fused_chains(graph, enabled=fuse and linear is None),
    )  # fmt: skip


def _launch(
    ctx: RunContext, body: GraphBatchBody, source_df: Any, *, duration_s: float, available_now: bool
) -> StreamingQuery:
    """The query's driver in a thread of its own; its batches pass a gate (stops come
    between them: :class:`~streamscale.runtime.spark.driver.drive.BatchGate`)."""
    gate = BatchGate(body, ctx.spark)

    def drive(stop: threading.Event) -> RunResult:
        _drive(ctx, body, gate, source_df, stop=stop, duration_s=duration_s,
               available_now=available_now)  # fmt: skip
        return _result(body, ctx.dead_dir)

    return start_query(
        drive, gate=gate, recent=body.history.recent, spark_query=lambda: ctx.watched.probe.query
    )


def _drive(
    ctx: RunContext,
    body: GraphBatchBody,
    gate: BatchGate,
    source_df: Any,
    *,
    stop: threading.Event,
    duration_s: float,
    available_now: bool,
) -> None:
    """Run the query through ``gate`` until it is done, ``stop`` is set or ``duration_s``
    passed, the watch beside it. ``available_now``: the query again while its last run
    asked Spark for another batch (the query's clock ticked). A failed batch names the
    topology, or a fused chain's keyed operator."""
    graph, watch, query_clock = ctx.graph, ctx.watched.watch, body.query_clock
    stage = body.stage
    item = f"topology {graph.topology.name}" if stage is None else f"operator {stage.spec.operator}"
    stop_at = time.monotonic() + duration_s
    if watch is not None:
        watch.start()
    try:
        while True:
            stream = (
                source_df.writeStream.foreachBatch(gate)
                .option("checkpointLocation", str((ctx.checkpoint / "spark").resolve()))
                .queryName(f"streamscale-graph-{graph.topology.name}-{uuid.uuid4().hex[:8]}")
            )
            if available_now:
                stream = stream.trigger(availableNow=True)
            elif graph.trigger_s > 0:
                stream = stream.trigger(processingTime=f"{graph.trigger_s} seconds")
            ticks = query_clock.ticks()
            ctx.watched.probe.query = stream.start()
            drive_query(
                ctx.watched.probe.query, stop_at=stop_at, done=body.done,
                in_batch=body.in_batch, records=body.history.recent, item=item,
                gate=gate, stop=stop,
            )  # fmt: skip
            if not available_now or stop.is_set() or gate.closed or time.monotonic() >= stop_at:
                break
            if body.done.is_set() or query_clock.ticks() == ticks:
                break
    finally:
        if watch is not None:
            watch.stop()


def _result(body: GraphBatchBody, dead_dir: str) -> RunResult:
    """The finished run from the body's history and totals, and the newest plan (no
    cores or physical limit: a linear job's run adds them)."""
    history, totals = body.history, body.totals
    return RunResult(
        records=tuple(history.recent), batches=totals.count, plan=body.realizer.current(),
        dead_letters=count_dead_letters(dead_dir) + totals.pruned,
        keyed_rows=dict(totals.keyed_rows), sink_rows=dict(totals.sink_rows),
        throughput=history.throughput(), p50_ms=history.quantile(0.50),
        p99_ms=history.quantile(0.99), busy_s=history.busy_s, cpu_s=history.cpu_s,
        max_tasks=history.max_tasks, rows=history.rows,
    )  # fmt: skip


def _declared_output(fn: Any) -> Any:
    """A keyed function's declared ``output_schema`` (a Spark DDL string or
    ``StructType``) as a ``StructType``: its tasks then emit typed columns (no Arrow
    blobs decoded by one more Python stage on every batch); ``None`` when it declares
    none, or for a declarative operator (its output is typed by Spark already)."""
    from pyspark.sql import types as T

    declared = getattr(fn, "output_schema", None)
    if declared is None or getattr(fn, "vectorized", False) or getattr(fn, "two_sided", False):
        return None
    return T._parse_datatype_string(declared) if isinstance(declared, str) else declared


def _console(linear: Job | None) -> dict[str, int]:
    """Keyed operators whose tasks' sample outputs are printed (a fused chain's console
    sinks; otherwise console sinks print through Spark)."""
    if linear is None or not any(s.format == "console" for s in linear.sinks):
        return {}
    return {linear.keyed: max(s.rows for s in linear.sinks if s.format == "console")}
