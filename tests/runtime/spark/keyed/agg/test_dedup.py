"""Deduplication within the watermark in one task: against a row-by-row reference of Spark's
``StreamingDeduplicateWithinWatermarkExec`` rules."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.keyed.agg.dedup import EXP, ROW, DedupOp, fold_dedup
from streamscale.runtime.spark.keyed.agg.spec import LATE, N_ROWS

S = "g"
OP = DedupOp(("k",), ("k", "t"))
DELAY = 10  # µs of expiry after the row's event time


def _partial(rows: list[tuple[str, int]], late_us: int | None) -> pa.Table:
    """One row per key (the batch's first), as Spark's partials; late rows apart."""
    seen: dict[tuple[str, bool], int] = {}
    for k, t in rows:
        seen.setdefault((k, late_us is not None and t <= late_us), t)
    keys = list(seen)
    return pa.table(
        {
            S: pa.array([0] * len(keys), pa.int64()),
            "k": pa.array([k for k, _ in keys]),
            LATE: pa.array([lt for _, lt in keys]),
            ROW: pa.array(
                [{"k": k, "t": seen[(k, lt)]} for k, lt in keys],
                pa.struct([("k", pa.string()), ("t", pa.int64())]),
            ),
            N_ROWS: pa.array([1] * len(keys), pa.int64()),
            EXP: pa.array([seen[key] + DELAY for key in keys], pa.int64()),
        }
    )


@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 40)), max_size=8),
            st.integers(0, 40),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_kept_rows_equal_spark_rules_applied_row_by_row(batches) -> None:
    state: list[pa.Table] = []
    ref: dict[str, int] = {}  # key -> expiry
    late_us = None
    for rows, wm in batches:
        # the reference: late rows dropped, then a key in state drops the row, else kept
        want = []
        for k, t in rows:
            if late_us is not None and t <= late_us:
                continue
            if k not in ref:
                ref[k] = t + DELAY
                want.append((k, t))
        evict = max(wm, late_us or 0)
        ref = {k: e for k, e in ref.items() if e > evict}
        part = _partial(rows, late_us)
        f = fold_dedup(state, part, OP, shard=S, evict_ms=None)
        kept = [] if f.emit is None else f.emit.column(ROW).to_pylist()
        got = sorted((r["k"], r["t"]) for r in kept)
        assert got == sorted(want)
        st_ = f.state
        if st_ is not None:  # eviction (µs here: compare expiries directly)
            st_ = st_.filter(pa.compute.greater(st_.column(EXP), evict))
        state = [st_] if st_ is not None else []
        assert {r["k"]: r[EXP] for t in state for r in t.to_pylist()} == ref
        late_us = evict
