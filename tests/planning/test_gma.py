"""GMA (paper 002, Algorithm 1): hand cases, budget, brute-force completeness, invariances."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
    Flow,
    evaluate,
)
from streamscale.planning.placement.gma import gma


def small() -> AllocatorProblem:
    return AllocatorProblem(
        nodes=(
            AllocatorNode("a", 100, 50, 100, 10),
            AllocatorNode("b", 100, 10, 100, 60),
            AllocatorNode("c", 100, 85, 100, 0),
        ),
        operators=(
            AllocatorOperator("x", 30),
            AllocatorOperator("y", 30),
            AllocatorOperator("z", 20),
        ),
        flows=(Flow("x", "y", 20), Flow("y", "z", 10)),
    )


def packing() -> AllocatorProblem:
    """Greedy balancing puts 50 and 50 apart and then cannot fit 34 + 33 + 33."""
    sizes = (50, 50, 34, 33, 33)
    return AllocatorProblem(
        nodes=(AllocatorNode("A", 100), AllocatorNode("B", 100)),
        operators=tuple(AllocatorOperator(f"o{k}", s) for k, s in enumerate(sizes)),
        d_cpu=1.0,
    )


def test_hand_case() -> None:
    # Order by demand: y (.3 + .3), x (.3 + .2), z. c is heavy and too full for any.
    # y: a and b both moderate; b balances CPU better. x: b again (collocation adds
    # no traffic). z: a gives CPU (.7,.7,.85) and links (.2,.7,0), deviation .63
    # against .76 on b.
    res = gma(small())
    assert res.assignment == {"x": "b", "y": "b", "z": "a"}
    assert res.feasible and not res.best_effort and not res.exhausted
    # one greedy descent: 3 operators x 3 nodes, plus the lookahead after each
    # placement (1 for the CPU bound + 1 per operator still to place): 3 + 2 + 1
    assert res.operations == 9 + 6


def test_literal_algorithm_is_one_greedy_descent() -> None:
    assert gma(small(), search=False).assignment == gma(small()).assignment
    literal = gma(packing(), search=False)
    # 5 operators x 2 nodes, and the best effort tries the stuck one once more
    assert not literal.feasible and literal.operations == 5 * 2 + 2
    assert literal.best_effort  # the operators on the overloaded node


def test_backtracks_when_greedy_gets_stuck() -> None:
    res = gma(packing())
    assert res.feasible
    assert res.operations > 5 * 2  # more than the plain greedy descent
    placed = {n: sorted(o for o, m in res.assignment.items() if m == n) for n in "AB"}
    assert sorted(map(tuple, placed.values())) == [("o0", "o1"), ("o2", "o3", "o4")]


def test_budget_exhausted_falls_back_to_best_effort() -> None:
    res = gma(packing(), max_operations=4)
    assert res.exhausted and not res.feasible
    assert set(res.assignment) == {f"o{k}" for k in range(5)}
    assert res.best_effort  # the rest was spread over the lightest nodes


def test_repair_fixes_the_best_effort_when_search_is_cut_short() -> None:
    # 40 evaluations: both greedy passes stop early (2 and 4); the best effort
    # overloads B (50 + 33 + 33), and one swap (34 <-> 50) repairs it.
    res = gma(packing(), max_operations=40)
    assert res.feasible and not res.exhausted and not res.best_effort
    assert res.operations <= 40


def test_connected_pass_collocates_a_heavy_flow() -> None:
    # Balancing CPU would put x and y on different nodes, but their 60 Mbit/s
    # flow fits no link (room 50): only collocation is feasible.
    p = AllocatorProblem(
        nodes=(
            AllocatorNode("a", 100, bandwidth_mbps=100, reserved_bandwidth_mbps=40),
            AllocatorNode("b", 100, bandwidth_mbps=100, reserved_bandwidth_mbps=40),
        ),
        operators=(AllocatorOperator("x", 30), AllocatorOperator("y", 30)),
        flows=(Flow("x", "y", 60),),
    )
    res = gma(p)
    assert res.feasible and len(set(res.assignment.values())) == 1


def test_time_budget_with_injected_clock() -> None:
    ticks = itertools.count()
    res = gma(packing(), time_budget_s=3, clock=lambda: float(next(ticks)))
    assert res.exhausted and len(res.assignment) == 5
    with pytest.raises(ModelError):
        gma(packing(), time_budget_s=1.0)


def test_proven_infeasible_still_places_everything() -> None:
    p = AllocatorProblem(
        nodes=(AllocatorNode("a", 100), AllocatorNode("b", 100)),
        operators=tuple(AllocatorOperator(f"o{k}", 60) for k in range(4)),
    )
    res = gma(p)
    assert res.proven_infeasible and not res.feasible and not res.exhausted
    assert len(res.assignment) == 4 and res.best_effort


def test_utilization_objective_spreads_traffic() -> None:
    p = AllocatorProblem(
        nodes=(AllocatorNode("a", 100), AllocatorNode("b", 100)),
        operators=(AllocatorOperator("x", 10), AllocatorOperator("y", 10)),
        flows=(Flow("x", "y", 10),),
    )
    assert len(set(gma(p, objective="utilization").assignment.values())) == 2
    # balancing both resources: CPU deviation 0 apart, but links then carry 10 Mbit/s each
    assert gma(p).feasible
    with pytest.raises(ModelError):
        gma(p, objective="speed")  # type: ignore[arg-type]


# -- tiny random instances against brute force --------------------------------


@st.composite
def tiny(draw: st.DrawFn) -> AllocatorProblem:
    n = draw(st.integers(2, 3))
    m = draw(st.integers(1, 5))
    nodes = tuple(
        AllocatorNode(
            f"n{i}",
            draw(st.sampled_from([100.0, 200.0, 400.0])),
            reserved_cpu=draw(st.floats(0, 150)),
            bandwidth_mbps=100.0,
            reserved_bandwidth_mbps=draw(st.floats(0, 80)),
        )
        for i in range(n)
    )
    ops = tuple(AllocatorOperator(f"o{k}", draw(st.floats(0, 150))) for k in range(m))
    pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=4)) if pairs else []
    flows = tuple(Flow(f"o{a}", f"o{b}", draw(st.floats(0, 40))) for a, b in chosen)
    return AllocatorProblem(nodes, ops, flows, d_cpu=draw(st.sampled_from([0.8, 0.9, 1.0])))


def brute_force_feasible(p: AllocatorProblem) -> bool:
    names = p.node_names
    for combo in itertools.product(names, repeat=len(p.operators)):
        if evaluate(p, dict(zip([o.name for o in p.operators], combo, strict=True))).feasible:
            return True
    return False


@given(tiny())
def test_gma_feasible_whenever_brute_force_is(p: AllocatorProblem) -> None:
    res = gma(p)
    assert len(res.assignment) == len(p.operators)
    assert res.feasible == brute_force_feasible(p)
    assert res.proven_infeasible == (not res.feasible)


@given(tiny())
def test_deterministic_and_relabeling_invariant(p: AllocatorProblem) -> None:
    res = gma(p)
    assert gma(p).assignment == res.assignment
    node_map = {n.name: f"host-{9 - i}" for i, n in enumerate(p.nodes)}
    op_map = {o.name: f"q{len(p.operators) - k}" for k, o in enumerate(p.operators)}
    relabeled = AllocatorProblem(
        tuple(
            AllocatorNode(
                node_map[n.name],
                n.cpu_capacity,
                n.reserved_cpu,
                n.bandwidth_mbps,
                n.reserved_bandwidth_mbps,
            )
            for n in p.nodes
        ),
        tuple(AllocatorOperator(op_map[o.name], o.cpu) for o in p.operators),
        tuple(Flow(op_map[f.src], op_map[f.dst], f.mbps) for f in p.flows),
        d_cpu=p.d_cpu,
        d_bw=p.d_bw,
    )
    got = gma(relabeled).assignment
    assert got == {op_map[o]: node_map[n] for o, n in res.assignment.items()}
