"""Merging accumulators: against a brute force over the rows, associative, commutative.

No Spark: a batch's partials are computed here by brute force from its rows (what
Spark's partial aggregation computes), merged with :func:`merge`, finished with
:func:`finish`, and compared with the aggregate of all rows computed directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.accumulators import (
    FUNCTIONS,
    AggCall,
    canonical,
    finish,
    slots_of,
)
from streamscale.runtime.spark.keyed.agg.kernels import from_ipc, merge, split_by, to_ipc

CALLS = (
    AggCall("count", "count", 0),
    AggCall("sum", "sum", 1),
    AggCall("min", "min", 2),
    AggCall("max", "max", 3),
    AggCall("avg", "avg", 4),
    AggCall("first", "first", 5),
    AggCall("first", "first_nn", 6, ignore_nulls=True),
    AggCall("last", "last", 7),
    AggCall("last", "last_nn", 8, ignore_nulls=True),
    AggCall("count_distinct", "count_distinct", 9),
    AggCall("collect_list", "collect_list", 10),
    AggCall("collect_set", "collect_set", 11),
)
SLOTS = tuple(s for c in CALLS for s in slots_of(c))
ORDERED = ("first", "last", "first_nn", "last_nn", "list")  # merges that depend on order
LIST = pa.list_(pa.int64())
BOUND = 10_000

Row = tuple[str | None, int | None]
rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", None]), st.one_of(st.none(), st.integers(-50, 50))),
    max_size=30,
)


def _final(vs: list[int | None], call: AggCall) -> Any:
    """The aggregate of one group's values, as Spark defines it, computed directly."""
    nn = [v for v in vs if v is not None]
    f = call.func
    if f == "count":
        return len(nn)
    if f == "sum":
        return sum(nn) if nn else None
    if f == "min":
        return min(nn) if nn else None
    if f == "max":
        return max(nn) if nn else None
    if f == "avg":
        return sum(nn) / len(nn) if nn else None
    if f in ("first", "last"):
        seq = nn if call.ignore_nulls else vs
        return (seq[0] if f == "first" else seq[-1]) if seq else None
    if f == "count_distinct":
        return len(set(nn))
    if f == "collect_list":
        return nn
    return sorted(set(nn))


def _groups(rows: Sequence[Row]) -> dict[str | None, list[int | None]]:
    out: dict[str | None, list[int | None]] = {}
    for k, v in rows:
        out.setdefault(k, []).append(v)
    return out


def partial(rows: Sequence[Row]) -> pa.Table:
    """One batch's partial aggregates, by brute force (Spark's partial aggregation)."""
    g = _groups(rows)
    cols: dict[str, Any] = {"k": pa.array(list(g), pa.string())}
    for call in CALLS:
        slots = slots_of(call)
        vals = [_final(vs, call) for vs in g.values()]
        if call.func == "avg":
            nn = [[v for v in vs if v is not None] for vs in g.values()]
            cols[slots[0].column] = pa.array(
                [float(sum(x)) if x else None for x in nn], pa.float64()
            )
            cols[slots[1].column] = pa.array([len(x) for x in nn], pa.int64())
        elif call.func in ("count_distinct", "collect_set"):
            sets = [sorted({v for v in vs if v is not None}) for vs in g.values()]
            cols[slots[0].column] = pa.array(sets, LIST)
        elif call.func == "collect_list":
            cols[slots[0].column] = pa.array(vals, LIST)
        else:
            cols[slots[0].column] = pa.array(vals, pa.int64())
    return pa.table(cols)


def _result(table: pa.Table) -> dict[Any, dict[str, Any]]:
    """Finished values per key (sets sorted: their order is not defined)."""
    fin = finish(table, CALLS)
    keys = table.column("k").to_pylist()
    out: dict[Any, dict[str, Any]] = {}
    for i, k in enumerate(keys):
        row = {name: arr[i].as_py() for name, arr in fin.items()}
        row["collect_set"] = sorted(row["collect_set"])
        out[k] = row
    return out


def _state(table: pa.Table, *, ordered_lists: bool = True) -> dict[Any, dict[str, Any]]:
    """Accumulators per key; lists sorted where their order is not part of the value."""
    out: dict[Any, dict[str, Any]] = {}
    for r in table.to_pylist():
        for s in SLOTS:
            if s.merge == "set" or (s.merge == "list" and not ordered_lists):
                r[s.column] = sorted(r[s.column])
        out[r["k"]] = r
    return out


