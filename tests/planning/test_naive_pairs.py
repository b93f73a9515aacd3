"""The naive fusion-style allocator (paper 001, §3.1)."""

from __future__ import annotations

import pytest

from streamscale.planning.placement.groups import GroupJob
from streamscale.planning.placement.naive_pairs import naive_pairs
from tests.planning.test_top_down import example2


def test_example2_is_complete_and_valid() -> None:
    res = naive_pairs(example2())
    assert res.complete and res.respects_capacities()
    assert res.algorithm == "naive"


def test_highest_task_link_imc_first_fills_the_current_node() -> None:
    # ⟨c,d⟩ has the highest task-link IMC and takes the biggest node first.
    job = GroupJob.build(
        [("a", 2, 40.0), ("b", 2, 40.0), ("c", 1, 30.0), ("d", 1, 30.0)],
        [("a", "b", 40.0), ("c", "d", 20.0)],
        {"n1": 60.0, "n2": 100.0},
    )
    res = naive_pairs(job)
    assert res.complete and res.respects_capacities()
    assert res.node_counts()["c"] == {"n2": 1}
    assert res.node_counts()["d"] == {"n2": 1}
    assert res.gain == pytest.approx(20.0 + 40.0 / 4 * 2)


def test_broken_pairs_are_placed_last() -> None:
    job = GroupJob.build(
        [("a", 1, 60.0), ("b", 1, 60.0)], [("a", "b", 5.0)], {"n1": 100.0, "n2": 100.0}
    )
    res = naive_pairs(job)
    assert res.complete and res.respects_capacities()
    assert res.gain == 0.0


def test_without_the_refinement_the_partner_goes_to_the_current_node() -> None:
    # Task pairs by link IMC: (a0, b0) 50, (c0, d0) 40, (a0, e0) 30; n1, n2 100 % each.
    # (a0, b0) → n1 (80 %); (c0, d0) needs 60 %, so n2 becomes the current node (60 %).
    job = GroupJob.build(
        [("a", 1, 40.0), ("b", 1, 40.0), ("c", 1, 30.0), ("d", 1, 30.0), ("e", 1, 20.0)],
        [("a", "b", 50.0), ("c", "d", 40.0), ("a", "e", 30.0)],
        {"n1": 100.0, "n2": 100.0},
    )
    # §3.1's refinement: e0 joins a0 on n1 (100 %): gain 50 + 40 + 30.
    refined = naive_pairs(job)
    assert refined.node_counts()["e"] == {"n1": 1}
    assert refined.gain == pytest.approx(120.0)
    # As first stated: a0 is ignored and e0 is pushed onto the current node n2.
    literal = naive_pairs(job, refine=False)
    assert literal.node_counts()["e"] == {"n2": 1}
    assert literal.gain == pytest.approx(90.0)
    assert literal.complete and literal.respects_capacities()
