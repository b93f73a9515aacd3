"""The job a :mod:`~streamscale.runtime.spark.api` stream builds: its operators, edges and
functions, and the checks of what a stream is given before a query starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.model.topology import Grouping
from streamscale.runtime.run_config import RUN_SETTINGS

__all__ = [
    "Builder",
    "check_sizes",
    "declared_schema",
    "declared_source",
    "interval",
    "name_of",
    "refuse_unknown",
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
