"""Elastic Allocator model (paper 002): loads, feasibility, objectives, clustering, baselines."""

from __future__ import annotations

import math

import pytest

from streamscale.errors import ModelError
from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
    Flow,
    deviation,
    evaluate,
    even_placement,
    level_of,
    node_levels,
    random_placement,
)


def two_nodes(d_cpu: float = 0.9, d_bw: float = 0.9) -> AllocatorProblem:
    return AllocatorProblem(
        nodes=(
            AllocatorNode(
                "a", 400, reserved_cpu=100, bandwidth_mbps=100, reserved_bandwidth_mbps=20
            ),
            AllocatorNode("b", 200, reserved_cpu=20, bandwidth_mbps=100),
        ),
        operators=(AllocatorOperator("x", 100), AllocatorOperator("y", 60)),
        flows=(Flow("x", "y", 30),),
        d_cpu=d_cpu,
        d_bw=d_bw,
    )


def test_level_thresholds() -> None:
    assert [level_of(v) for v in (0.0, 0.399, 0.4, 0.799, 0.8, 1.5)] == [0, 0, 1, 1, 2, 2]
    assert level_of(0.5, (0.6, 0.9)) == 0


def test_levels_take_the_more_used_resource() -> None:
    p = two_nodes()
    # a: cpu 100/400 = .25, bw 20/100 = .2 -> light; b: cpu 20/200 = .1 -> light
    assert node_levels(p) == {"a": "light", "b": "light"}
    # x and y apart: b cpu .4, both links +30 Mbit/s -> a bw .5 (moderate), b max(.4,.3)
    assert node_levels(p, {"x": "a", "y": "b"}) == {"a": "moderate", "b": "moderate"}
    assert node_levels(p, {"x": "b", "y": "b"}) == {"a": "light", "b": "heavy"}


def test_evaluate_collocated_and_split_by_hand() -> None:
    p = two_nodes()
    together = evaluate(p, {"x": "a", "y": "a"})
    assert together.node_cpu_load == pytest.approx((260 / 400, 20 / 200))
    assert together.node_bw_load == pytest.approx((0.2, 0.0))  # traffic inside a node is free
    assert together.feasible and together.throughput == 1.0
    assert together.cpu_utilization == pytest.approx(280 / 600)
    # the query's 30 Mbit/s at λ = 1 over 200 Mbit/s of links, wherever the flow runs
    assert together.bw_utilization == pytest.approx(30 / 200)
    assert together.link_utilization == pytest.approx(20 / 200)  # other work only
    assert together.cpu_deviation == pytest.approx(math.sqrt(2) * (0.65 - 0.1) / 2)
    apart = evaluate(p, {"x": "a", "y": "b"})
    # star network: the flow loads both endpoints' links
    assert apart.node_bw_load == pytest.approx((0.5, 0.3))
    assert apart.node_cpu_load == pytest.approx((0.5, 0.4))
    assert apart.bw_utilization == pytest.approx(30 / 200)  # collocation changes nothing
    assert apart.link_utilization == pytest.approx(80 / 200)  # 20 + 30 on a, 30 on b


