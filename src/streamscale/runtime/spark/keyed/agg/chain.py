"""Consecutive declarative aggregations on one key, run in one keyed stage.

``key_by(k).agg(...)`` followed by ``key_by(k).agg(...)`` over its output (same key
columns, same instances and shards) puts each group of the second operator in the
shard of the first's that emitted it: the second's input needs no shuffle. Fused, the
first operator's reduce task merges its partials into its shard state as always
(:mod:`~streamscale.runtime.spark.keyed.agg.operator`), then hands the groups it emits
to the next operator in the same task: their per-row partial aggregates (:func:`row_partials`,
what Spark's partial aggregation of those rows gives, group by group, once merged) are
merged into the next operator's shard state and written as its version of the batch,
and so on; only the last operator's output leaves the task. One Spark job, one
shuffle, one driver round of planning for the whole chain, where each operator cost
one of each.

What fuses (:func:`follower_recipe`): a follower whose aggregates are ``count``,
``sum``, ``min``, ``max`` or ``avg`` of a plain input column (or ``count(*)``), of
non-decimal types, in ``update`` mode, without a window, reading nothing but its
leader's output. Each operator keeps its own state, versions, routing table and
statistics; a batch fuses only when the followers' partition maps group the shards as
the leader's does (:func:`partition_remap`), so a plan that routes them apart runs the
operators one by one for that batch, on the same state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Recipe", "follower_recipe", "partition_remap", "row_partials"]

#: The aggregates a follower may hold, computed row by row in the task.
ROW_FUNCS = ("count", "sum", "min", "max", "avg")


@dataclass(frozen=True, slots=True)
class Recipe:
    """How a follower's partial rows are made from its input rows (picklable).

    ``slots``: per accumulator column, ``(column, how, input column or None, Arrow
    type)`` where ``how`` is ``ones`` (``count(*)``), ``valid`` (``count(x)``: 1 where
    ``x`` is not null), ``value`` (``x`` as the accumulator's type) or ``double``
    (``avg``'s sum)."""

    keys: tuple[str, ...]
    slots: tuple[tuple[str, str, str | None, pa.DataType], ...]


def _arg_column(parsed: Any) -> str | None:
    """The input column a parsed aggregate reads (``"*"``: every row), or ``None``
    when its argument is an expression."""
    node = parsed.arg._jc.node()
    kind = str(node.getClass().getSimpleName())
    if kind == "UnresolvedStar":
        return "*"
    if kind == "UnresolvedAttribute":
        parts = node.nameParts()
        return str(parts.apply(0)) if parts.size() == 1 else None
    return None


def follower_recipe(agg: Any, resolved: Any, in_schema: Any) -> Recipe | None:
    """The recipe of aggregation ``agg`` (resolved against ``in_schema``, a pyspark
    ``StructType``), or ``None`` when it cannot run row by row in a leader's task."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    if agg.window is not None or agg.mode != "update" or agg.time_mode is not None:
        return None
    types = {f.name: f.dataType for f in in_schema.fields}
    out = {f.name: f.dataType for f in resolved.out_schema.fields}
    slots: list[tuple[str, str, str | None, pa.DataType]] = []
    for p, call in zip(agg.parsed, resolved.op.calls, strict=True):
        if call.func not in ROW_FUNCS:
            return None
        col = _arg_column(p)
        if col is None or (col == "*" and call.func != "count"):
            return None
        if col != "*" and col not in types:
            return None
        if col != "*" and isinstance(types[col], T.DecimalType):
            return None
        a = f"__a{call.index}"
        if call.func == "count":
            slots.append((a, "ones" if col == "*" else "valid", None if col == "*" else col,
                          pa.int64()))  # fmt: skip
        elif call.func == "avg":
            slots.append((f"{a}_s", "double", col, pa.float64()))
            slots.append((f"{a}_c", "valid", col, pa.int64()))
        else:
            slots.append((a, "value", col, to_arrow_type(out[call.name])))
    return Recipe(tuple(agg.keys), tuple(slots))


def row_partials(
    recipe: Recipe, rows: pa.RecordBatch, shard: np.ndarray, *, shard_col: str, n_rows: str
) -> pa.Table:
    """One partial row per input row: the shard, the keys, each accumulator, and 1 in
    ``n_rows`` (merging them by group gives the partials Spark would compute)."""
    n = rows.num_rows
    cols: dict[str, Any] = {shard_col: pa.array(shard, pa.int64())}
    for k in recipe.keys:
        cols[k] = rows.column(k)
    for name, how, src, typ in recipe.slots:
        if how == "ones":
            cols[name] = pa.array(np.ones(n, np.int64))
        elif how == "valid":
            cols[name] = pc.cast(pc.is_valid(rows.column(src)), pa.int64())
        elif how == "double":
            cols[name] = pc.cast(rows.column(src), pa.float64())
        else:
            arr = rows.column(src)
            cols[name] = arr if arr.type == typ else pc.cast(arr, typ)
    cols[n_rows] = pa.array(np.ones(n, np.int64))
    return pa.table(cols)


def partition_remap(leader: Any, follower: Any) -> tuple[int, ...] | None:
    """For each of ``leader``'s partitions, the ``follower`` partition holding the same
    shards (two :class:`~streamscale.runtime.spark.routing.routing.PartitionMap` of
    operators with the same ``E`` and ``Z``); ``None`` when they group shards apart."""
    if (leader.instances, leader.shards, leader.partitions) != (
        follower.instances, follower.shards, follower.partitions,
    ):  # fmt: skip
        return None
    remap: dict[int, int] = {}
    for p, q in zip(leader.shard_partition, follower.shard_partition, strict=True):
        if remap.setdefault(p, q) != q:
            return None
    if len(set(remap.values())) != len(remap):
        return None
    return tuple(remap.get(p, p) for p in range(leader.partitions))


def same_places(
    placed_a: Any, placed_b: Any, units_a: Sequence[str], units_b: Sequence[str],
    remap: Sequence[int],
) -> bool:  # fmt: skip
    """Whether each leader unit is pinned where its follower unit is (``None``: neither
    pinned)."""
    if placed_a is None and placed_b is None:
        return True
    if placed_a is None or placed_b is None:
        return False
    return all(placed_a.get(units_a[p]) == placed_b.get(units_b[q]) for p, q in enumerate(remap))
