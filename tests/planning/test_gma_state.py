"""GMA search state (paper 002, §IV.E): incremental usage, candidate ranking, overload."""

from __future__ import annotations

import pytest

from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
    Flow,
    evaluate,
)
from streamscale.planning.placement.gma_state import SearchState


def state(problem: AllocatorProblem) -> SearchState:
    return SearchState(problem, "deviation", 1000, None, None, (0.4, 0.8))


def problem() -> AllocatorProblem:
    return AllocatorProblem(
        nodes=(
            AllocatorNode("a", 100, reserved_cpu=70, bandwidth_mbps=100),
            AllocatorNode("b", 100, reserved_cpu=10, bandwidth_mbps=100),
            AllocatorNode("c", 100, reserved_cpu=10, bandwidth_mbps=100),
        ),
        operators=(AllocatorOperator("x", 20), AllocatorOperator("y", 20)),
        flows=(Flow("x", "y", 30),),
    )


def test_place_and_unplace_track_usage_like_evaluate() -> None:
    p = problem()
    s = state(p)
    s._place(0, 0)
    s._place(1, 1)
    ev = evaluate(p, {"x": "a", "y": "b"})
    assert [c / 100 for c in s.cpu] == pytest.approx(ev.node_cpu_load)
    assert [b / 100 for b in s.bw] == pytest.approx(ev.node_bw_load)
    s._unplace(1)
    assert s.bw == pytest.approx([0.0, 0.0, 0.0]) and s.cpu == pytest.approx([90.0, 10.0, 10.0])


def test_candidates_lighter_level_first_then_objective() -> None:
    s = state(problem())
    # a is moderate (70 %): b and c are light and tie on the objective -> b, then c;
    # c is skipped as interchangeable with b (same figures, hosting nothing).
    assert s._candidates(0) == [1, 0]
    s._place(0, 1)
    # b (30 %) and c are light, a moderate. y on b: CPU (.7,.5,.1), no traffic,
    # deviation .432; on c: CPU (.7,.3,.3) .327 but links (0,.3,.3) .245 -> .572.
    assert s._candidates(1) == [1, 2, 0]
    assert s.ops == 6


def test_overload_counts_only_where_the_query_adds_load() -> None:
    p = AllocatorProblem(
        nodes=(AllocatorNode("hot", 100, reserved_cpu=95), AllocatorNode("b", 100)),
        operators=(AllocatorOperator("x", 10),),
    )
    s = state(p)
    assert s._violation(range(2)) == 0.0  # hot is over D_CPU, but not through the query
    s._place(0, 0)
    assert s._violation(range(2)) == pytest.approx((105 - 90) / 100, abs=1e-6)
    assert s._try([(0, 1)]) == pytest.approx(-(105 - 90) / 100, abs=1e-6)
    assert s.where == [0]  # a trial leaves the state unchanged
