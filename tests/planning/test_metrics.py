"""Metrics of a key-group allocation (paper 003, §4.3.1, §5)."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import (
    collocation_factor,
    evaluate,
    load_distance,
    load_distance_pct,
    load_index,
)


def test_load_distance_counts_removed_nodes_only_above_the_mean() -> None:
    # keep x, y; z marked: L̄ = 6 / 2 = 3; x 1 (−2), y 4 (+1), z 1 (−2 but no lower bound).
    p = KeyGroupProblem.build(
        ["a", "b", "c"], ["x", "y", "z"], [1, 4, 1], [0, 1, 2], removing=["z"]
    )
    assert load_distance(p) == pytest.approx(2.0)
    assert load_distance_pct(p) == pytest.approx(200 / 3)
    # a→y, b→x, c→y: x 4 (+1), y 2 (−1), z empty → 1
    assert load_distance(p, np.array([1, 0, 1])) == pytest.approx(1.0)
    # z above the mean counts: everything on z → z +3
    assert load_distance(p, np.array([2, 2, 2])) == pytest.approx(3.0)
    assert load_distance(p, np.array([1, 0, 1]), keep_only=True) == pytest.approx(1.0)


def test_collocation_factor_and_load_index() -> None:
    p = KeyGroupProblem.build(
        ["a", "b", "c"], ["x", "y"], [1, 1, 1], [0, 0, 1], traffic=[(0, 1, 30.0), (0, 2, 10.0)]
    )
    assert collocation_factor(p) == pytest.approx(75.0)
    m = evaluate(p, np.array([0, 1, 1]))
    assert m.collocation_pct == pytest.approx(0.0) and m.migrations == 1
    assert load_index(5.0, 10.0) == 0.5
