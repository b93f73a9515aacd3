"""One batch of a job graph: its record (:class:`GraphBatch`) and the body that runs it.

:class:`GraphBatchBody` is what :func:`~streamscale.runtime.spark.driver.dag.run_graph` hands
to ``foreachBatch``: it runs the whole DAG
(:func:`~streamscale.runtime.spark.driver.graph.run_graph_batch`), each keyed operator on the
cores ready to run its tasks, commits every keyed operator's state only once the whole
DAG succeeded, feeds the batch to the collector, the watch and the run's bounded
history, and runs one control step (:func:`~streamscale.runtime.spark.driver.drive.control_step`)
with the controller's inputs logged.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.control import Controller
from streamscale.control.stimulus import InputLog
from streamscale.formatting import jsonable
from streamscale.model import Plan
from streamscale.runtime.spark.compat.event_time import QueryClock
from streamscale.runtime.spark.driver.drive import admitted_tuples, backlog_of, control_step
from streamscale.runtime.spark.driver.fusion import offer
from streamscale.runtime.spark.driver.graph import JobGraph, SinkOut, run_graph_batch
from streamscale.runtime.spark.driver.graph_control import GraphCollector, GraphRealizer
from streamscale.runtime.spark.driver.history import RunHistory
from streamscale.runtime.spark.driver.metrics import imbalance
from streamscale.runtime.spark.driver.operator import (
    LinearStage,
    batch_dir,
    percentile,
    run_batch,
)
from streamscale.runtime.spark.driver.watch import SourceWatch, admitted_offset
from streamscale.runtime.spark.executors.resources import Resources
from streamscale.runtime.spark.keyed.keyed import KeyedSpec, count_dead_letters, release, run_keyed
from streamscale.runtime.spark.routing.realizer import SparkRealizer
from streamscale.runtime.spark.state.retention import prune_dead_letters
from streamscale.runtime.spark.state.state import BatchVersion, StateBackend, VersionIndex

__all__ = [
    "LINE_FIELDS", "GraphBatch", "GraphBatchBody", "GraphTotals", "KeyedPass", "SourceProbe",
    "batch_figures", "op_cores",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class GraphBatch:
    """One committed batch of any job (one keyed operator or many): the one record type,
    handed to ``on_batch``, kept in a run's history and written as ``metrics.jsonl``'s line
    (:meth:`to_json`). Per keyed operator its input rows, and what each sink got.

    ``cores``: cores per keyed operator in the plan for the next batch; ``tasks``: the
    units that ran reduce tasks this batch, per keyed operator; ``extra``: the control
    step's decision and, with executors, their figures. The job's figures of the batch:
    ``time`` its end in seconds since the run started; ``rows`` the rows into the first
    keyed operator; ``input_rate`` those rows ÷ the time since the previous batch ended;
    ``processing_rate`` rows ÷ ``duration_s``; the latency percentiles (event time →
    keyed output, ms) and ``busy_s``/``cpu_s`` over every keyed operator's tasks;
    ``delta`` the largest keyed operator's imbalance δ (each one's in ``extra["delta"]``);
    ``policy`` the policy's name. ``extra`` holds the per-operator figures as mappings
    from keyed operator to value, except ``units`` and ``per_task`` (keyed by unit, whose
    name says its operator).
    """

    batch_id: int
    duration_s: float
    keyed_rows: Mapping[str, int]
    sinks: Mapping[str, SinkOut]
    dead_letters: int
    cores: Mapping[str, int] = field(default_factory=dict)
    tasks: Mapping[str, int] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    time: float = 0.0
    rows: int = 0
    input_rate: float = math.nan
    processing_rate: float = math.nan
    latency_p50_ms: float = math.nan
    latency_p99_ms: float = math.nan
    delta: float = 1.0
    busy_s: float = 0.0
    cpu_s: float = 0.0
    policy: str = ""

    def to_json(self) -> str:
        """The batch's line in ``metrics.jsonl`` (docs/metrics.md): every field, a sink as
        its rows, non-finite numbers as ``null``."""
        line = {f: getattr(self, f) for f in LINE_FIELDS}
        line["sinks"] = {k: v.rows for k, v in self.sinks.items()}
        return json.dumps(jsonable(line), default=str)


#: A batch line's fields, in the order written (every field of :class:`GraphBatch`).
LINE_FIELDS = (
    "batch_id", "time", "rows", "duration_s", "input_rate", "processing_rate",
    "latency_p50_ms", "latency_p99_ms", "delta", "busy_s", "cpu_s", "policy", "keyed_rows",
    "cores", "tasks", "sinks", "dead_letters", "extra",
)  # fmt: skip


def batch_figures(observed: Mapping[str, Any]) -> tuple[dict[str, Any], np.ndarray]:
    """The job's figures of one batch from every keyed operator's statistics, and the
    latency sample (ms) over all their tasks: busy and CPU seconds summed, imbalance δ
    per keyed operator and the largest, latency percentiles."""
    tasks = [t for st in observed.values() for t in st.tasks]
    lat = (np.concatenate([t.latencies_ms for t in tasks]) if tasks else np.empty(0)).astype(float)
    deltas = {n: imbalance(t.busy_s for t in st.tasks) for n, st in observed.items()}
    return {
        "busy_s": sum(t.busy_s for t in tasks),
        "cpu_s": sum(t.cpu_s for t in tasks),
        "delta": max(deltas.values(), default=1.0),
        "deltas": deltas,
        "latency_p50_ms": percentile(lat, 50),
        "latency_p99_ms": percentile(lat, 99),
    }, lat


@dataclass
class GraphTotals:
    """Whole-run totals of a graph run's batches (the records themselves are a ring)."""

    count: int = 0
    pruned: int = 0  # dead letters removed by the retention limit
    keyed_rows: Counter[str] = field(default_factory=Counter)
    sink_rows: Counter[str] = field(default_factory=Counter)

    def add(self, b: GraphBatch) -> None:
        self.count += 1
        self.keyed_rows.update(b.keyed_rows)
        self.sink_rows.update({k: v.rows for k, v in b.sinks.items()})


