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
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.runtime.spark.agg.kernels import merge
from streamscale.runtime.spark.agg.spec import N_ROWS, WE, AggOp

__all__ = ["NEW", "Folded", "fold"]

NEW = "__ss_new"  # the group changed in this batch


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
    if part is not None and late_ms is not None and part.num_rows:
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
