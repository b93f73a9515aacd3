from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.planning.balancing.rc import place_units, rc_rebalance


def test_place_units_keeps_and_fills() -> None:
    order = ["a", "b", "c"]
    out = place_units(
        {"x": {0: "a", 1: "b", 5: "b"}}, {"x": 3}, {"a": 1, "b": 4, "c": 2}, order=order
    )
    assert out == {"x": {0: "a", 1: "b", 2: "b"}}
    # nothing free: oversubscribe the least-subscribed node
    out = place_units({}, {"x": 2}, {"a": 0, "b": 0}, order=["a", "b"])
    assert sorted(out["x"].values()) == ["a", "b"]
    # y shrinks and x grows into the core y releases on b
    cur = {"x": {0: "a"}, "y": {0: "b", 1: "b"}}
    out = place_units(cur, {"x": 2, "y": 1}, {"a": 1, "b": 2}, order=["a", "b"])
    assert out == {"x": {0: "a", 1: "b"}, "y": {0: "b"}}


def test_rc_counts_only_cross_node_migration() -> None:
    # 4 equal shards on unit 0 (node a); 2 units, unit 1 on node b -> 2 shards move to b
    r = rc_rebalance(
        [1.0] * 4,
        [0, 0, 0, 0],
        2,
        old_nodes=["a"] * 4,
        unit_nodes={0: "a", 1: "b"},
        shard_bytes=[10, 20, 30, 40],
        theta=1.0,
    )
    assert len(r.moves) == 2 and r.remote_moves == 2 and r.delta_after == 1.0
    assert r.migrated_bytes == sum(10 * (s + 1) for s, _, _ in r.moves)
    # the same with unit 1 on node a: intra-node moves cost nothing
    r2 = rc_rebalance(
        [1.0] * 4,
        [0, 0, 0, 0],
        2,
        old_nodes=["a"] * 4,
        unit_nodes={0: "a", 1: "a"},
        shard_bytes=[10, 20, 30, 40],
        theta=1.0,
    )
    assert r2.migrated_bytes == 0 and r2.remote_moves == 0


def test_errors() -> None:
    with pytest.raises(ModelError):
        rc_rebalance([1.0], [0], 2, old_nodes=["a"], unit_nodes={0: "a"}, shard_bytes=[1])


@given(
    n=st.integers(1, 80),
    k_old=st.integers(1, 6),
    k_new=st.integers(1, 6),
    seed=st.integers(0, 100),
)
def test_conformance(n: int, k_old: int, k_new: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    loads = rng.zipf(1.5, n).astype(float)
    cur = [int(t) for t in rng.integers(0, k_old, n)]
    old_unit_nodes = {t: f"n{t % 3}" for t in range(k_old)}
    units = place_units(
        {"x": old_unit_nodes}, {"x": k_new}, {"n0": 2, "n1": 2, "n2": 2}, order=["n0", "n1", "n2"]
    )["x"]
    sizes = rng.integers(0, 1000, n)
    r = rc_rebalance(
        loads,
        cur,
        k_new,
        old_nodes=[old_unit_nodes[t] for t in cur],
        unit_nodes=units,
        shard_bytes=sizes,
    )
    assert all(0 <= t < k_new for t in r.tasks)
    assert r.delta_after <= r.delta_before + 1e-9
    assert r.remote_moves <= len(r.moves)
    want = sum(int(sizes[s]) for s, _, t in r.moves if old_unit_nodes[cur[s]] != units[t])
    assert r.migrated_bytes == want