def op_cores(plan: Plan, graph: JobGraph) -> dict[str, int]:
    """Cores per keyed operator in ``plan``: its instances' cores summed, instance-level
    (``op[e]``) and operator-level (``op``, as ``rc`` and ``model-driven`` plan) alike."""
    from streamscale.model.ids import operator_of

    out = dict.fromkeys(graph.keyed, 0)
    for inst, k in plan.allocation.cores.items():
        op = operator_of(inst)
        if op in out:
            out[op] += int(k)
    return out


def _task_line(t: Any) -> dict[str, Any]:
    """One reduce task in a batch line: Spark's partition, its rows, busy time, shards, host."""
    return {"partition": t.partition, "rows": t.rows, "busy_s": round(t.busy_s, 6),
            "shards": sorted(t.shards), "host": t.host}  # fmt: skip


def _initial(fn: Any, batch_id: int) -> Any:
    """A processor's initial state, applied in the query's first batch only (as Spark)."""
    held = getattr(fn, "initial_state", None)
    return None if held is None or batch_id != 0 else held.value


@dataclass
class SourceProbe:
    """What the driver reads of the running query's source, for the collector (the
    backlog, the offered rate in keyed rows) and the watch (the tuples a batch admitted).

    ``offered`` is what the source offered so far (``None``: unknown, a caller's
    DataFrame that declared no source); ``query`` is set each time the run starts its
    query; the batch body sets ``taken`` (the rows the running batch took from the
    source) and ``rows_per_tuple`` (the first keyed operator's rows per source tuple in
    the last batch that admitted any: the watch's rates are the source's tuples, the
    collector plans in rows).
    """

    spark_dir: Path | None = None
    offered: Callable[[float], float] | None = None
    watch: SourceWatch | None = None
    query: Any = None
    taken: int = 0
    rows_per_tuple: float = 1.0

    def _admitted(self) -> dict[str, Any] | None:
        return None if self.spark_dir is None else admitted_offset(self.spark_dir)

    def backlog(self) -> float:
        """Tuples waiting at the source beyond the running batch (0 before the query)."""
        if self.query is None:
            return 0.0
        admitted = self._admitted() if self.offered else None
        return backlog_of(self.query, self.taken, offered=self.offered, admitted=admitted)

    def offered_rows(self) -> float | None:
        """The watch's offered rate in keyed rows (``None``: not measured)."""
        rate = None if self.watch is None else self.watch.rate
        return None if rate is None else rate * self.rows_per_tuple

    def batch_tuples(self) -> int | None:
        """Source tuples the running batch admitted (``None``: unknown)."""
        if self.query is None or self.offered is None:
            return None
        return admitted_tuples(self.query, self._admitted())


