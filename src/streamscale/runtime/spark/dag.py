"""``run_graph``: run a :class:`~streamscale.runtime.spark.graph.JobGraph` on Spark.

Each micro-batch runs the whole DAG inside ``foreachBatch``
(:func:`~streamscale.runtime.spark.graph.run_graph_batch`); every keyed operator
runs through :func:`~streamscale.runtime.spark.keyed.run_keyed` with its own
shards, routing table (a :class:`~streamscale.runtime.spark.realizer.SparkRealizer`
per keyed operator over one plan covering them all) and state. Only when the
whole DAG, sinks included, succeeded is the state of every keyed operator
committed, so a batch that fails or whose driver dies is replayed from the
checkpoint with the same input and overwrites its own partial output.

Under ``policy="static"`` the plan is fixed for the run (each keyed operator: one
unit per executor, :func:`~streamscale.runtime.spark.graph.merged_default_plan`, or
the plan given). Under any other policy of :data:`~streamscale.control.POLICIES`
the controller plans the whole topology after every batch from a
:class:`~streamscale.runtime.spark.graph_control.GraphCollector` snapshot, and a
:class:`~streamscale.runtime.spark.graph_control.GraphRealizer` hands the plan to
every keyed operator's realizer for the next batch: each keyed operator gets its
own cores, tasks and routing. With ``resources``, the plan's cores become executors
at the batch boundary, as in :func:`~streamscale.runtime.spark.runner.run_job`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscale.control import Controller, Policy
from streamscale.control.policies import initial_plan, make_policy
from streamscale.control.stimulus import InputLog
from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, Node, Plan
from streamscale.runtime.run_config import RUN_SETTINGS, RunConfig, RunParams, parse_params
from streamscale.runtime.spark.event_time import QueryClock
from streamscale.runtime.spark.graph import JobGraph, SinkOut, merged_default_plan, run_graph_batch
from streamscale.runtime.spark.graph_control import GraphCollector, GraphRealizer
from streamscale.runtime.spark.history import RECENT_BATCHES
from streamscale.runtime.spark.keyed import KeyedSpec, count_dead_letters, release, run_keyed
from streamscale.runtime.spark.metrics import MetricsWriter
from streamscale.runtime.spark.realizer import SparkRealizer
from streamscale.runtime.spark.resources import Resources
from streamscale.runtime.spark.retention import prune_dead_letters
from streamscale.runtime.spark.runner import (
    _backlog_of,
    _register_source,
    control_step,
    drive_query,
    run_seed,
    share_by_default,
)
from streamscale.runtime.spark.session import require_classic
from streamscale.runtime.spark.state import VersionIndex, check_layout, state_backend

__all__ = ["GraphBatch", "GraphResult", "run_graph"]


@dataclass(frozen=True, slots=True)
class GraphBatch:
    """One committed batch: per keyed operator its input rows, and what each sink got.

    ``cores``: cores per keyed operator in the plan for the next batch; ``tasks``: the
    units that ran reduce tasks this batch, per keyed operator; ``extra``: the control
    step's decision and, with executors, their figures.
    """

    batch_id: int
    duration_s: float
    keyed_rows: Mapping[str, int]
    sinks: Mapping[str, SinkOut]
    dead_letters: int
    cores: Mapping[str, int] = field(default_factory=dict)
    tasks: Mapping[str, int] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GraphResult:
    """A finished run: its most recent committed batches (in order, at most
    :data:`~streamscale.runtime.spark.history.RECENT_BATCHES`: a job runs for weeks and
    its driver must not keep every batch), the plan used, and whole-run totals: batches
    committed, rows into each keyed operator and rows out of each sink."""

    batches: tuple[GraphBatch, ...]
    plan: Plan
    dead_letters: int
    count: int = 0
    keyed_rows: Mapping[str, int] = field(default_factory=dict)
    sink_rows: Mapping[str, int] = field(default_factory=dict)


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
) -> GraphResult:
    """Run ``graph`` for ``duration_s`` seconds (or ``max_batches`` batches).

    Parameters
    ----------
    spark
        A SparkSession.
    graph
        The job graph.
    duration_s
        Wall seconds until the query is stopped.
    checkpoint
        Spark's offsets (``spark/``) and every keyed operator's state (``state/``).
    out
        Base of relative sink paths and of ``dead_letters/`` (default: ``checkpoint``).
    max_batches
        Stop once this many batches committed (a batch Spark already started when the
        limit is reached completes and commits too).
    plan
        Routing of every keyed operator (default: :func:`merged_default_plan`).
    on_batch
        Called in the driver after each batch committed.
    source_df
        A streaming DataFrame to read instead of the source operator's format
        and options (any ``spark.readStream`` source).
    policy
        ``static`` (a fixed plan), a policy name or a policy object; it plans every
        keyed operator after each batch.
    params
        The policy's and the controller's settings: parsed
        :class:`~streamscale.runtime.run_config.RunParams` (from the edge), or a mapping the
        one parse (:func:`~streamscale.runtime.run_config.parse_params`) reads here.
    seed
        Seed of randomized policies.
    cluster
        Nodes to plan for (``--cluster``); default: the executors' capacity with
        ``resources``, else one node ``local`` with twice Spark's parallelism in slots.
    resources
        Executors to size from the plan (a cluster master), else the local cores.
    state_url
        Where every keyed operator's state lives (any backend URL: a path,
        ``file://DIR?fsync=1``, ``s3://bucket/prefix?endpoint=…``); default
        ``checkpoint/state``. On a cluster of several hosts it must be a store every
        executor reaches.
    available_now
        Process what the source holds when the run starts, then the batches without
        input that Spark would run to advance the watermark and fire timers, then
        stop (as ``trigger(availableNow=True)``); ``duration_s`` still bounds the run.

    Raises
    ------
    StreamscaleError
        A batch failed (the message names the operator's error); nothing of it
        was committed and running again on ``checkpoint`` retries it.
    """
    require_classic(spark)
    checkpoint = Path(checkpoint)
    base = Path(out) if out is not None else checkpoint
    dead_dir = str((base / "dead_letters").resolve())
    if resources is not None:
        cluster = resources.cluster()
    elif cluster is None:
        slots = max(2, int(spark.sparkContext.defaultParallelism)) * 2
        cluster = Cluster.build([Node("local", cores=slots)])
    from streamscale.control.watch import WATCH_SETTINGS

    run_params = parse_params(policy if isinstance(policy, str) else None, params)
    for key in sorted(run_params.given):
        if key in WATCH_SETTINGS:
            raise StreamscaleError(
                "the watch runs for jobs with one keyed operator so far", item=key
            )
    ctl_cfg = run_params.controller
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
    backend = state_backend(state_url or checkpoint / "state")
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
            executors=op.instances,
            shards=op.shards,
            fn=node.fn,
            fn_params=dict(node.params),
            required=tuple(getattr(node.fn, "required_fields", ())),
            backend=backend,
        )
        check_layout(backend, name, op.instances, op.shards)
        indexes[name] = VersionIndex(backend, name, op.instances * op.shards)
        realizers[name] = SparkRealizer(graph.topology, name, plan)
    if source_df is None:
        _register_source(spark, graph)
    schemas: dict[str, Any] = {}
    batches: deque[GraphBatch] = deque(maxlen=RECENT_BATCHES)
    totals = _Totals()
    in_batch = threading.Event()
    done = threading.Event()
    clock = time.monotonic
    start = clock()
    query_ref: list[Any] = []
    taken = [0]
    realizer = GraphRealizer(realizers)
    collector = GraphCollector(
        graph.topology,
        graph.keyed,
        cluster,
        realizers,
        start=0.0,
        backlog=lambda: _backlog_of(query_ref[0], graph, taken[0]) if query_ref else 0.0,
        interval_s=graph.trigger_s,
    )
    controller = Controller(pol, ctl_cfg)
    inputs = InputLog.start(
        pol, params=pol_params, seed=seed, config=ctl_cfg, topology=graph.topology,
        cluster=cluster,
    )  # fmt: skip
    if source_df is None:
        reader = spark.readStream.format(graph.source_format)
        if graph.source_options:
            reader = reader.options(**dict(graph.source_options))
        source_df = reader.load()
    elif not getattr(source_df, "isStreaming", False):
        raise StreamscaleError(
            "stream() needs a streaming DataFrame (spark.readStream...)",
            item=f"operator {graph.source}",
        )
    clock_ = QueryClock.build(graph, source_df, checkpoint, available_now=available_now)
    source_df = clock_.paced(spark, source_df)

    def on_micro_batch(batch_df: Any, batch_id: int) -> None:
        in_batch.set()
        t0 = time.perf_counter()
        try:
            times = clock_.times(batch_id)
            written: dict[str, tuple[str, list[int], Any]] = {}
            rows: dict[str, int] = {}
            observed: dict[str, Any] = {}

            def keyed_op(name: str, df: Any) -> Any:
                upto = min(batch_id - 1, backend.committed(name))
                hints, drops = indexes[name].hints(upto)
                attempt = uuid.uuid4().hex
                pmap = realizers[name].begin_batch()
                placed = (
                    None
                    if resources is None
                    else resources.locations(realizers[name].active, units=pmap.units)
                )
                if getattr(specs[name].fn, "vectorized", False):
                    from streamscale.runtime.spark.agg.operator import run_agg

                    outputs, stats = run_agg(
                        df, specs[name], specs[name].fn, batch_id=batch_id, upto=upto,
                        pmap=pmap, attempt=attempt, hints=hints, drops=drops, placed=placed,
                        **clock_.keyed_args(times),
                    )  # fmt: skip
                else:
                    outputs, stats = run_keyed(
                        df,
                        specs[name],
                        batch_id=batch_id,
                        upto=upto,
                        pmap=pmap,
                        attempt=attempt,
                        hints=hints,
                        drops=drops,
                        dead_letter_dir=dead_dir,
                        placed=placed,
                        initial=_initial(specs[name].fn, batch_id),
                        **clock_.keyed_args(times),
                    )
                written[name] = (attempt, [g for t in stats.tasks for g in t.shards], hints)
                rows[name] = stats.rows
                observed[name] = stats
                realizers[name].observe({g: v[1] for t in stats.tasks for g, v in t.shards.items()})
                return outputs

            sinks = run_graph_batch(
                batch_df,
                graph,
                batch_id=batch_id,
                run_keyed_op=keyed_op,
                out_dir=base,
                schemas=schemas,
            )
            # The barrier: the whole DAG succeeded, so every keyed operator commits.
            for name, (attempt, shards, hints) in written.items():
                backend.commit(name, batch_id)
                indexes[name].committed(batch_id, attempt, shards, hints)
            for name in graph.keyed:
                release(name)
            clock_.after_batch(spark, times)
            dead = count_dead_letters(dead_dir, batch_id)
            gone = (
                prune_dead_letters(dead_dir, run_params.output["dead_letters_max_mb"] * 2**20)
                if dead
                else 0
            )
            totals.pruned += gone
            first = graph.keyed[0]
            taken[0] = rows.get(first, 0) + dead
            for name, stats in observed.items():
                collector.observe(name, stats)
            extra: dict[str, Any] = {"backlog": collector.backlog, **clock_.record(times)}
            if gone:
                extra["dead_letters_pruned"] = gone
            late = {n: st.late_rows for n, st in observed.items() if st.late_rows}
            if late:
                extra["late_rows"] = late
            now = clock() - start
            control_step(controller, collector, realizer, resources, now, extra, log=inputs)
            extra["state_read_bytes"] = {  # from the store, not a worker's cache: moved here
                n: sum(t.state_read_bytes for t in st.tasks) for n, st in observed.items()
            }
            placement = {n: st.placement() for n, st in observed.items() if st.planned}
            if placement:
                extra["placement"] = placement
            rec = GraphBatch(
                batch_id=batch_id,
                duration_s=time.perf_counter() - t0,
                keyed_rows=rows,
                sinks=sinks,
                dead_letters=dead,
                cores=_op_cores(realizer.current(), graph),
                tasks={n: len({t.unit for t in st.tasks}) for n, st in observed.items()},
                extra=extra,
            )
            batches.append(rec)
            totals.add(rec)
            if on_batch is not None:
                on_batch(rec)
            if max_batches is not None and totals.count >= max_batches:
                done.set()
        finally:
            in_batch.clear()

    stop_at = time.monotonic() + duration_s
    while True:  # availableNow: again while the last run asked Spark for another batch
        stream = (
            source_df.writeStream.foreachBatch(on_micro_batch)
            .option("checkpointLocation", str((checkpoint / "spark").resolve()))
            .queryName(f"streamscale-graph-{graph.topology.name}-{uuid.uuid4().hex[:8]}")
        )
        if available_now:
            stream = stream.trigger(availableNow=True)
        elif graph.trigger_s > 0:
            stream = stream.trigger(processingTime=f"{graph.trigger_s} seconds")
        ticks = clock_.ticks()
        query = stream.start()
        query_ref[:] = [query]
        drive_query(
            query,
            stop_at=stop_at,
            done=done,
            in_batch=in_batch,
            records=batches,
            item=f"topology {graph.topology.name}",
        )
        if not available_now or done.is_set() or time.monotonic() >= stop_at:
            break
        if clock_.ticks() == ticks:
            break
    return GraphResult(
        tuple(batches), plan, count_dead_letters(dead_dir) + totals.pruned, totals.count,
        dict(totals.keyed_rows), dict(totals.sink_rows),
    )  # fmt: skip


@dataclass
class _Totals:
    """Whole-run totals of a graph run's batches (the records themselves are a ring)."""

    count: int = 0
    pruned: int = 0  # dead letters removed by the retention limit
    keyed_rows: Counter[str] = field(default_factory=Counter)
    sink_rows: Counter[str] = field(default_factory=Counter)

    def add(self, b: GraphBatch) -> None:
        self.count += 1
        self.keyed_rows.update(b.keyed_rows)
        self.sink_rows.update({k: v.rows for k, v in b.sinks.items()})


def _initial(fn: Any, batch_id: int) -> Any:
    """A processor's initial state, applied in the query's first batch only (as Spark)."""
    held = getattr(fn, "initial_state", None)
    return None if held is None or batch_id != 0 else held.value


def _op_cores(plan: Plan, graph: JobGraph) -> dict[str, int]:
    """Cores per keyed operator in ``plan``: its instances' cores summed, executor-level
    (``op[e]``) and operator-level (``op``, as ``rc`` and ``model-driven`` plan) alike."""
    from streamscale.model.ids import operator_of

    out = dict.fromkeys(graph.keyed, 0)
    for inst, k in plan.allocation.cores.items():
        op = operator_of(inst)
        if op in out:
            out[op] += int(k)
    return out


def needs_graph(topology: Any) -> bool:
    """Whether ``topology`` is beyond ``run_job``'s linear one-keyed-operator shape."""
    from streamscale.runtime.spark.job import Job

    try:
        Job.build(topology, {op.name: _unused for op in topology.operators})
    except StreamscaleError:
        return True
    return False


def _unused(*_: Any, **__: Any) -> None:
    return None


def run_graph_command(
    job_file: Path,
    config: RunConfig,
    *,
    checkpoint: Path | None,
    out_dir: Path | None,
) -> dict[str, Any]:
    """``streamscale run`` on a DAG topology; a summary dict.

    Every option of ``config`` is honoured as on the linear path: on a cluster master
    without a cluster file the plan's cores become executors; ``config.cluster`` is the
    cluster file to plan for; ``config.metrics_port`` serves Prometheus ``/metrics``;
    ``config.spark_ui`` turns Spark's UI on or off. With ``out_dir``, one JSON line per
    batch goes to ``metrics.jsonl`` (rows per keyed operator, cores per keyed operator,
    sink rows, the controller's decision and the executors' figures).
    """
    import json
    import tempfile

    from streamscale.model.io import load_cluster
    from streamscale.runtime.spark.resources import (
        ExecutorResources,
        executor_conf,
        is_cluster_master,
    )
    from streamscale.runtime.spark.session import build_session

    graph = JobGraph.from_yaml(job_file)
    cluster = load_cluster(Path(config.cluster)) if config.cluster else None
    ckpt = checkpoint or (
        out_dir / "checkpoint" if out_dir else Path(tempfile.mkdtemp(prefix="streamscale-ckpt-"))
    )
    elastic = is_cluster_master(config.master) and cluster is None
    conf = executor_conf(config.executor_cores, config.max_executors) if elastic else None
    exporter = None
    if config.metrics_port is not None:
        from streamscale.runtime.spark.exporter import MetricsExporter

        exporter = MetricsExporter(config.metrics_port, job=graph.topology.name)
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None
    spark = build_session(
        config.master,
        app_name=f"streamscale-{graph.topology.name}",
        conf=conf,
        ui=config.spark_ui,
    )
    resources = None
    if elastic:
        resources = ExecutorResources(
            spark.sparkContext,
            cores_per_executor=config.executor_cores,
            min_executors=config.min_executors,
            max_executors=config.max_executors,
        )
        resources.wait_for(config.min_executors, 120.0)
    kept = parse_params(config.policy, config.params).output
    log = (
        MetricsWriter(out_dir / "metrics.jsonl", max_mb=kept["metrics_max_mb"],
                      keep=kept["metrics_keep"])
        if out_dir
        else None
    )  # fmt: skip

    def on_batch(b: GraphBatch) -> None:
        if exporter is not None:
            exporter.observe_graph(b)
        if log is not None:
            sinks = {k: v.rows for k, v in b.sinks.items()}
            row = {"batch": b.batch_id, "duration_s": b.duration_s, "keyed_rows": b.keyed_rows,
                   "cores": b.cores, "sinks": sinks, "dead_letters": b.dead_letters, **b.extra}  # fmt: skip
            log.write(json.dumps(row, default=str))

    t0 = time.monotonic()
    try:
        res = run_graph(
            spark,
            graph,
            duration_s=config.duration_s,
            checkpoint=ckpt,
            out=out_dir,
            max_batches=config.max_batches,
            policy=config.policy,
            params=config.params,
            seed=config.seed,
            cluster=cluster,
            resources=resources,
            on_batch=on_batch,
            state_url=config.state_url,
            available_now=config.available_now,
        )
    finally:
        if exporter is not None:
            exporter.close()
        if owned:
            spark.stop()
    last = res.batches[-1].cores if res.batches else {}
    return {
        "job": graph.topology.name,
        "policy": config.policy,
        "batches": res.count,
        "keyed_rows": {k: res.keyed_rows.get(k, 0) for k in graph.keyed},
        "cores_last": dict(last),
        "sink_rows": {s: res.sink_rows.get(s, 0) for s in graph.sinks},
        "wall_s": time.monotonic() - t0,
        "dead_letters": res.dead_letters,
        "checkpoint": str(ckpt),
        "state_url": config.state_url or str(ckpt / "state"),
        "out": str(out_dir) if out_dir else None,
        **({"metrics_url": exporter.url} if exporter is not None else {}),
    }
