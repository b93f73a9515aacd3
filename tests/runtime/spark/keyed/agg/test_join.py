"""A stream-stream join's batches in one task against a row-by-row reference of Spark's
``StreamingSymmetricHashJoinExec`` (late rows, buffering, matched flags, eviction and
outer rows on the watermark)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.runtime.spark.keyed.agg.join import (
    LCOL,
    MATCHED,
    RCOL,
    SIDE,
    TCOL,
    JoinOp,
    fold_join,
    state_marks,
)

S = "g"
ROW = pa.struct([("id", pa.int64())])


def _part(rows: list[tuple[int, str | None, int, int]]) -> pa.Table:
    """Rows (side, key, time µs, id) as the tagged rows a task receives (shard = key's)."""
    return pa.table(
        {
            S: pa.array([0 if k is None else ord(k[0]) % 2 for _, k, _, _ in rows], pa.int64()),
            SIDE: pa.array([s for s, _, _, _ in rows], pa.int8()),
            "k": pa.array([k for _, k, _, _ in rows], pa.string()),
            LCOL: pa.array([{"id": i} if s == 0 else None for s, _, _, i in rows], ROW),
            RCOL: pa.array([{"id": i} if s == 1 else None for s, _, _, i in rows], ROW),
            TCOL: pa.array([t for _, _, t, _ in rows], pa.int64()),
        }
    )


def _reference(batches: list[Any], op: JoinOp) -> list[tuple[Counter, set]]:
    """Spark's rules, one row at a time: per batch its output pairs (left id, right id;
    ``None`` for the null side) and the buffered (side, id, matched) rows."""
    left: list[dict[str, Any]] = []
    right: list[dict[str, Any]] = []
    prev = None
    out = []

    def cond(lt: int, rt: int) -> bool:
        if op.lower_us is None or op.upper_us is None:
            return True
        return lt + op.lower_us <= rt <= lt + op.upper_us

    def eq(a: str | None, b: str | None) -> bool:  # Spark's state: null equals null
        return a == b

    dropped = {"inner": (0, 1), "left": (1,), "right": (0,), "full": (), "left_semi": (0, 1)}

    for rows, wm in batches:
        emitted: Counter = Counter()
        lmark, rmark = state_marks(op, wm)
        fresh = [r for r in rows if prev is None or r[2] > prev * 1000]
        fresh = [r for r in fresh if r[1] is not None or r[0] not in dropped[op.how]]
        for _, k, t, i in (r for r in fresh if r[0] == 0):
            hits = [s for s in right if eq(s["k"], k) and cond(t, s["t"])]
            if op.how == "left_semi":
                if hits:
                    emitted[(i, None)] += 1
                else:
                    left.append({"k": k, "t": t, "id": i, "m": False})
                continue
            for s in hits:
                emitted[(i, s["id"])] += 1
                s["m"] = True
            left.append({"k": k, "t": t, "id": i, "m": bool(hits)})  # even if leaving now
        for _, k, t, i in (r for r in fresh if r[0] == 1):
            hits = [s for s in left if eq(s["k"], k) and cond(s["t"], t)]
            for s in hits:
                if op.how != "left_semi":
                    emitted[(s["id"], i)] += 1
                elif not s["m"]:
                    emitted[(s["id"], None)] += 1
                s["m"] = True
            outer = op.how in ("right", "full") and not hits
            if rmark is None or t > rmark or outer:
                right.append({"k": k, "t": t, "id": i, "m": bool(hits)})
        for buf, mark, outer, side in (
            (left, lmark, op.how in ("left", "full"), 0),
            (right, rmark, op.how in ("right", "full"), 1),
        ):
            if mark is None:
                continue
            for s in [s for s in buf if s["t"] <= mark]:
                buf.remove(s)
                if outer and not s["m"]:
                    emitted[(s["id"], None) if side == 0 else (None, s["id"])] += 1
        kept = {(0, s["id"], s["m"]) for s in left} | {(1, s["id"], s["m"]) for s in right}
        out.append((emitted, kept))
        prev = wm
    return out


def _got(batches: list[Any], op: JoinOp) -> list[tuple[Counter, set]]:
    state: list[pa.Table] = []
    prev = None
    out = []
    for rows, wm in batches:
        f = fold_join(state, _part(rows) if rows else None, op, shard=S, late_ms=prev,
                      evict_ms=wm)  # fmt: skip
        emitted: Counter = Counter()
        if f.emit is not None:
            for r in f.emit.to_pylist():
                lid = None if r[LCOL] is None else r[LCOL]["id"]
                rid = None if r[RCOL] is None else r[RCOL]["id"]
                emitted[(lid, rid)] += 1
        kept = set()
        if f.state is not None:
            for r in f.state.to_pylist():
                row = r[LCOL] if r[SIDE] == 0 else r[RCOL]
                kept.add((r[SIDE], row["id"], r[MATCHED]))
        state = [f.state] if f.state is not None else state
        out.append((emitted, kept))
        prev = wm
    return out


_rows = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["a", "b", "c", None]), st.integers(0, 40)),
    max_size=10,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_rows, st.integers(0, 40)), min_size=1, max_size=5),
    st.sampled_from(["inner", "left", "right", "full", "left_semi"]),
    st.integers(-8, 8),
    st.integers(0, 12),
    st.booleans(),
)
def test_batches_equal_spark_rules_applied_row_by_row(batches, how, lower, width, bounded):
    op = (
        JoinOp(("k",), how, lower * 1000, (lower + width) * 1000)
        if bounded
        else JoinOp(("k",), how)
    )
    seq = []
    n = 0
    wm = 0
    for rows, step in batches:  # the watermark never goes back; ids unique; ms times
        wm += step
        tagged = []
        for side, k, t in rows:
            tagged.append((side, k, t * 1000, n))
            n += 1
        seq.append((tagged, wm))
    assert _got(seq, op) == _reference(seq, op)


def test_outer_rows_wait_for_the_watermark_and_matched_rows_do_not_come_back() -> None:
    op = JoinOp(("k",), "left", 0, 5_000)
    rows = [(0, "a", 1_000, 1), (0, "b", 2_000, 2), (1, "a", 3_000, 3)]
    f = fold_join([], _part(rows), op, shard=S, late_ms=None, evict_ms=0)
    assert f.emit is not None and f.emit.num_rows == 1  # a ⋈ a; b waits
    g = fold_join([f.state], None, op, shard=S, late_ms=0, evict_ms=20)
    assert g.emit is not None
    assert [(r[LCOL]["id"], r[RCOL]) for r in g.emit.to_pylist()] == [(2, None)]
    assert g.state is not None and g.state.num_rows == 0
