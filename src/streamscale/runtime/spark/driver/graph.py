"""Job graphs: any DAG of operators, run one micro-batch at a time in topological order.

A :class:`JobGraph` is a validated topology (one source, any number of
stateless and keyed operators, any number of sinks) plus the Python function of
every processing operator. Fan-out (one operator feeding several operators or
sinks) and fan-in (an operator with several inputs: the union, by column name,
of streams with the same columns) are both allowed — a two-sided keyed operator
(a join: its function has ``two_sided``) gets its inputs' rows tagged by side
instead (``fn.tagged(frames)``); every keyed operator
re-partitions its input by its own key inside the batch, so edges between
keyed operators on different keys need nothing special.

:func:`run_graph_batch` runs the whole DAG over one micro-batch. Every keyed
operator writes state version ``batch_id`` and nothing is committed until the
whole DAG (sinks included) succeeded; then every keyed operator's state is
committed, so the batch boundary is the consistency barrier of every operator
(paper 000, §3.2). A DataFrame that feeds more than one consumer is persisted
first, so no operator (least of all a keyed stage writing state) runs twice.

Stateless operators are ``fn(df: pandas.DataFrame, **params) -> pandas.DataFrame``
run with ``mapInPandas``. Their output schema is the function's
``output_schema`` attribute (a Spark DDL string or ``StructType``) when it
declares one; otherwise it is derived once per run from the function applied to
a sample of its first input (up to 64 rows): Arrow types of the result, with a
column whose type cannot be inferred (all null) taking the input column's type
of the same name, else ``string``.

Sinks are the sink operator's ``params``: ``format`` is ``parquet``, ``json``
(``jsonl`` is an alias), ``csv``, ``console``, ``none`` (count only) or
``function`` with ``function: module:callable`` called as ``fn(df, batch_id)``;
file sinks write ``<path>/batch_id=<b>/`` with overwrite, so a replayed batch
replaces its own output and never duplicates it (Spark reads ``<path>`` back
with ``batch_id`` as a partition column).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Cluster, Node, Placement, Plan, Routing, Topology
from streamscale.model.io import load_topology
from streamscale.runtime.run_config import TRIGGER_S
from streamscale.runtime.spark.driver.resolve import SourceSpec, resolve_function

__all__ = [
    "SLOTS_PER_CORE",
    "GraphNode",
    "JobGraph",
    "SinkOut",
    "local_cluster",
    "map_stateless",
    "merged_default_plan",
    "run_graph_batch",
]

SINK_FORMATS: tuple[str, ...] = ("parquet", "json", "jsonl", "csv", "console", "none", "function")
_SAMPLE_ROWS = 64
_UDF = "\u0000udf"  # key suffix of a stateless operator's UDF in the run's schemas


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One operator of the graph: ``kind`` is ``source``, ``map``, ``keyed`` or ``sink``."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    fn: Callable[..., Any] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None
    sink_format: str = "none"
    sink_path: str | None = None
    rows: int = 5


@dataclass(frozen=True, slots=True)
class JobGraph:
    """A runnable DAG. Build with :meth:`build` or :meth:`from_yaml`.

    How it runs is chosen from its shape, whoever built it: a linear one fuses
    (:func:`~streamscale.runtime.spark.driver.job.fused_job`), any other runs operator by
    operator.
    """

    topology: Topology
    source: str
    order: tuple[str, ...]
    nodes: Mapping[str, GraphNode]
    consumers: Mapping[str, tuple[str, ...]]
    source_format: str = "streamscale_generator"
    source_options: Mapping[str, str] = field(default_factory=dict)
    trigger_s: float = TRIGGER_S.default
    source_class: type | None = None

    @property
    def keyed(self) -> tuple[str, ...]:
        """The keyed operators, in topological order."""
        return tuple(n for n in self.order if self.nodes[n].kind == "keyed")

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if self.nodes[n].kind == "sink")

    @classmethod
    def from_yaml(cls, path: str | Path) -> JobGraph:
        """Load a topology file; functions come from the operators' ``function`` paths."""
        return cls.build(load_topology(path))

    @classmethod
    def build(
        cls,
        topology: Topology,
        functions: Mapping[str, Callable[..., Any] | str] | None = None,
        *,
        source_class: type | None = None,
    ) -> JobGraph:
        """A graph from a validated topology; names the offending item when it cannot run.

        Raises
        ------
        StreamscaleError
            Not exactly one source, a cycle, an unreachable operator, a missing
            function or a wrong sink setting.
        """
        where = f"topology {topology.name}"
        if len(topology.sources) != 1:
            raise StreamscaleError(
                f"a Spark job needs exactly one source, found {len(topology.sources)}", item=where
            )
        names = [op.name for op in topology.operators]
        inputs = {n: tuple(e.src for e in topology.inputs(n)) for n in names}
        consumers = {n: tuple(e.dst for e in topology.outputs(n)) for n in names}
        order = _topological(names, inputs, consumers, where)
        source = topology.sources[0].name
        reach = {source}
        for n in order:
            if n != source and any(i in reach for i in inputs[n]):
                reach.add(n)
        for n in order:
            if n not in reach:
                raise StreamscaleError("not reachable from the source", item=f"operator {n}")
        given = dict(functions or {})
        nodes: dict[str, GraphNode] = {}
        for n in order:
            op = topology.operator(n)
            item = f"operator {n}"
            if n == source:
                nodes[n] = GraphNode(n, "source", ())
            elif op.kind == "sink":
                nodes[n] = _sink_node(n, inputs[n], dict(op.params), given.get(n))
            else:
                fn = given.get(n, op.function)
                if fn is None:
                    raise StreamscaleError("no function given", item=item)
                if isinstance(fn, str):
                    fn = resolve_function(fn, item=item)
                kind = "keyed" if op.keyed else "map"
                nodes[n] = GraphNode(
                    n, kind, inputs[n], fn, dict(op.params), str(op.key) if op.keyed else None
                )
            if n != source and op.kind != "sink" and not consumers[n]:
                raise StreamscaleError("output goes nowhere (add a sink)", item=item)
        spec = SourceSpec.of(topology, source, source_class=source_class)
        return cls(
            topology=topology,
            source=source,
            order=order,
            nodes=nodes,
            consumers=consumers,
            source_format=spec.format,
            source_options=spec.options,
            trigger_s=spec.trigger_s,
            source_class=source_class,
        )


