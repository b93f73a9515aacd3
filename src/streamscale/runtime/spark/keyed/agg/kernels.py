"""Vectorized kernels on Arrow tables: merge accumulators, split by shard, (de)serialise.

A shard's state for a declarative keyed operator is one Arrow table: the group's key
columns and its accumulator columns (:mod:`~streamscale.runtime.spark.keyed.agg.accumulators`).
A batch's partial aggregates have the same columns. :func:`merge` folds any number of
such tables (oldest first) into one row per group with pyarrow's hash aggregation,
single-threaded so that ``first``/``last`` keep the input order; list accumulators
(``collect_list``, ``collect_set``, ``count_distinct``) are flattened, regrouped with
numpy and rebuilt as list arrays. No Python runs per row; sketches
(:mod:`~streamscale.runtime.spark.keyed.agg.sketches`) merge with one library call per
sketch of a group that has more than one.

A table is stored as the Arrow IPC stream of :func:`to_ipc` (the shard's state value),
read back without a copy by :func:`from_ipc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.accumulators import Slot
from streamscale.runtime.spark.keyed.agg.sketches import merge_hll, merge_kll

__all__ = ["from_ipc", "merge", "split_by", "to_ipc"]

_ROW = "__ss_row"
_SKIP = pc.ScalarAggregateOptions(skip_nulls=True, min_count=0)
_SKIP1 = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
_KEEP = pc.ScalarAggregateOptions(skip_nulls=False, min_count=0)
_HASH: dict[str, tuple[str, Any]] = {
    "sum": ("sum", _SKIP),
    "sum1": ("sum", _SKIP1),
    "min": ("min", _SKIP1),
    "max": ("max", _SKIP1),
    "first": ("first", _KEEP),
    "last": ("last", _KEEP),
    "first_nn": ("first", _SKIP1),
    "last_nn": ("last", _SKIP1),
}


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    """The table of :func:`to_ipc`'s bytes (its buffers point into ``data``)."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _flat(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def merge(
    tables: Sequence[pa.Table],
    keys: Sequence[str],
    slots: Sequence[Slot],
    *,
    any_of: Sequence[str] = (),
    bound: int | None = None,
) -> pa.Table:
    """One row per group of ``keys`` over ``tables`` (oldest first), accumulators merged.

    Parameters
    ----------
    tables
        Tables with the same schema: ``keys``, every slot's column, ``any_of`` columns.
    keys
        The grouping columns (a null is a group of its own, as in Spark).
    slots
        The accumulators and how each merges.
    any_of
        Boolean columns merged by logical or (e.g. "this group changed in the batch").
    bound
        The most values a ``list``/``set`` accumulator may hold.

    Returns
    -------
    ``keys``, then the slots' columns, then ``any_of``, one row per group.

    Raises
    ------
    StreamscaleError
        A list or set would exceed ``bound`` (naming the aggregate and the group).
    """
    t = pa.concat_tables(list(tables)) if len(tables) != 1 else tables[0]
    lists = [s for s in slots if s.merge in ("list", "set")]
    sketches = [s for s in slots if s.merge in ("hll", "kll")]
    aggs: list[tuple[Any, ...]] = []
    names: list[str] = []
    for s in slots:
        if s.merge in _HASH:
            fn, opts = _HASH[s.merge]
            aggs.append((s.column, fn, opts))
            names.append(f"{s.column}_{fn}")
    for c in any_of:
        aggs.append((c, "any", _SKIP))
        names.append(f"{c}_any")
    if lists or sketches:
        t = t.append_column(_ROW, pa.array(np.arange(t.num_rows, dtype=np.int64)))
        aggs.append((_ROW, "list"))
    g = t.group_by(list(keys), use_threads=False).aggregate(aggs)
    out: dict[str, pa.Array] = {k: _flat(g.column(k)) for k in keys}
    by_slot = dict(zip([a[0] for a in aggs], names, strict=False))
    rebuilt: dict[str, pa.Array] = {}
    if lists:
        rebuilt = _merge_lists(t, g, lists, keys, bound)
    if sketches:
        rebuilt.update(_merge_sketches(t, g, sketches))
    for s in slots:
        out[s.column] = rebuilt[s.column] if s.column in rebuilt else _flat(
            g.column(by_slot[s.column])
        )  # fmt: skip
    for c in any_of:
        out[c] = _flat(g.column(f"{c}_any"))
    return pa.table(out)


def _merge_lists(
    t: pa.Table, g: pa.Table, lists: Sequence[Slot], keys: Sequence[str], bound: int | None
) -> dict[str, pa.Array]:
    """The list accumulators of each group of ``g``: elements in input order (``list``)
    or distinct non-null elements (``set``)."""
    rows = _flat(g.column(f"{_ROW}_list"))
    n_groups = g.num_rows
    group_of_row = np.empty(t.num_rows, dtype=np.int64)
    group_of_row[pc.list_flatten(rows).to_numpy()] = pc.list_parent_indices(rows).to_numpy()
    out: dict[str, pa.Array] = {}
    for s in lists:
        col = _flat(t.column(s.column))
        values = pc.list_flatten(col)
        owner = group_of_row[pc.list_parent_indices(col).to_numpy()]
        if s.merge == "set":
            pairs = pa.table({"g": owner, "v": values}).filter(pc.is_valid(values))
            pairs = pairs.group_by(["g", "v"], use_threads=False).aggregate([])
            owner, values = pairs.column("g").to_numpy(), _flat(pairs.column("v"))
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=n_groups)
        if bound is not None and n_groups and int(counts.max()) > bound:
            worst = int(np.argmax(counts))
            key = tuple(g.column(k)[worst].as_py() for k in keys)
            raise StreamscaleError(
                f"group {key!r} holds {int(counts[worst])} values, more than max_collect={bound}",
                item=f"aggregate {s.call}",
            )
        offsets = np.zeros(n_groups + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        out[s.column] = pa.ListArray.from_arrays(
            pa.array(offsets), values.take(pa.array(order)), type=col.type
        )
    return out


def _merge_sketches(t: pa.Table, g: pa.Table, sketches: Sequence[Slot]) -> dict[str, pa.Array]:
    """Each group's sketches merged into one: a group with one sketch keeps its bytes."""
    rows = _flat(g.column(f"{_ROW}_list")).to_pylist()
    out: dict[str, pa.Array] = {}
    for s in sketches:
        vals = _flat(t.column(s.column)).to_pylist()
        merged = []
        for idx in rows:
            blobs = [vals[i] for i in idx]
            merged.append(merge_hll(blobs, s.lg_k) if s.merge == "hll" else merge_kll(blobs))
        out[s.column] = pa.array(merged, pa.binary())
    return out


def split_by(table: pa.Table, column: str) -> dict[int, pa.Table]:
    """``table``'s rows by the integer value of ``column`` (dropped), each in input order."""
    if table.num_rows == 0:
        return {}
    vals = _flat(table.column(column)).to_numpy()
    order = np.argsort(vals, kind="stable")
    sorted_vals = vals[order]
    cut = np.flatnonzero(np.diff(sorted_vals)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(vals)]])
    body = table.drop_columns([column]).take(pa.array(order))
    return {
        int(sorted_vals[a]): body.slice(int(a), int(b - a))
        for a, b in zip(starts, ends, strict=True)
    }
