"""Sketch accumulators (``approx_count_distinct``, ``percentile_approx``): merged batch
partials against the exact answer over all rows, associative and commutative.

No Spark: each batch's partial sketch per group is built here with the same library
Spark's ``hll_sketch_agg`` / ``kll_sketch_agg_double`` write (Apache DataSketches), then
merged with :func:`merge` and finished with :func:`finish`. Small groups: every
answer is exact (HLL's coupon mode, KLL below ``k`` values), so the reference is the
exact count of distinct values and numpy's inverted-CDF quantile; a large group is
checked against the sketches' error bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.keyed.agg.accumulators import AggCall, finish, slots_of
from streamscale.runtime.spark.keyed.agg.kernels import merge
from streamscale.runtime.spark.keyed.agg.sketches import hll_lg_k, kll_k

PS = (0.0, 0.1, 0.5, 0.9, 1.0)
LG_K = hll_lg_k(0.01)  # exact below 400 distinct values (coupon mode)
K = kll_k(200)
CALLS = (
    AggCall("approx_count_distinct", "acd", 0, options=(float(LG_K),)),
    AggCall("percentile_approx", "p50", 1, options=(float(K), 0.0, 0.5)),
    AggCall("percentile_approx", "ps", 2, options=(float(K), 1.0, *PS)),
)
SLOTS = tuple(s for c in CALLS for s in slots_of(c))

Row = tuple[str, float | None]
rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(-50, 50))),
    max_size=30,
)


def _hll(values: Sequence[float]) -> bytes:
    sk = ds.hll_sketch(LG_K)
    for v in values:
        sk.update(v)
    return bytes(sk.serialize_compact())


def _kll(values: Sequence[float]) -> bytes:
    sk = ds.kll_doubles_sketch(K)
    for v in values:
        sk.update(float(v))
    return bytes(sk.serialize())


def partial(rows: Sequence[Row]) -> pa.Table:
    """A batch's partial sketches per group (what Spark's partial aggregation writes)."""
    groups: dict[str, list[float]] = {}
    for k, v in rows:
        groups.setdefault(k, [])
        if v is not None:
            groups[k].append(v)
    cols: dict[str, Any] = {"k": pa.array(list(groups), pa.string())}
    for s in SLOTS:
        if s.merge == "hll":
            cols[s.column] = pa.array([_hll(vs) for vs in groups.values()], pa.binary())
        elif s.merge == "kll":
            cols[s.column] = pa.array([_kll(vs) for vs in groups.values()], pa.binary())
        else:  # the NaNs beside a KLL sketch
            nans = [sum(1 for v in vs if v != v) for vs in groups.values()]
            cols[s.column] = pa.array(nans, pa.int64())
    return pa.table(cols)


def _quantile(values: Sequence[int], p: float) -> float:
    """Spark's definition: the smallest value whose share of values at or below it
    reaches ``p``."""
    return float(np.quantile(np.array(values, dtype=float), p, method="inverted_cdf"))


def _m(*tables: pa.Table) -> pa.Table:
    return merge(tables, ["k"], SLOTS)


def _result(table: pa.Table) -> dict[str, dict[str, Any]]:
    fin = finish(table, CALLS)
    keys = table.column("k").to_pylist()
    return {k: {n: a[i].as_py() for n, a in fin.items()} for i, k in enumerate(keys)}


@given(st.lists(rows_st, min_size=1, max_size=4))
def test_merged_sketches_equal_the_exact_answer_on_small_groups(batches: list[list[Row]]) -> None:
    state = partial(batches[0])
    for rows in batches[1:]:
        state = _m(state, partial(rows))
    every: dict[str, list[int]] = {}
    for k, v in (r for rows in batches for r in rows):
        every.setdefault(k, [])
        if v is not None:
            every[k].append(v)
    got = _result(state)
    assert set(got) == set(every)
    for k, vs in every.items():
        assert got[k]["acd"] == len(set(vs))
        if not vs:
            assert got[k]["p50"] is None and got[k]["ps"] is None
            continue
        assert got[k]["p50"] == _quantile(vs, 0.5)
        assert got[k]["ps"] == [_quantile(vs, p) for p in PS]


@given(rows_st, rows_st, rows_st)
def test_sketch_merge_is_associative_and_commutative(
    a: list[Row], b: list[Row], c: list[Row]
) -> None:
    pa_, pb, pc_ = partial(a), partial(b), partial(c)
    left = _result(_m(_m(pa_, pb), pc_))
    assert left == _result(_m(pa_, _m(pb, pc_))) == _result(_m(pa_, pb, pc_))
    assert left == _result(_m(pc_, pb, pa_))


def test_a_large_group_stays_within_the_sketches_error_bounds() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(0, 200_000, 120_000)
    parts = np.array_split(values, 6)
    state = _m(*(partial([("a", int(v)) for v in part]) for part in parts))
    got = _result(state)["a"]
    exact = len(np.unique(values))
    assert got["acd"] == pytest.approx(exact, rel=3 * 1.04 / np.sqrt(2**LG_K))
    # the quantile's rank among the values is p within KLL's normalized rank error
    # (k = kll_k(200): 1/200 at 99 %; twice that as the test's bound)
    srt = np.sort(values)
    for p, q in zip(PS, got["ps"], strict=True):
        rank = np.searchsorted(srt, q, side="right") / len(srt)
        assert abs(rank - p) <= 2 / 200, (p, q, rank)


def test_nans_sort_after_every_number_as_in_spark() -> None:
    # Spark 4.3: percentile_approx over (1.0, 2.0, NaN) is 2.0 at 0.5 and NaN at 0.9
    nan = float("nan")
    got = _result(partial([("a", 1.0), ("a", nan), ("a", 2.0)]))["a"]
    assert got["p50"] == 2.0
    assert got["ps"][:3] == [1.0, 1.0, 2.0] and all(x != x for x in got["ps"][3:])
    only = _result(_m(partial([("b", nan)]), partial([("b", nan)])))["b"]
    assert all(x != x for x in only["ps"])