def test_feasibility_boundaries_and_throughput() -> None:
    p = two_nodes(d_cpu=0.9)
    # b: 20 + 100 + 60 = 180 of 200 = exactly D_CPU -> feasible
    assert evaluate(p, {"x": "b", "y": "b"}).feasible
    tight = two_nodes(d_cpu=0.89)
    assert not evaluate(tight, {"x": "b", "y": "b"}).feasible
    over = AllocatorProblem(
        nodes=(AllocatorNode("a", 100, reserved_cpu=50), AllocatorNode("b", 100)),
        operators=(AllocatorOperator("x", 100),),
    )
    ev = evaluate(over, {"x": "a"})
    # 150 % wanted of a 100 % core: shared in proportion, the query gets 2/3 of its need
    assert not ev.feasible and ev.throughput == pytest.approx(2 / 3)
    assert ev.cpu_utilization == pytest.approx(100 / 200)
    assert ev.node_cpu_load == pytest.approx((1.5, 0.0))
    two = AllocatorProblem(over.nodes, (AllocatorOperator("x", 100), AllocatorOperator("y", 50)))
    ev2 = evaluate(two, {"x": "a", "y": "b"})
    # back-pressure: y on the idle node b runs at the same 2/3 as x
    assert ev2.throughput == pytest.approx(2 / 3)
    assert ev2.cpu_utilization == pytest.approx((100 + 50 * 2 / 3) / 200)
    assert ev2.cpu_deviation == pytest.approx(math.sqrt(2) * (1 - 1 / 3) / 2)
    flow = AllocatorProblem(two.nodes, two.operators, (Flow("x", "y", 60),))
    # at the achieved throughput: 2/3 of the 60 Mbit/s flow over 2 × 1000 Mbit/s of links
    assert evaluate(flow, {"x": "a", "y": "b"}).bw_utilization == pytest.approx(40 / 2000)
    bw = AllocatorProblem(
        nodes=(AllocatorNode("a", 100, bandwidth_mbps=100), AllocatorNode("b", 100)),
        operators=(AllocatorOperator("x", 1), AllocatorOperator("y", 1)),
        flows=(Flow("x", "y", 90),),
        d_bw=0.8,
    )
    assert not evaluate(bw, {"x": "a", "y": "b"}).feasible
    assert evaluate(bw, {"x": "a", "y": "a"}).feasible


def test_deviation_formula() -> None:
    assert deviation([0.5, 0.5, 0.5]) == 0.0
    assert deviation([0.0, 1.0]) == pytest.approx(math.sqrt(0.5))
    assert deviation([]) == 0.0


def test_problem_validation_names_the_item() -> None:
    with pytest.raises(ModelError, match="flow x->z"):
        AllocatorProblem(
            nodes=(AllocatorNode("a", 100),),
            operators=(AllocatorOperator("x", 1),),
            flows=(Flow("x", "z", 1),),
        )
    with pytest.raises(ModelError, match="operator x"):
        AllocatorProblem(nodes=(AllocatorNode("a", 100),), operators=(AllocatorOperator("x", -1),))
    with pytest.raises(ModelError, match="cluster"):
        AllocatorProblem(nodes=(), operators=())
    with pytest.raises(ModelError, match="unknown node"):
        evaluate(two_nodes(), {"x": "zz"})


def test_even_interleaves_slots_like_storm() -> None:
    p = AllocatorProblem(
        nodes=(
            AllocatorNode("a", 100, slots=2),
            AllocatorNode("b", 100, slots=3),
            AllocatorNode("c", 100, slots=1),
        ),
        operators=tuple(AllocatorOperator(f"o{k}", 1) for k in range(7)),
    )
    got = [even_placement(p).assignment[f"o{k}"] for k in range(7)]
    assert got == ["b", "a", "c", "b", "a", "b", "b"]
    got2 = [even_placement(p, workers=2).assignment[f"o{k}"] for k in range(5)]
    assert got2 == ["b", "a", "b", "a", "b"]
    with pytest.raises(ModelError):
        even_placement(p, workers=0)


def test_even_is_blind_to_load() -> None:
    p = AllocatorProblem(
        nodes=(AllocatorNode("hot", 100, reserved_cpu=95), AllocatorNode("cold", 100)),
        operators=(AllocatorOperator("x", 30), AllocatorOperator("y", 30)),
    )
    res = even_placement(p)
    assert res.assignment == {"x": "hot", "y": "cold"}
    assert not res.feasible


def test_random_is_seeded() -> None:
    p = AllocatorProblem(
        nodes=tuple(AllocatorNode(f"n{i}", 100) for i in range(5)),
        operators=tuple(AllocatorOperator(f"o{k}", 1) for k in range(12)),
    )
    a, b = random_placement(p, seed=7), random_placement(p, seed=7)
    assert a.assignment == b.assignment
    assert set(a.assignment) == {o.name for o in p.operators}
    draws = {tuple(random_placement(p, seed=s).assignment.values()) for s in range(5)}
    assert len(draws) > 1
