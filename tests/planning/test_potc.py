"""PoTC baseline (paper 003, §2, §5.2): split keys and the merge overhead."""

from __future__ import annotations

import pytest

from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.potc import potc, potc_loads


def test_split_balances_without_migration_but_merge_costs_load() -> None:
    p = KeyGroupProblem.build(["a", "b"], ["x", "y"], [2.0, 0.0], [0, 0])
    loads, second = potc_loads(p, merge_factor=0.0, seed=0)
    assert second[0] == 1
    assert loads.tolist() == pytest.approx([1.0, 1.0])  # the hot key splits evenly
    with_merge, _ = potc_loads(p, merge_factor=0.5, seed=0)
    assert with_merge.tolist() == pytest.approx([1.5, 1.0])  # the merge runs on the primary
    res = potc(p, merge_factor=0.5, seed=0)
    assert res.assignment.tolist() == [0, 0]
    assert res.extra["merge_overhead"] == pytest.approx(0.5)
    assert res.extra["load_distance_pct"] == pytest.approx(100 * 0.25 / 1.25)


def test_merge_cost_by_hand_for_two_key_groups() -> None:
    # k0 (10, on n0) splits 5/5 first; k1 (4, on n1) then fills both nodes to one level
    # 7 + 2.5 f, sending 2 - 2.5 f to n0; each primary pays f × what its secondary served.
    p = KeyGroupProblem.build(["n0", "n1"], ["k0", "k1"], [10.0, 4.0], [0, 1])
    for f in (0.0, 0.1, 0.5):
        loads, _ = potc_loads(p, merge_factor=f, seed=0)
        on_b = 2.0 - 2.5 * f
        assert loads.tolist() == pytest.approx([5 + 5 * f + on_b, 5 + (4 - on_b) + f * on_b])
        assert potc(p, merge_factor=f, seed=0).extra["merge_overhead"] == pytest.approx(
            f * (5 + on_b)
        )