@dataclass
class GraphBatchBody:
    """The ``foreachBatch`` function of a graph run, and what its batches share.

    Built once by :func:`~streamscale.runtime.spark.driver.dag.run_graph`. With ``stage`` (a
    linear graph's, :func:`~streamscale.runtime.spark.driver.operator.linear_stage`) the graph's one
    keyed operator runs with the stateless operators after it and the file sinks inside
    its reduce tasks (:func:`~streamscale.runtime.spark.driver.operator.run_batch`) instead of
    operator by operator. ``probe`` (what the running batch took from the source, for
    the backlog), ``last_end`` (run seconds at
    the previous batch's end), ``seen_requests`` (the watch's mid-batch requests
    already recorded), ``schemas`` (derived output schemas and stateless UDFs) and
    ``routes`` (routing columns) carry from one batch to the next.
    """

    spark: Any
    graph: JobGraph
    specs: Mapping[str, KeyedSpec]
    indexes: Mapping[str, VersionIndex]
    realizers: Mapping[str, SparkRealizer]
    realizer: GraphRealizer
    collector: GraphCollector
    controller: Controller
    inputs: InputLog
    backend: StateBackend
    resources: Resources | None
    watch: SourceWatch | None
    query_clock: QueryClock
    base: Path
    dead_dir: str
    dead_letters_max_mb: float
    history: RunHistory
    totals: GraphTotals
    on_batch: Callable[[GraphBatch], None] | None = None
    max_batches: int | None = None
    console: Mapping[str, int] = field(default_factory=dict)
    stage: LinearStage | None = None
    policy: str = ""
    clock: Callable[[], float] = time.monotonic
    start: float = 0.0
    in_batch: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    schemas: dict[str, Any] = field(default_factory=dict)
    #: declarative aggregations run in their leader's reduce tasks (leader -> followers,
    #: :func:`~streamscale.runtime.spark.driver.fusion.fused_chains`)
    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: each keyed operator's routing columns by input schema and plan (built once)
    routes: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = field(default_factory=dict)
    #: the running query's source: the batch records what it took there, and reads the
    #: source tuples the batch admitted (unknown: the watch then counts the first keyed
    #: operator's rows on the job's own source, nothing else)
    probe: SourceProbe = field(default_factory=SourceProbe)
    own_source: bool = True
    last_end: float = 0.0
    seen_requests: int = 0

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        self.in_batch.set()
        try:
            self._run(batch_df, batch_id)
        finally:
            self.in_batch.clear()

    def _run(self, batch_df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        times = self.query_clock.times(batch_id)
        # tasks only for cores ready to run them (executors still starting get none): one
        # reading of the ready executors sizes the batch and places its tasks
        ready_of = getattr(self.resources, "ready_executors", None)
        ready: list[str] | None = ready_of() if ready_of is not None else None
        ready_cores = None if ready is None else len(ready) * self.resources.cores_per_executor
        ks = KeyedPass(self, batch_id, times, ready, ready_cores)
        if self.stage is not None:
            sinks, dead = self._fused(batch_df, ks)
        else:
            sinks, dead = self._graph(batch_df, ks)
        gone = prune_dead_letters(self.dead_dir, self.dead_letters_max_mb * 2**20) if dead else 0
        self.totals.pruned += gone
        first_rows = ks.rows.get(self.graph.keyed[0], 0)
        self.probe.taken = first_rows + dead
        ended = self.clock()
        for name, stats in ks.observed.items():
            self.collector.observe(name, stats, now=ended)
        now = self.clock() - self.start
        figures, lat = batch_figures(ks.observed)
        extra = self._extra(ks, figures, gone)
        extra["batch_overhead_s"] = round(
            self.collector.batch(time.perf_counter() - t0, ks.observed), 6
        )
        self._control(extra, ks.observed, first_rows, now)
        duration = time.perf_counter() - t0
        since = now - self.last_end
        self.last_end = now
        rec = GraphBatch(
            batch_id=batch_id,
            duration_s=duration,
            keyed_rows=ks.rows,
            sinks=sinks,
            dead_letters=dead,
            cores=op_cores(self.realizer.current(), self.graph),
            tasks={n: len({t.unit for t in st.tasks}) for n, st in ks.observed.items()},
            extra=extra,
            time=now,
            rows=first_rows,
            input_rate=first_rows / since if since > 0 else math.nan,
            processing_rate=first_rows / duration if duration > 0 else math.nan,
            latency_p50_ms=figures["latency_p50_ms"],
            latency_p99_ms=figures["latency_p99_ms"],
            delta=figures["delta"],
            busy_s=figures["busy_s"],
            cpu_s=figures["cpu_s"],
            policy=self.policy,
        )
        self._finish(rec, lat, ks.observed)

    def _graph(self, batch_df: Any, ks: KeyedPass) -> tuple[dict[str, SinkOut], int]:
        """The whole DAG operator by operator, then the barrier: it succeeded, so every
        keyed operator commits; its sinks' counts and the batch's dead letters."""
        batch_id = ks.batch_id
        sinks = run_graph_batch(
            batch_df, self.graph, batch_id=batch_id, run_keyed_op=ks, out_dir=self.base,
            schemas=self.schemas, counted=ks.counted,
        )  # fmt: skip
        for name, (version, shards) in ks.written.items():
            self.indexes[name].commit(version, shards)
        for name in self.graph.keyed:
            release(name)
        self.query_clock.after_batch(self.spark, ks.times)
        return sinks, count_dead_letters(self.dead_dir, batch_id)

    def _fused(self, batch_df: Any, ks: KeyedPass) -> tuple[dict[str, SinkOut], int]:
        """A linear graph's batch: its keyed stage with the stateless operators and the
        sinks fused in, state committed; what each sink received (the rows the tasks
        wrote) and the batch's dead letters."""
        assert self.stage is not None
        name, batch_id = self.stage.spec.operator, ks.batch_id
        realizer = self.realizers[name]
        pmap = realizer.begin_batch(ks.ready_cores or None)
        ks.units.extend(pmap.units)
        version = self.indexes[name].version(batch_id, pmap)
        stats = run_batch(batch_df, self.stage, version, placed=ks.placed_of(name, pmap))
        self.indexes[name].commit(version, (g for t in stats.tasks for g in t.shards))
        ks.rows[name] = stats.rows
        ks.observed[name] = stats
        realizer.observe({g: v[1] for t in stats.tasks for g, v in t.shards.items()})
        out = sum(t.out_rows for t in stats.tasks)
        sinks = {
            s: SinkOut(s, out, None if d is None else batch_dir(d, batch_id))
            for s, d in self.stage.sinks
        }
        return sinks, stats.dead_letters

    def _extra(self, ks: KeyedPass, figures: Mapping[str, Any], gone: int) -> dict[str, Any]:
        """The batch line's ``extra`` before the control step: the backlog, the query's
        clock, units and ready cores, and every keyed operator's figures."""
        observed = ks.observed
        extra: dict[str, Any] = {
            "backlog": self.collector.backlog,
            **self.query_clock.record(ks.times),
            "units": ks.units,
            "ready_cores": ks.ready_cores,
            "delta": figures["deltas"],
            # per unit (its name says its operator): the task Spark ran it as, and its work
            "per_task": {t.unit: _task_line(t) for st in observed.values() for t in st.tasks},
            "per_shard": {
                n: {str(g): [v[0], round(v[1], 6)] for t in st.tasks for g, v in t.shards.items()}
                for n, st in observed.items()
            },
            "out_rows": {n: sum(t.out_rows for t in st.tasks) for n, st in observed.items()},
            "partitions": {n: st.partitions for n, st in observed.items()},
            "stage_s": {n: st.duration_s for n, st in observed.items()},
            # per keyed operator, its tasks longest first: (worker daemon, busy s, rows)
            "task_runs": {
                n: sorted(
                    ((t.executor, round(t.busy_s, 3), t.rows) for t in st.tasks),
                    key=lambda r: -r[1],
                )
                for n, st in observed.items()
            },
        }
        if gone:
            extra["dead_letters_pruned"] = gone
        late = {n: st.late_rows for n, st in observed.items() if st.late_rows}
        if late:
            extra["late_rows"] = late
        return extra

    def _control(
        self, extra: dict[str, Any], observed: Mapping[str, Any], first_rows: int, now: float
    ) -> None:
        """One control step (its inputs logged), the watch told what the batch did, and
        what both did, the state read and the placement recorded in ``extra``."""
        graph = self.graph
        applied = control_step(
            self.controller, self.collector, self.realizer, self.resources, now, extra,
            log=self.inputs,
        )  # fmt: skip
        if self.resources is not None:
            extra["cost_kind"] = {
                n: str(graph.topology.operator(n).params.get("cost_kind", "cpu"))
                for n in graph.keyed
            }
        self._watch(extra, observed, first_rows, now)
        for a in applied:
            extra.setdefault("figures", []).append(dict(a.figures))
        extra["state_read_bytes"] = {  # from the store, not a worker's cache: moved here
            n: sum(t.state_read_bytes for t in st.tasks) for n, st in observed.items()
        }
        placement = {n: st.placement() for n, st in observed.items() if st.planned}
        if placement:
            extra["placement"] = placement
            # Spark's executor ids that ran each keyed operator's tasks (its status store)
            extra["task_executors"] = {
                n: sorted({r.executor for r in st.runs}) for n, st in observed.items() if st.planned
            }

    def _finish(self, rec: GraphBatch, lat: np.ndarray, observed: Mapping[str, Any]) -> None:
        """The record into the history and totals, console samples printed, the caller
        told; done once ``max_batches`` committed."""
        self.history.add(rec, lat)
        self.totals.add(rec)
        for name, st in observed.items():
            for row in (r for t in st.tasks for r in t.sample) if name in self.console else ():
                print(f"[{name} batch {rec.batch_id}] {json.dumps(row, default=str)}")
        if self.on_batch is not None:
            self.on_batch(rec)
        if self.max_batches is not None and self.totals.count >= self.max_batches:
            self.done.set()

    def _watch(
        self, extra: dict[str, Any], observed: Mapping[str, Any], rows: int, now: float
    ) -> None:
        """Tell the watch what the batch did (once per job: every keyed operator's tasks
        are the job's work), refresh the admission limit and record its requests."""
        watch = self.watch
        if watch is None:
            return
        tasks = [t for st in observed.values() for t in st.tasks]
        # the watch counts the source's tuples (what it offers), not the keyed rows
        tuples = self.probe.batch_tuples()
        if tuples:
            self.probe.rows_per_tuple = rows / tuples
        count = tuples if tuples is not None else rows if self.own_source else 0
        watch.live.observe(
            rows=count, busy_s=sum(t.busy_s for t in tasks),
            cycle_s=now - self.last_end,
            planned_cores=self.realizer.current().allocation.total,
            longest_s=max((t.busy_s for t in tasks), default=0.0),
            in_batch_s=extra.get("batch_overhead_s"), trigger_s=watch.trigger_s,
        )  # fmt: skip
        extra["admission_limit"] = watch.update_admission()
        extra["mid_batch_requests"] = [r[1] for r in watch.requests[self.seen_requests :]]
        self.seen_requests = len(watch.requests)
        extra["watch_inputs"] = watch.drain_inputs()


@dataclass
class KeyedPass:
    """One batch's keyed operators as the graph runs them (its ``run_keyed_op``), and
    what they did: the batch version and shards each commits (``written``), its input
    rows, output rows (``counted``), statistics and units; the partition maps taken
    (ahead of its turn for an operator fused in its leader's tasks) and the output of
    those fused operators, held for their turn."""

    body: GraphBatchBody
    batch_id: int
    times: Any
    ready: list[str] | None
    ready_cores: int | None
    written: dict[str, tuple[BatchVersion, list[int]]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    units: list[str] = field(default_factory=list)  # every keyed operator's
    fused_out: dict[str, Any] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)
    pmaps: dict[str, Any] = field(default_factory=dict)

    def pmap_of(self, name: str) -> Any:
        """``name``'s partition map for the batch, on the ready cores (taken once)."""
        if name not in self.pmaps:
            self.pmaps[name] = self.body.realizers[name].begin_batch(self.ready_cores or None)
        return self.pmaps[name]

    def placed_of(self, name: str, pmap: Any) -> Any:
        """Where ``name``'s units run (``None``: no executors to place them on)."""
        res = self.body.resources
        if res is None:
            return None
        return res.locations(self.body.realizers[name].active, units=pmap.units, ready=self.ready)

    def __call__(self, name: str, df: Any) -> Any:
        """Run the keyed operator ``name`` on ``df``; its output."""
        if name in self.fused_out:
            return self.fused_out.pop(name)
        body, batch_id = self.body, self.batch_id
        pmap = self.pmap_of(name)
        version = body.indexes[name].version(batch_id, pmap)
        self.units.extend(pmap.units)
        placed = self.placed_of(name, pmap)
        spec = body.specs[name]
        if getattr(spec.fn, "vectorized", False):
            outputs, stats = self._chain(df, spec, version, placed)
        else:
            outputs, stats = run_keyed(
                df, spec, version, dead_letter_dir=body.dead_dir, placed=placed,
                initial=_initial(spec.fn, batch_id), routes=body.routes.setdefault(name, {}),
                **body.query_clock.keyed_args(self.times),
            )  # fmt: skip
        self.record(name, version, stats)
        return outputs

    def _chain(
        self, df: Any, spec: KeyedSpec, version: BatchVersion, placed: Any
    ) -> tuple[Any, Any]:
        """A declarative operator with the operators fused in its tasks (each recorded,
        its output held for its turn); the leader's output and statistics."""
        from streamscale.runtime.spark.keyed.agg.operator import Fused, run_chain

        body = self.body
        then: list[Fused] = []
        chain = body.chains.get(spec.operator, ())
        for f, fmap, remap in offer(version.pmap, chain, self.pmap_of, self.placed_of, placed):
            f_version = body.indexes[f].version(self.batch_id, fmap)
            then.append(Fused(body.specs[f], body.specs[f].fn, f_version, remap))
        outputs, every = run_chain(
            df, spec, spec.fn, version, placed=placed, then=then,
            **body.query_clock.keyed_args(self.times),
        )  # fmt: skip
        for fused, st in zip(then, every[1:], strict=False):
            self.units.extend(fused.version.pmap.units)
            self.record(fused.spec.operator, fused.version, st)
            self.fused_out[fused.spec.operator] = outputs
        return outputs, every[0]

    def record(self, name: str, version: BatchVersion, stats: Any) -> None:
        """What ``name`` did: to commit, its rows in and out, its statistics; its shards'
        loads to its realizer."""
        self.written[name] = (version, [g for t in stats.tasks for g in t.shards])
        self.rows[name] = stats.rows
        self.counted[name] = sum(t.out_rows for t in stats.tasks)
        self.observed[name] = stats
        self.body.realizers[name].observe(
            {g: v[1] for t in stats.tasks for g, v in t.shards.items()}
        )
