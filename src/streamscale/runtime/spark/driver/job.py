"""The job API: a topology plus the Python functions that run its operators.

A job is a linear dataflow ``source → [stateless…] → keyed → [stateless…] →
sink(s)``: exactly one keyed, stateful operator, which streamscale makes
elastic (paper 000, §3), with optional stateless operators before and after
it. Keyed operators are plain functions over one shard's rows in arrival
order and that shard's state::

    def fn(rows: pandas.DataFrame, state: dict, **params) -> pandas.DataFrame | None

``state`` is mutated in place (or a ``(frame, state)`` pair is returned);
stateless operators are ``fn(df: pandas.DataFrame, **params) -> pandas.DataFrame``.
An operator's ``params`` from the topology are passed as keyword arguments.
A function may declare ``required_fields`` (a tuple of column names): tuples
whose value there is missing or not a number are dead-lettered.

Sinks are configured by the sink operator's ``params``: ``format`` is
``jsonl``, ``parquet``, ``console`` or ``none`` (the default: outputs are only
counted), and ``path`` the directory for file sinks (relative paths are
resolved against the run's output directory). The source is the source
operator's ``params``: ``format`` (default ``streamscale_generator``),
``trigger_s`` (micro-batch interval, default 1 s) and every other entry is
passed to Spark as a source option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.model.io import load_topology
from streamscale.runtime.run_config import TRIGGER_S
from streamscale.runtime.spark.driver.resolve import SourceSpec, resolve_function

__all__ = ["Job", "SinkSpec", "fused_job", "linear_shape", "resolve_function"]

#: The sinks the fused linear data path writes inside its keyed tasks: a subset of the
#: one sink vocabulary (:data:`~streamscale.runtime.spark.driver.graph.SINK_FORMATS`); a job
#: with any other sink runs as a graph, operator by operator.
FUSED_SINK_FORMATS: tuple[str, ...] = ("jsonl", "parquet", "console", "none")


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """Where one sink operator writes: ``format`` and, for file sinks, ``path``."""

    name: str
    format: str = "none"
    path: str | None = None
    rows: int = 5


@dataclass(frozen=True, slots=True)
class Job:
    """A runnable job. Build with :meth:`build`, :meth:`simple` or :meth:`from_yaml`."""

    topology: Topology
    source: str
    keyed: str
    functions: Mapping[str, Callable[..., Any]]
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    sinks: tuple[SinkSpec, ...] = ()
    source_format: str = "streamscale_generator"
    source_options: Mapping[str, str] = field(default_factory=dict)
    trigger_s: float = TRIGGER_S.default
    source_class: type | None = None

    @property
    def operator(self) -> Operator:
        """The keyed operator."""
        return self.topology.operator(self.keyed)

    @property
    def cost_kind(self) -> str:
        """How the keyed operator spends its per-tuple cost: ``cpu`` (burned) or ``wall``."""
        return str(self.operator.params.get("cost_kind", "cpu"))

    @property
    def cost_ms(self) -> float | None:
        """Mean per-tuple CPU cost (ms): the source's ``cost_ms`` option, else the operator's."""
        raw = self.source_options.get("cost_ms")
        if raw is not None:
            try:
                return float(raw)
            except ValueError:
                return None
        return self.operator.cost_ms or None

    def graph(self) -> Any:
        """The job as a :class:`~streamscale.runtime.spark.driver.graph.JobGraph` with one keyed
        operator (what the job driver runs; its shape makes the run fuse it,
        :func:`fused_job`)."""
        from streamscale.runtime.spark.driver.graph import JobGraph

        return JobGraph.build(self.topology, dict(self.functions), source_class=self.source_class)

    @classmethod
    def build(
        cls,
        topology: Topology,
        functions: Mapping[str, Callable[..., Any] | str] | None = None,
        *,
        source_class: type | None = None,
    ) -> Job:
        """A job from a validated topology; functions default to each operator's ``function``.

        Raises
        ------
        StreamscaleError
            The topology is not a linear pipeline with one keyed operator, or
            a function or sink setting is missing or wrong.
        """
        chain, sinks = _linear_chain(topology)
        source = chain[0]
        processing = chain[1:]
        keyed = [n for n in processing if topology.operator(n).keyed]
        if len(keyed) != 1:
            raise StreamscaleError(
                f"a Spark job needs exactly one keyed operator, found {len(keyed)}",
                item=f"topology {topology.name}",
            )
        given = dict(functions or {})
        resolved: dict[str, Callable[..., Any]] = {}
        for name in processing:
            op = topology.operator(name)
            fn = given.get(name, op.function)
            if fn is None:
                raise StreamscaleError("no function given", item=f"operator {name}")
            resolved[name] = (
                resolve_function(fn, item=f"operator {name}") if isinstance(fn, str) else fn
            )
        k = processing.index(keyed[0])
        spec = SourceSpec.of(topology, source, source_class=source_class)
        return cls(
            topology=topology,
            source=source,
            keyed=keyed[0],
            functions=resolved,
            before=tuple(processing[:k]),
            after=tuple(processing[k + 1 :]),
            sinks=tuple(_sink(topology.operator(s)) for s in sinks),
            source_format=spec.format,
            source_options=spec.options,
            trigger_s=spec.trigger_s,
            source_class=source_class,
        )

    @classmethod
    def from_yaml(cls, path: str | Path) -> Job:
        """Load a topology file; operator functions come from their ``function`` import paths."""
        return cls.build(load_topology(path))

    @classmethod
    def simple(
        cls,
        name: str,
        function: Callable[..., Any] | str,
        *,
        source_options: Mapping[str, Any],
        instances: int = 4,
        shards: int = 64,
        key: str = "key",
        cost_ms: float = 0.0,
        sink: Mapping[str, Any] | None = None,
        source_format: str = "streamscale_generator",
        source_class: type | None = None,
        trigger_s: float = TRIGGER_S.default,
        params: Mapping[str, Any] | None = None,
    ) -> Job:
        """``source → keyed function → sink`` in one call; ``params`` go to the function."""
        src_params = {**dict(source_options), "format": source_format, "trigger_s": trigger_s}
        topo = Topology.build(
            name,
            [
                Operator(name="source", kind="source", params=src_params),
                Operator(
                    name=name,
                    key=key,
                    cost_ms=cost_ms,
                    instances=instances,
                    shards=shards,
                    function=function if isinstance(function, str) else None,
                    params=dict(params or {}),
                ),
                Operator(name="sink", kind="sink", params=dict(sink or {})),
            ],
            [Edge("source", name, grouping="key"), Edge(name, "sink")],
        )
        fns = None if isinstance(function, str) else {name: function}
        return cls.build(topo, fns, source_class=source_class)


def _linear_chain(topo: Topology) -> tuple[list[str], list[str]]:
    """The operators from the source to the last processing operator, and the sinks."""
    if len(topo.sources) != 1:
        raise StreamscaleError(
            f"a Spark job needs exactly one source, found {len(topo.sources)}",
            item=f"topology {topo.name}",
        )
    chain = [topo.sources[0].name]
    while True:
        outs = [e.dst for e in topo.outputs(chain[-1])]
        nxt = [d for d in outs if topo.operator(d).kind != "sink"]
        if not nxt:
            return chain, outs
        if len(outs) != 1:
            raise StreamscaleError(
                "a Spark job must be a linear pipeline (one output per operator "
                "except sinks after the last one)",
                item=f"operator {chain[-1]}",
            )
        if len(topo.inputs(nxt[0])) != 1:
            raise StreamscaleError(
                "a Spark job must be a linear pipeline", item=f"operator {nxt[0]}"
            )
        chain.append(nxt[0])


def _sink_problem(op: Operator) -> StreamscaleError | None:
    """Why the sink operator ``op`` is not one a linear job writes (``None``: it is)."""
    item = f"operator {op.name}"
    unknown = set(op.params) - {"format", "path", "rows"}
    if unknown:
        return StreamscaleError(f"unknown sink parameter {sorted(unknown)[0]!r}", item=item)
    path = op.params.get("path")
    fmt = str(op.params.get("format", "jsonl" if path else "none"))
    if fmt not in FUSED_SINK_FORMATS:
        return StreamscaleError(
            f"sink format {fmt!r}: a linear Job writes only {', '.join(FUSED_SINK_FORMATS)} "
            "(run the file with streamscale run, or build it with stream(), for any sink)",
            item=item,
        )
    if fmt in ("jsonl", "parquet") and not path:
        return StreamscaleError(f"a {fmt} sink needs a 'path'", item=item)
    rows = op.params.get("rows", 5)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        return StreamscaleError("rows must be an integer >= 0", item=item)
    return None


def _sink(op: Operator) -> SinkSpec:
    problem = _sink_problem(op)
    if problem is not None:
        raise problem
    path = op.params.get("path")
    fmt = str(op.params.get("format", "jsonl" if path else "none"))
    return SinkSpec(
        op.name, fmt, None if path is None else str(path), int(op.params.get("rows", 5))
    )


def linear_shape(topology: Topology) -> bool:
    """Whether ``topology`` has a linear job's shape, which :meth:`Job.build` takes: one
    source, a chain of single-input operators with exactly one keyed operator, and sinks
    after the last one that the fused path writes (:data:`FUSED_SINK_FORMATS`). Decided
    from the topology alone (functions and source options are checked when the job is
    built)."""
    if len(topology.sources) != 1:
        return False
    chain = [topology.sources[0].name]
    while True:
        outs = [e.dst for e in topology.outputs(chain[-1])]
        nxt = [d for d in outs if topology.operator(d).kind != "sink"]
        if not nxt:
            break
        if len(outs) != 1 or len(topology.inputs(nxt[0])) != 1:
            return False
        chain.append(nxt[0])
    if sum(1 for n in chain[1:] if topology.operator(n).keyed) != 1:
        return False
    return all(_sink_problem(topology.operator(d)) is None for d in outs)


#: a keyed function's marks that need the operator-by-operator path: a declarative
#: operator (fused with its own kind, :mod:`~streamscale.runtime.spark.driver.fusion`), a
#: join's two sides, the query's clock (timers, timeouts), an initial state, or a declared
#: output schema (Spark's stateful APIs: Spark types the output columns as declared)
GRAPH_ONLY: tuple[str, ...] = (
    "vectorized",
    "two_sided",
    "batch_clock",
    "initial_state",
    "output_schema",
)


def fused_job(graph: Any) -> Job | None:
    """``graph`` (a :class:`~streamscale.runtime.spark.driver.graph.JobGraph`) as the linear
    job its run fuses, or ``None`` (it runs operator by operator).

    Chosen from the graph alone, whoever built it (a job file, :func:`~streamscale.stream`
    or :meth:`Job.graph`): a graph of the linear shape (:func:`linear_shape`) whose keyed
    function carries none of :data:`GRAPH_ONLY`'s marks runs its keyed operator, the
    stateless operators after it and its sinks in the keyed operator's reduce tasks (one
    Spark job a batch, :func:`~streamscale.runtime.spark.driver.operator.linear_stage`).
    """
    if not linear_shape(graph.topology):
        return None
    fn = graph.nodes[graph.keyed[0]].fn
    if any(getattr(fn, mark, None) not in (None, False) for mark in GRAPH_ONLY):
        return None
    functions = {n: node.fn for n, node in graph.nodes.items() if node.fn is not None}
    return Job.build(graph.topology, functions, source_class=graph.source_class)
