"""One task's batch of a declarative operator: what it emits and keeps, per output mode."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamscale.runtime.spark.agg.accumulators import AggCall
from streamscale.runtime.spark.agg.fold import fold
from streamscale.runtime.spark.agg.spec import N_ROWS, WE, WS, AggOp

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
