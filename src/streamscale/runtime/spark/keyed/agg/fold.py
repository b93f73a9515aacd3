"""One batch of a declarative keyed operator in one task, as a pure function of Arrow tables.

:func:`fold` takes the state tables of the task's shards and the batch's partial
aggregates (both with the shard as a column) and returns what the batch emits, the
new state, and which shards changed. The rules are Spark's streaming aggregation's
(``StateStoreSaveExec``):

* a windowed aggregation closing on the watermark drops the partial rows of windows
  whose end is at or before the *previous* batch's watermark (late data);
* ``update`` emits the groups the batch changed, with their full values; ``complete``
  every group; ``append`` the windows whose end is at or before this batch's
  watermark, once, as they close;
* closed windows leave the state (in ``update`` and ``append`` mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.runtime.spark.keyed.agg.accumulators import Slot
from streamscale.runtime.spark.keyed.agg.kernels import merge
from streamscale.runtime.spark.keyed.agg.spec import LATE, N_ROWS, WE, WS, AggOp

__all__ = ["NEW", "Folded", "fold", "sessions"]

NEW = "__ss_new"  # the group changed in this batch
SID = "__ss_sid"  # the merged session a row belongs to


@dataclass(frozen=True, slots=True)
class Folded:
    """A task's batch: rows to emit (accumulators), the new state, changed shards.

    ``state`` holds every group still kept, of every shard given; ``changed`` the
    shards whose state differs from before (their new version must be written);
    ``late_rows``: input rows in the dropped late partials.
    """

    emit: pa.Table | None
    state: pa.Table | None
    changed: frozenset[int]
    late_rows: int


def _ends_us(table: pa.Table) -> np.ndarray:
    return pc.cast(table.column(WE), pa.int64()).to_numpy()


def _shards(table: pa.Table, shard: str) -> set[int]:
    return set(np.unique(table.column(shard).to_numpy()).tolist())


def _same_as_previous(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row of a sorted column: equal to the row before (nulls equal each other)."""
    a = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(a)
    out = np.zeros(n, dtype=bool)
    if n > 1:
        cur, prev = a.slice(1), a.slice(0, n - 1)
        eq = pc.fill_null(pc.equal(cur, prev), False)
        both = pc.and_(pc.is_null(cur), pc.is_null(prev))
        out[1:] = pc.or_(eq, both).to_numpy(zero_copy_only=False)
    return out


def sessions(table: pa.Table, keys: list[str]) -> pa.Table:
    """``table`` (session rows: ``keys``, ``WS``, ``WE``) sorted by keys and start, with
    ``SID``: rows of one key whose sessions overlap or touch share it (Spark merges a
    session into the current one when its start <= the current end)."""
    order = pc.sort_indices(table, sort_keys=[*((k, "ascending") for k in keys), (WS, "ascending")])
    t = table.take(order)
    n = t.num_rows
    same = np.ones(n, dtype=bool)
    for k in keys:
        same &= _same_as_previous(t.column(k))
    if n:
        same[0] = False
    group = np.cumsum(~same)
    start = pc.cast(t.column(WS), pa.int64()).to_numpy()
    end = pd.Series(pc.cast(t.column(WE), pa.int64()).to_numpy())
    reach = end.groupby(group).cummax().to_numpy()  # furthest end so far in the key
    new = ~same
    new[1:] |= start[1:] > reach[:-1]
    return t.append_column(SID, pa.array(np.cumsum(new), pa.int64()))


def fold(
    states: Sequence[pa.Table],
    part: pa.Table | None,
    op: AggOp,
    *,
    shard: str,
    late_ms: int | None = None,
    evict_ms: int | None = None,
) -> Folded:
    """Merge a batch's partials ``part`` into ``states`` under ``op``'s output mode.

    Parameters
    ----------
    states
        State tables (``shard``, ``op.keys``, accumulators), any number.
    part
        The batch's partial aggregates (those columns and ``N_ROWS``), or ``None``.
    op
        The aggregation.
    shard
        The shard column's name.
    late_ms, evict_ms
        For windows closing on the watermark: partials of windows ending at or before
        ``late_ms`` are dropped; windows ending at or before ``evict_ms`` close.
    """
    late = 0
    slots = op.slots
    cols = [shard, *op.keys, *(s.column for s in slots)]
    if part is not None and op.session and LATE in part.column_names:
        is_late = part.column(LATE).to_numpy(zero_copy_only=False)
        if is_late.any():
            late = int(part.column(N_ROWS).to_numpy()[is_late].sum())
            part = part.filter(pa.array(~is_late))
    elif part is not None and late_ms is not None and part.num_rows:
        is_late = _ends_us(part) <= late_ms * 1000
        if is_late.any():
            late = int(part.column(N_ROWS).to_numpy()[is_late].sum())
            part = part.filter(pa.array(~is_late))
    inputs = []
    changed: set[int] = set()
    if states:
        schema = part.select(cols).schema if part is not None else states[0].select(cols).schema
        for t in states:
            t = t.select(cols)
            t = t if t.schema.equals(schema) else t.cast(schema)
            inputs.append(t.append_column(NEW, pa.array(np.zeros(t.num_rows, dtype=bool))))
    if part is not None and part.num_rows:
        changed = _shards(part, shard)
        p = part.select(cols)
        inputs.append(p.append_column(NEW, pa.array(np.ones(p.num_rows, dtype=bool))))
    if not inputs:
        return Folded(None, None, frozenset(), late)
    if op.session:
        user = [k for k in op.keys if k not in (WS, WE)]
        t = sessions(pa.concat_tables(inputs), [shard, *user])
        bounds = (Slot(WS, "min", WS), Slot(WE, "max", WE))
        merged = merge([t], [SID, shard, *user], (*bounds, *slots), any_of=[NEW],
                       bound=op.max_collect).drop_columns([SID])  # fmt: skip
    else:
        merged = merge(inputs, [shard, *op.keys], slots, any_of=[NEW], bound=op.max_collect)
    new = merged.column(NEW)
    if op.mode == "complete":
        return Folded(merged, merged.drop_columns([NEW]), frozenset(changed), late)
    if evict_ms is None:
        return Folded(merged.filter(new), merged.drop_columns([NEW]), frozenset(changed), late)
    closed = pa.array(_ends_us(merged) <= evict_ms * 1000)
    if pc.any(closed).as_py():
        changed |= _shards(merged.filter(closed), shard)
    emit = merged.filter(closed) if op.mode == "append" else merged.filter(new)
    keep = merged.filter(pc.invert(closed)).drop_columns([NEW])
    return Folded(emit, keep, frozenset(changed), late)