def _topological(
    names: list[str],
    inputs: Mapping[str, tuple[str, ...]],
    consumers: Mapping[str, tuple[str, ...]],
    where: str,
) -> tuple[str, ...]:
    """Kahn's algorithm, ties broken by declaration order; a cycle names one of its operators."""
    indeg = {n: len(inputs[n]) for n in names}
    ready = [n for n in names if indeg[n] == 0]
    out: list[str] = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for d in consumers[n]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    if len(out) != len(names):
        stuck = next(n for n in names if n not in out)
        raise StreamscaleError(
            "the graph has a cycle through this operator", item=f"operator {stuck}"
        )
    del where
    return tuple(out)


def _sink_node(name: str, inputs: tuple[str, ...], params: dict[str, Any], given: Any) -> GraphNode:
    item = f"operator {name}"
    unknown = set(params) - {"format", "path", "rows", "function"}
    if unknown:
        raise StreamscaleError(f"unknown sink parameter {sorted(unknown)[0]!r}", item=item)
    fn_ref = given if given is not None else params.get("function")
    path = params.get("path")
    default = "function" if fn_ref is not None else ("parquet" if path else "none")
    fmt = str(params.get("format", default))
    if fmt not in SINK_FORMATS:
        raise StreamscaleError(
            f"sink format {fmt!r} is not one of {', '.join(SINK_FORMATS)}", item=item
        )
    if fmt in ("parquet", "json", "jsonl", "csv") and not path:
        raise StreamscaleError(f"a {fmt} sink needs a 'path'", item=item)
    fn = None
    if fmt == "function":
        if fn_ref is None:
            raise StreamscaleError("a function sink needs a 'function'", item=item)
        fn = resolve_function(fn_ref, item=item) if isinstance(fn_ref, str) else fn_ref
    rows = params.get("rows", 5)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise StreamscaleError("rows must be an integer >= 0", item=item)
    return GraphNode(
        name,
        "sink",
        inputs,
        fn,
        sink_format="json" if fmt == "jsonl" else fmt,
        sink_path=None if path is None else str(path),
        rows=rows,
    )


