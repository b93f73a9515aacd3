"""``dropDuplicates(cols, within=...)``: Spark's ``dropDuplicatesWithinWatermark``, vectorized.

Spark's rules (``StreamingDeduplicateWithinWatermarkExec``): a row at or behind the
previous batch's watermark is late and dropped; a row whose key (``cols``) is in the
state is a duplicate and dropped; otherwise it is emitted and its key kept until
``event time + delay`` (the watermark's delay; ``within`` overrides it), removed once the
watermark reaches that expiry. Within a batch Spark keeps one row per key (which one
depends on the order rows arrive in, as here: Spark's ``first`` of the key's rows).

On the data path Spark reduces each batch to one row per (shard, key) before the shuffle
(:class:`Dedup` partials: the row as a struct and its expiry); the task anti-joins them
against its shards' state — per shard an Arrow table of keys and expiries — with one
hash aggregation (:func:`fold_dedup`), emits the new rows and evicts expired keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.fold import Folded
from streamscale.runtime.spark.keyed.agg.spec import LATE, N_ROWS, interval_us

__all__ = ["EXP", "ROW", "Dedup", "DedupOp", "fold_dedup"]

ROW, EXP = "__ss_row", "__ss_exp"  # the kept row (a struct), its key's expiry (µs)
_OLD, _IDX = "__ss_old", "__ss_idx"


@dataclass(frozen=True, slots=True)
class DedupOp:
    """What a reduce task needs (picklable): the key columns and the output columns."""

    keys: tuple[str, ...]
    out: tuple[str, ...]


def fold_dedup(
    states: Sequence[pa.Table],
    part: pa.Table | None,
    op: DedupOp,
    *,
    shard: str,
    evict_ms: int | None = None,
) -> Folded:
    """A task's batch: ``part`` (``shard``, keys, ``ROW``, ``EXP``, ``N_ROWS``, ``LATE``)
    against ``states`` (``shard``, keys, ``EXP``); ``emit`` holds the new rows' ``ROW``."""
    late = 0
    group = [shard, *op.keys]
    if part is not None and LATE in part.column_names and part.num_rows:
        is_late = part.column(LATE).to_numpy(zero_copy_only=False)
        late = int(part.column(N_ROWS).to_numpy()[is_late].sum())
        part = part.filter(pa.array(~is_late))
    inputs = []
    for t in states:
        t = t.select([*group, EXP])
        n = t.num_rows
        t = t.append_column(_OLD, pa.array(np.ones(n, dtype=bool)))
        inputs.append(t.append_column(_IDX, pa.nulls(n, pa.int64())))
    if part is not None and part.num_rows:
        p = part.select([*group, EXP])
        p = p.append_column(_OLD, pa.array(np.zeros(p.num_rows, dtype=bool)))
        inputs.append(p.append_column(_IDX, pa.array(np.arange(p.num_rows, dtype=np.int64))))
    if not inputs:
        return Folded(None, None, frozenset(), late)
    schema = inputs[-1].schema
    t = pa.concat_tables([x if x.schema.equals(schema) else x.cast(schema) for x in inputs])
    g = t.group_by(group, use_threads=False).aggregate(
        [(_OLD, "any"), (_IDX, "min"), (EXP, "first")]
    )
    old = g.column(f"{_OLD}_any").to_numpy(zero_copy_only=False)
    idx = g.column(f"{_IDX}_min")
    emit = None
    changed: set[int] = set()
    if part is not None and (~old).any():
        rows = pc.filter(idx, pa.array(~old))
        emit = part.take(rows)
        changed |= set(np.unique(emit.column(shard).to_numpy()).tolist())
    state = pa.table({**{k: g.column(k) for k in group}, EXP: g.column(f"{EXP}_first")})
    if evict_ms is not None:
        expired = pc.less_equal(state.column(EXP), evict_ms * 1000)
        if pc.any(expired).as_py():
            changed |= set(np.unique(state.filter(expired).column(shard).to_numpy()).tolist())
            state = state.filter(pc.invert(expired))
    return Folded(emit, state, frozenset(changed), late)


@dataclass(slots=True)
class Dedup:
    """``dropDuplicates(cols, within=...)``: the graph's function (driver side).

    Parameters
    ----------
    keys
        The columns that make rows duplicates.
    time_col
        The query's watermark column (each kept key expires ``within`` after its row).
    within
        Spark interval string: how long a key is kept after its row's event time.
    """

    keys: tuple[str, ...]
    time_col: str
    within: str
    within_us: int = 0
    columns: dict[Any, Any] = field(default_factory=dict, repr=False)  # plan-only Columns

    vectorized = True
    drops_late = True
    time_mode = "EventTime"
    batch_clock = True
    session = False
    window = None

    @classmethod
    def build(
        cls,
        keys: Sequence[str],
        *,
        watermark: tuple[str, int] | None,
        within: str | None,
        item: str,
    ) -> Dedup:
        """Check the declaration (one line naming what is refused)."""
        if not keys:
            raise StreamscaleError("dropDuplicates needs at least one column", item=item)
        if watermark is None:
            raise StreamscaleError(
                "dropDuplicates within the watermark needs withWatermark(...) on the input "
                "(as Spark's dropDuplicatesWithinWatermark)",
                item=item,
            )
        text = within if within is not None else f"{watermark[1]} milliseconds"
        return cls(tuple(keys), watermark[0], text, interval_us(text, item=item))

    def resolve(self, df: Any, *, item: str) -> Any:
        """The output schema (the input's) after checking the key columns exist."""
        names = set(df.columns)
        for k in self.keys:
            if k not in names:
                raise StreamscaleError(f"no column {k!r} in the input", item=item)
        return df.schema

    def partial(self, keyed: Any, shard: str, late_ms: int | None) -> Any:
        """One row per (shard, key) of a batch, with its expiry, as Spark columns."""
        from pyspark.sql import functions as F

        cols = [c for c in keyed.columns if c != shard]
        group = [F.col(shard), *(F.col(k) for k in self.keys)]
        if late_ms is not None:
            keyed = keyed.withColumn(
                LATE, F.coalesce(F.unix_micros(F.col(self.time_col)) <= late_ms * 1000,
                                 F.lit(False)),
            )  # fmt: skip
            group.append(F.col(LATE))
        row = F.first(F.struct(*(F.col(c) for c in cols))).alias(ROW)
        out = keyed.groupBy(*group).agg(row, F.count(F.lit(1)).alias(N_ROWS))
        exp = F.unix_micros(F.col(f"{ROW}.{self.time_col}")) + F.lit(self.within_us)
        return out.withColumn(EXP, exp)
