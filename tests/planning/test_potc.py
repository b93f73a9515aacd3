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