def merged_default_plan(graph: JobGraph, cluster: Cluster) -> Plan:
    """One plan for every keyed operator: each operator's :func:`default_plan`, merged."""
    from streamscale.runtime.spark.routing.realizer import default_plan

    cores: dict[str, int] = {}
    nodes: dict[str, str] = {}
    tables: dict[str, tuple[str, ...]] = {}
    for name in graph.keyed:
        p = default_plan(graph.topology, name, cluster)
        cores.update(p.allocation.cores)
        nodes.update(p.placement.nodes)
        tables.update(p.routing.tables)
    return Plan(Allocation(cores), Placement(nodes), Routing(tables))


#: Planning slots per core when no cluster is given: a unit is a Spark task, and tasks
#: queue on the cores, so more (smaller) tasks than cores is how a skewed instance gets
#: its share.
SLOTS_PER_CORE = 2


def local_cluster(*, physical: int, instances: int) -> Cluster:
    """The cluster a run plans for when it is given none and sizes no executors: one node
    ``local`` with ``max(2, physical, instances) × SLOTS_PER_CORE`` slots.

    Parameters
    ----------
    physical
        Spark's default parallelism (the cores the local tasks run on).
    instances
        The keyed instances of the job, summed over its keyed operators: each needs at
        least one slot (an instance holds a core).

    Returns
    -------
    Cluster
        The one node ``local``.
    """
    slots = max(2, physical, instances) * SLOTS_PER_CORE
    return Cluster.build([Node("local", cores=slots)])


@dataclass(slots=True)
class SinkOut:
    """What one sink received in a batch (rows counted by Spark, and where they went)."""

    name: str
    rows: int
    path: str | None = None


# --- one batch ------------------------------------------------------------------------------


def _spark_type_schema(
    fn: Callable[..., Any], params: Mapping[str, Any], sample: Any, in_schema: Any
) -> Any:
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema

    declared = getattr(fn, "output_schema", None)
    if isinstance(declared, T.StructType):
        return declared
    if isinstance(declared, str):
        return T._parse_datatype_string(declared)
    out = fn(sample, **params)
    table = pa.Table.from_pandas(out, preserve_index=False)
    by_name = {f.name: f.dataType for f in in_schema.fields}
    fields = []
    for f in table.schema:
        if pa.types.is_null(f.type):
            fields.append(T.StructField(f.name, by_name.get(f.name, T.StringType()), True))
            continue
        t = pa.string() if pa.types.is_large_string(f.type) else f.type
        fields.append(from_arrow_schema(pa.schema([pa.field(f.name, t)])).fields[0])
    return T.StructType(fields)


