"""One task's batch of a declarative operator: what it emits and keeps, per output mode."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.keyed.agg.accumulators import AggCall
from streamscale.runtime.spark.keyed.agg.fold import fold
from streamscale.runtime.spark.keyed.agg.spec import N_ROWS, WE, WS, AggOp

S = "g"
CALLS = (AggCall("count", "n", 0), AggCall("max", "m", 1))
TS = pa.timestamp("us", tz="UTC")


def _t(sec: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(sec, tz=dt.UTC)


def _table(rows: list[tuple[int, int, str, int, int]], *, partial: bool) -> pa.Table:
    """Rows (shard, window start s, key, count, max) of 10 s windows."""
    cols = {
        S: pa.array([r[0] for r in rows], pa.int64()),
        WS: pa.array([_t(r[1]) for r in rows], TS),
        WE: pa.array([_t(r[1] + 10) for r in rows], TS),
        "k": pa.array([r[2] for r in rows], pa.string()),
        "__a0": pa.array([r[3] for r in rows], pa.int64()),
        "__a1": pa.array([r[4] for r in rows], pa.int64()),
    }
    if partial:
        cols[N_ROWS] = pa.array([r[3] for r in rows], pa.int64())
    return pa.table(cols)


def _op(mode: str) -> AggOp:
    return AggOp((WS, WE, "k"), CALLS, mode, None, ("window", "k", "n", "m"), "window")


def _groups(t: pa.Table | None) -> set[tuple[int, str, int, int]]:
    if t is None:
        return set()
    return {
        (int(r[WS].timestamp()), r["k"], r["__a0"], r["__a1"])
        for r in t.to_pylist()  # type: ignore[union-attr]
    }


STATE = [_table([(0, 0, "a", 2, 5), (0, 10, "a", 1, 1)], partial=False),
         _table([(1, 0, "b", 1, 9)], partial=False)]  # fmt: skip
PART = _table([(0, 0, "a", 3, 7), (1, 10, "b", 4, 2), (0, 20, "a", 1, 0)], partial=True)


def test_update_without_watermark_emits_changed_groups_and_keeps_all() -> None:
    f = fold(STATE, PART, _op("update"), shard=S)
    assert _groups(f.emit) == {(0, "a", 5, 7), (10, "b", 4, 2), (20, "a", 1, 0)}
    assert len(_groups(f.state)) == 5 and f.changed == {0, 1} and f.late_rows == 0


def test_late_partials_are_dropped_and_append_emits_closed_windows_once() -> None:
    # late watermark 10 s: the window [0, 10) is late; eviction at 20 s closes [10, 20)
    f = fold(STATE, PART, _op("append"), shard=S, late_ms=10_000, evict_ms=20_000)
    assert f.late_rows == 3
    assert _groups(f.emit) == {(0, "a", 2, 5), (0, "b", 1, 9), (10, "a", 1, 1), (10, "b", 4, 2)}
    assert _groups(f.state) == {(20, "a", 1, 0)}
    assert f.changed == {0, 1}


def test_update_with_watermark_emits_updates_then_evicts_closed_windows() -> None:
    f = fold(STATE, PART, _op("update"), shard=S, late_ms=10_000, evict_ms=20_000)
    assert _groups(f.emit) == {(10, "b", 4, 2), (20, "a", 1, 0)}
    assert _groups(f.state) == {(20, "a", 1, 0)}


def test_complete_emits_every_group_and_no_partials_changes_nothing() -> None:
    f = fold(STATE, PART, _op("complete"), shard=S)
    assert len(_groups(f.emit)) == 5
    g = fold(STATE, None, _op("update"), shard=S)
    assert _groups(g.emit) == set() and g.changed == frozenset()
    assert fold([], None, _op("update"), shard=S).emit is None


# --- session windows ------------------------------------------------------------------------

GAP = 5


def _brute_sessions(rows: list[tuple[str, int]]) -> dict[str, list[tuple[int, int, int, int]]]:
    """Per key: (start, end, count, max t) of sessions [t, t + GAP) merged when one starts
    at or before the current end (Spark's rule)."""
    out: dict[str, list[tuple[int, int, int, int]]] = {}
    for k in sorted({r[0] for r in rows}):
        cur: list[int] | None = None
        for t in sorted(t for kk, t in rows if kk == k):
            if cur is not None and t <= cur[1]:
                cur[1] = max(cur[1], t + GAP)
                cur[2] += 1
                cur[3] = max(cur[3], t)
            else:
                if cur is not None:
                    out.setdefault(k, []).append(tuple(cur))  # type: ignore[arg-type]
                cur = [t, t + GAP, 1, t]
        if cur is not None:
            out.setdefault(k, []).append(tuple(cur))  # type: ignore[arg-type]
    return out


def _session_partial(rows: list[tuple[str, int]]) -> pa.Table:
    """One batch's sessions and accumulators (what Spark's batch session_window gives)."""
    got = [(0, s, k, n, m, e) for k, ss in _brute_sessions(rows).items() for s, e, n, m in ss]
    return pa.table(
        {
            S: pa.array([0] * len(got), pa.int64()),
            WS: pa.array([_t(r[1]) for r in got], TS),
            WE: pa.array([_t(r[5]) for r in got], TS),
            "k": pa.array([r[2] for r in got], pa.string()),
            "__a0": pa.array([r[3] for r in got], pa.int64()),
            "__a1": pa.array([r[4] for r in got], pa.int64()),
            N_ROWS: pa.array([r[3] for r in got], pa.int64()),
        }
    )


@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), max_size=12),
        min_size=1,
        max_size=4,
    )
)
def test_sessions_merged_across_batches_equal_sessions_of_all_rows(batches) -> None:
    op = AggOp((WS, WE, "k"), CALLS, "complete", None, ("session_window", "k", "n", "m"),
               "session_window", session=True)  # fmt: skip
    state: list[pa.Table] = []
    for rows in batches:
        f = fold(state, _session_partial(rows), op, shard=S)
        state = [f.state] if f.state is not None else []
    every = [r for rows in batches for r in rows]
    want = {(k, s, e, n, m) for k, ss in _brute_sessions(every).items() for s, e, n, m in ss}
    got = set()
    for t in state:
        for r in t.to_pylist():
            got.add((r["k"], int(r[WS].timestamp()), int(r[WE].timestamp()), r["__a0"],
                     r["__a1"]))  # fmt: skip
    assert got == want
