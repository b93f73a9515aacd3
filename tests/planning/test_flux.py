"""Flux baseline (paper 003, §5): largest suitable move between paired nodes."""

from __future__ import annotations

import pytest

from streamscale.planning.balancing.flux import flux
from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import load_distance, migrations


def test_moves_largest_suitable_group_from_most_to_least_loaded() -> None:
    # A=[4,3,1] (8), B=[2] (2): mean 5. Suitable: moving 4 gives |4-5|,|6-5| -> 1 < 3;
    # moving 3 gives 0 and 0; the largest suitable is 4 (Flux takes the largest, not the best).
    p = KeyGroupProblem.build(["a", "b", "c", "d"], ["A", "B"], [4, 3, 1, 2], [0, 0, 0, 1])
    res = flux(p, max_migrations=1)
    assert res.assignment.tolist() == [1, 0, 0, 1]
    assert load_distance(p, res.assignment) == pytest.approx(1.0)


def test_respects_migration_limit_and_stops_when_nothing_suits() -> None:
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(6)], ["A", "B", "C"], [3, 3, 3, 3, 1, 1], [0, 0, 0, 0, 1, 2]
    )
    for budget in (0, 1, 2):
        assert migrations(p, flux(p, max_migrations=budget).assignment) <= budget
    # Unlimited: it stops once no move lowers the pair's worst deviation.
    res = flux(p)
    assert load_distance(p, res.assignment) < load_distance(p)


def test_drains_nodes_marked_for_removal() -> None:
    p = KeyGroupProblem.build(
        ["a", "b", "c"], ["A", "B", "C"], [1, 1, 1], [0, 1, 2], removing=["C"]
    )
    res = flux(p)
    assert res.assignment[2] != 2