def _mapper(fn: Callable[..., Any], params: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    def run(frames: Any) -> Any:
        for pdf in frames:
            out = fn(pdf, **params)
            if out is None or len(out) == 0:
                continue
            yield out.reindex(columns=list(names))

    return run


def map_stateless(
    df: Any,
    fn: Callable[..., Any],
    params: Mapping[str, Any],
    schemas: dict[str, Any],
    name: str,
) -> Any:
    """``df`` through the stateless operator ``name`` (``fn(pdf, **params)``, ``mapInPandas``).

    Its output schema is ``fn.output_schema`` when declared, else derived from ``fn``
    over a sample of ``df`` the first time and kept in ``schemas[name]`` for the run.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    schema = schemas.get(name)
    if schema is None:
        sample = df.limit(_SAMPLE_ROWS).toPandas()
        schema = schemas[name] = _spark_type_schema(fn, params, sample, df.schema)
    # ``df.mapInPandas`` as Spark writes it, with the UDF built once per run: Spark
    # pickles a new UDF's function and creates its JVM object on its first use, every
    # batch otherwise (py4j round trips and a pickle per batch).
    udf = schemas.get(f"{name}{_UDF}")
    if udf is None:
        mapper = _mapper(fn, dict(params), tuple(schema.fieldNames()))
        udf = schemas[f"{name}{_UDF}"] = pandas_udf(  # type: ignore[call-overload]
            mapper, returnType=schema, functionType=PythonEvalType.SQL_MAP_PANDAS_ITER_UDF
        )
    column = udf(*[df[c] for c in df.columns])
    return DataFrame(df._jdf.mapInPandas(column._jc, False, None), df.sparkSession)


def _union(dfs: list[Any], item: str) -> Any:
    base = dfs[0]
    cols = sorted(base.columns)
    for other in dfs[1:]:
        if sorted(other.columns) != cols:
            raise StreamscaleError(
                f"inputs to union have different columns: {sorted(base.columns)} "
                f"vs {sorted(other.columns)}",
                item=item,
            )
        base = base.unionByName(other)
    return base


def _two_sided(node: GraphNode, frames: Mapping[str, Any]) -> Any:
    """A two-sided keyed operator's input: its sides' rows tagged by side (``None``: none)."""
    assert node.fn is not None
    return node.fn.tagged(frames, item=f"operator {node.name}")


def _write_sink(node: GraphNode, df: Any, batch_id: int, base: Path) -> SinkOut:
    fmt = node.sink_format
    if fmt == "function":
        assert node.fn is not None
        node.fn(df, batch_id)
        return SinkOut(node.name, -1)
    if fmt == "console":
        rows = df.count()
        for r in df.limit(node.rows).collect():
            print(f"[{node.name} batch {batch_id}] {r.asDict()}")
        return SinkOut(node.name, rows)
    # One Spark action per sink: the rows are counted by an observation of the write
    # itself (a count, then a write, would run the operators before the sink twice);
    # ``none`` writes to Spark's ``noop`` format (one job, no shuffle for the count).
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    seen = Observation(f"sink-{node.name}")
    observed = df.observe(seen, F.count(F.lit(1)).alias("rows"))
    if fmt == "none":
        observed.write.format("noop").mode("overwrite").save()
        return SinkOut(node.name, int(seen.get["rows"]))
    assert node.sink_path is not None
    target = (base / node.sink_path / f"batch_id={batch_id}").resolve()
    writer = observed.write.mode("overwrite").format(fmt)
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.save(str(target))
    return SinkOut(node.name, int(seen.get["rows"]), str(target))


def run_graph_batch(
    batch_df: Any,
    graph: JobGraph,
    *,
    batch_id: int,
    run_keyed_op: Callable[[str, Any], Any],
    out_dir: Path,
    schemas: dict[str, Any],
    counted: Mapping[str, int] | None = None,
) -> dict[str, SinkOut]:
    """Run every operator of ``graph`` over one micro-batch, in topological order.

    Parameters
    ----------
    batch_df
        The source's micro-batch.
    graph
        The job graph.
    batch_id
        The micro-batch id (sinks write ``batch_id=<b>``).
    run_keyed_op
        ``(operator, input DataFrame) -> output DataFrame``: runs one keyed stage
        (writes its state, never commits); the caller commits after this returns.
    out_dir
        Base directory of relative sink paths.
    schemas
        Derived output schemas of stateless operators, kept across batches.
    counted
        Rows each keyed operator emitted this batch, as its tasks counted them (filled
        by ``run_keyed_op``): a ``none`` sink fed by one keyed operator takes its count
        from there instead of a Spark job over the operator's cached output.

    Returns
    -------
    What each sink received.
    """
    frames: dict[str, Any] = {}
    cached: list[Any] = []
    sinks: dict[str, SinkOut] = {}
    try:
        for name in graph.order:
            node = graph.nodes[name]
            if node.kind == "source":
                df = batch_df
            elif node.kind == "keyed" and getattr(node.fn, "two_sided", False):
                df_in = _two_sided(node, frames)  # a join: its rows tagged by side
                df = None if df_in is None else run_keyed_op(name, df_in)
                if df is None or not df.columns:
                    frames[name] = None
                    continue
            else:
                ins = [frames[i] for i in node.inputs if frames.get(i) is not None]
                if not ins:
                    frames[name] = None
                    continue
                df_in = _union(ins, f"operator {name}") if len(ins) > 1 else ins[0]
                if node.kind == "sink":
                    src = node.inputs[0]
                    if node.sink_format == "none" and len(ins) == 1 and src in (counted or {}):
                        assert counted is not None
                        sinks[name] = SinkOut(name, int(counted[src]))
                    else:
                        sinks[name] = _write_sink(node, df_in, batch_id, out_dir)
                    continue
                if node.kind == "keyed":
                    df = run_keyed_op(name, df_in)
                    if not df.columns:  # the keyed function emitted nothing this batch
                        frames[name] = None
                        continue
                else:
                    assert node.fn is not None
                    df = map_stateless(df_in, node.fn, node.params, schemas, name)
            if len(graph.consumers[name]) > 1 and node.kind != "keyed":
                df = df.persist()
                cached.append(df)
            frames[name] = df
        return sinks
    finally:
        for df in cached:
            with contextlib.suppress(Exception):
                df.unpersist()