def _m(*tables: pa.Table) -> pa.Table:
    return merge(tables, ["k"], SLOTS, bound=BOUND)


@given(st.lists(rows_st, min_size=1, max_size=5))
def test_merging_batch_partials_equals_aggregating_all_rows(batches: list[list[Row]]) -> None:
    state = partial(batches[0])
    for rows in batches[1:]:
        state = _m(state, partial(rows))
    every = [r for rows in batches for r in rows]
    want = {k: {c.name: _final(vs, c) for c in CALLS} for k, vs in _groups(every).items()}
    for row in want.values():
        row["collect_set"] = sorted(row["collect_set"])
    assert _result(state) == want


@given(rows_st, rows_st, rows_st)
def test_merge_is_associative(a: list[Row], b: list[Row], c: list[Row]) -> None:
    pa_, pb, pc_ = partial(a), partial(b), partial(c)
    assert _state(_m(_m(pa_, pb), pc_)) == _state(_m(pa_, _m(pb, pc_)))
    assert _state(_m(pa_, pb, pc_)) == _state(_m(_m(pa_, pb), pc_))


@given(rows_st, rows_st)
def test_merge_is_commutative_except_ordered_accumulators(a: list[Row], b: list[Row]) -> None:
    ab, ba = (
        _state(_m(partial(a), partial(b)), ordered_lists=False),
        _state(_m(partial(b), partial(a)), ordered_lists=False),
    )
    assert ab.keys() == ba.keys()
    ordered = {s.column for s in SLOTS if s.merge in ORDERED and s.merge != "list"}
    for k in ab:
        for s in SLOTS:
            if s.column not in ordered:
                assert ab[k][s.column] == ba[k][s.column], s


@given(rows_st)
def test_merge_of_one_partial_is_the_identity(a: list[Row]) -> None:
    p = partial(a)
    assert _state(_m(p)) == _state(p)
    assert _state(_m(p, p.slice(0, 0))) == _state(p)


def test_a_list_beyond_its_bound_names_the_group_and_the_aggregate() -> None:
    p = partial([("a", 1), ("a", 2), ("b", 3)])
    with pytest.raises(StreamscaleError, match=r"aggregate collect_list: group \('a',\) holds 4"):
        merge([p, p], ["k"], SLOTS, bound=3)


def test_any_of_marks_groups_changed_in_the_newest_table() -> None:
    old = partial([("a", 1), ("b", 2)]).append_column("new", pa.array([False, False]))
    new = partial([("b", 5)]).append_column("new", pa.array([True]))
    m = merge([old, new], ["k"], SLOTS, any_of=["new"])
    assert dict(zip(m.column("k").to_pylist(), m.column("new").to_pylist(), strict=True)) == {
        "a": False,
        "b": True,
    }


@given(rows_st)
def test_ipc_round_trip_and_split_by_shard(a: list[Row]) -> None:
    p = partial(a)
    assert from_ipc(to_ipc(p)).equals(p)
    shard = [abs(hash(k)) % 3 if k else 0 for k in p.column("k").to_pylist()]
    parts = split_by(p.append_column("g", pa.array(shard, pa.int64())), "g")
    assert sum(t.num_rows for t in parts.values()) == p.num_rows
    for g, t in parts.items():
        assert all(
            shard[p.column("k").to_pylist().index(k)] == g for k in t.column("k").to_pylist()
        )


@pytest.mark.parametrize(
    ("name", "kw", "match"),
    [
        ("stddev", {}, "aggregate 'stddev' is not supported"),
        ("sum", {"distinct": True}, r"sum\(DISTINCT ...\) is not supported"),
        ("count", {"args": 2}, "count of 2 columns"),
        ("collect_list", {}, "collect_list needs a bound"),
    ],
)
def test_unsupported_calls_are_refused_in_one_line(name: str, kw: dict, match: str) -> None:
    opts = {"distinct": False, "args": 1, "item": "agg x", **kw}
    with pytest.raises(StreamscaleError, match=match):
        canonical(name, **opts)


def test_spark_names_map_to_canonical_functions() -> None:
    kw = {"distinct": False, "args": 1, "item": "x", "max_collect": 5}
    assert canonical("mean", **kw) == "avg"
    assert canonical("first_value", **kw) == "first"
    assert canonical("array_agg", **kw) == "collect_list"
    assert canonical("count", **{**kw, "distinct": True}) == "count_distinct"
    assert {canonical(f, **kw) for f in FUNCTIONS if f != "count_distinct"} <= set(FUNCTIONS)
