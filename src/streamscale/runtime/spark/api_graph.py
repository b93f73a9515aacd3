"""The job a :mod:`~streamscale.runtime.spark.api` stream builds: its operators, edges and
functions, and the checks of what a stream is given before a query starts."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.model.topology import Grouping
from streamscale.runtime.run_config import RUN_SETTINGS

if TYPE_CHECKING:
    from streamscale.runtime.spark.app import Executors
    from streamscale.runtime.spark.driver.graph_batch import GraphBatch
    from streamscale.runtime.spark.driver.query import StreamingQuery
    from streamscale.runtime.spark.executors.resources import Resources

__all__ = [
    "Builder",
    "add_agg",
    "check_sizes",
    "declared_schema",
    "declared_source",
    "interval",
    "name_of",
    "refuse_unknown",
    "start_job",
]


@dataclass(slots=True)
class Builder:
    """The operators, edges and functions of one job, shared by the streams derived from
    one :func:`~streamscale.runtime.spark.api.stream`."""

    name: str
    source_df: Any | None
    operators: list[Operator] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    functions: dict[str, Any] = field(default_factory=dict)  # a function or an operator spec
    available_now: bool = RUN_SETTINGS["available_now"].default

    def fresh(self, base: str) -> str:
        taken = {op.name for op in self.operators}
        if base not in taken:
            return base
        i = 2
        while f"{base}_{i}" in taken:
            i += 1
        return f"{base}_{i}"

    def add(self, op: Operator, inputs: tuple[str, ...], grouping: Grouping = "shuffle") -> str:
        self.operators.append(op)
        for src in inputs:
            self.edges.append(Edge(src, op.name, grouping=grouping))
        return op.name

    def topology(self) -> Topology:
        return Topology.build(self.name, list(self.operators), list(self.edges))

    def keyed_upstream(self, names: tuple[str, ...]) -> set[str]:
        """The keyed operators among ``names`` and everything upstream of them."""
        keyed = {e.dst for e in self.edges if e.grouping == "key"}
        seen: set[str] = set()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(e.src for e in self.edges if e.dst == n)
        return seen & keyed


def name_of(fn: Any, given: str | None) -> str:
    return given or getattr(fn, "__name__", "op").strip("<>") or "op"


def declared_schema(b: Builder, names: tuple[str, ...]) -> Any | None:
    """The schema of a stream when known before the query runs (the source's, or one
    stateless operator's declared ``output_schema``)."""
    if len(names) != 1:
        return None
    if names == ("source",):
        return None if b.source_df is None else b.source_df.schema
    declared = getattr(b.functions.get(names[0]), "output_schema", None)
    if isinstance(declared, str):
        from pyspark.sql import types as T

        return T._parse_datatype_string(declared)
    return declared if hasattr(declared, "fieldNames") else None


def interval(v: str | float, what: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
        raise StreamscaleError(
            f"window {what} must be an interval string or seconds > 0", item=f"window {v!r}"
        )
    return f"{int(v * 1_000_000)} microseconds"


def declared_source(source: Any, *, item: str) -> dict[str, Any]:
    """The source operator's ``format`` and options for ``stream(df, source=...)``:
    a registered source that knows what it offered, with options it accepts."""
    from streamscale.runtime.spark.sources.source_registry import check_options, source_offered

    try:
        fmt, options = source
        options = dict(options)
    except (TypeError, ValueError):
        raise StreamscaleError("source must be (format, options)", item=item) from None
    check_options(str(fmt), options, item=f"{item}: source")
    if source_offered(str(fmt), options) is None:
        raise StreamscaleError(
            "not a registered source that knows what it offered", item=f"{item}: source {fmt!r}"
        )
    return {"format": str(fmt), **options}


def refuse_unknown(given: Mapping[str, object], where: str) -> None:
    """Refuse keywords ``where`` does not take, in one line; ``executors=`` (the old name
    of a keyed operator's elastic instances) names the keyword that replaced it."""
    for k in given:
        if k == "executors":
            raise StreamscaleError(
                "executors= is now instances= (a keyed operator's elastic instances; "
                "'executor' means a Spark executor)",
                item=where,
            )
        raise StreamscaleError(f"unexpected keyword argument {k!r}", item=where)


def check_sizes(instances: int, shards: int, where: str) -> None:
    """Refuse ``instances`` or ``shards`` that are not whole numbers ≥ 1."""
    for what, v in (("instances", instances), ("shards", shards)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise StreamscaleError(f"{what} must be a whole number >= 1, not {v!r}", item=where)


def start_job(
    b: Builder,
    *,
    checkpoint: str | Path,
    duration_s: float | None,
    out: str | Path | None,
    max_batches: int | None,
    spark: Any | None,
    policy: str | None,
    params: Mapping[str, object] | None,
    seed: int | None,
    state_url: str | None,
    on_batch: Callable[[GraphBatch], None] | None,
    executors: Executors | None,
    resources: Resources | None,
) -> StreamingQuery:
    """Start the job ``b`` built (:meth:`~streamscale.runtime.spark.api.Stream.start`):
    its settings parsed once, then :func:`~streamscale.runtime.spark.driver.dag.start_graph`.
    Neither ``max_batches`` nor ``duration_s``: it runs until stopped."""
    from streamscale.runtime.run_config import parse_run

    given = {"duration_s": duration_s, "max_batches": max_batches, "policy": policy,
             "seed": seed, "state_url": state_url}  # fmt: skip
    cfg = parse_run({k: v for k, v in given.items() if v is not None}, params)
    if executors is not None and resources is not None:
        raise StreamscaleError("give executors= or resources=, not both", item="run")
    from streamscale.runtime.spark.driver.dag import start_graph
    from streamscale.runtime.spark.driver.graph import JobGraph

    graph = JobGraph.build(b.topology(), b.functions)
    df = b.source_df
    session = spark if spark is not None else getattr(df, "sparkSession", None)
    if session is None:
        raise StreamscaleError("no SparkSession: pass spark=", item="run")
    if executors is not None:
        resources = executors.resources(session)
    unlimited = duration_s is None and max_batches is None
    # absolute: executors resolve a relative path against their own working directory
    return start_graph(
        session, graph, duration_s=math.inf if unlimited else cfg.duration_s,
        checkpoint=Path(checkpoint).absolute(),
        out=None if out is None else Path(out).absolute(), max_batches=cfg.max_batches,
        source_df=df, policy=cfg.policy, params=cfg.params, seed=cfg.seed,
        state_url=cfg.state_url, available_now=b.available_now, on_batch=on_batch,
        resources=resources,
    )  # fmt: skip


def add_agg(
    b: Builder,
    inputs: tuple[str, ...],
    keyed: tuple[tuple[str, ...], int, int],
    aggs: tuple[Any, ...],
    mode: str,
    max_collect: int | None,
    name: str | None,
    window: tuple[str, str, str | None] | None,
    session: bool = False,
    *,
    bounds: tuple[str, str] | None = None,
    wait_ms: float = 0.0,
) -> str:
    """Add a keyed aggregation of ``inputs`` (``keyed``: its key columns, instances and
    shards) to ``b``, checked against the source's schema when it reads the source;
    its operator's name."""
    from streamscale.runtime.spark.compat.event_time import watermark_of
    from streamscale.runtime.spark.keyed.agg.spec import Aggregation

    keys, instances, shards = keyed
    n = b.fresh(name or ("window_agg" if window else "agg"))
    wm = watermark_of(b.source_df.schema) if b.source_df is not None else None
    fn = Aggregation.build(
        keys, aggs, mode=mode, max_collect=max_collect, item=f"operator {n}",
        window=window, watermark=wm, session=session, bounds=bounds, wait_ms=wait_ms,
    )  # fmt: skip
    if inputs == ("source",) and b.source_df is not None:
        fn.resolve(b.source_df, item=f"operator {n}")  # refuse before the query starts
    b.functions[n] = fn
    op = Operator(name=n, key=",".join(keys), instances=instances, shards=shards)
    b.add(op, inputs, grouping="key")
    return n
