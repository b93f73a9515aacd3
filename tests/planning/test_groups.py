"""The group job model and the IMC gain φ(X) (paper 001, §2)."""

from __future__ import annotations

import math

import pytest

from streamscale.errors import ModelError
from streamscale.model import Cluster, Edge, Node, Operator, Topology
from streamscale.planning.placement.groups import GroupJob, TaskAllocation, imc_gain


def job() -> GroupJob:
    return GroupJob.build(
        [("a", 2, 40.0), ("b", 4, 40.0)], [("a", "b", 16.0)], {"n1": 100.0, "n2": 50.0}
    )


def test_per_task_figures_follow_eq1() -> None:
    j = job()
    assert j.task_cost == (20.0, 10.0)
    assert j.link_imc == (2.0,)
    assert j.significance(0) == pytest.approx(16.0 / 80.0)
    assert j.units[1] == ("b#0", "b#1", "b#2", "b#3")
    assert j.total_tasks == 6 and j.total_cost == 80.0


def test_imc_gain_counts_collocated_links() -> None:
    j = job()
    # n1: 2 a + 2 b → 4 links; n2: 2 b → 0 links.
    assert imc_gain(j, [[2, 0], [2, 2]]) == pytest.approx(8.0)
    alloc = TaskAllocation.of(j, [[2, 0], [2, 2]], "hand")
    assert alloc.collocated_links == 4 and alloc.complete
    assert alloc.loads == (60.0, 20.0) and alloc.respects_capacities()
    assert alloc.node_counts() == {"a": {"n1": 2}, "b": {"n1": 2, "n2": 2}}
    part = TaskAllocation.of(j, [[1, 0], [0, 0]], "hand")
    assert part.unplaced == (1, 4) and not part.complete
    with pytest.raises(ModelError, match="b"):
        TaskAllocation.of(j, [[0, 0], [5, 0]], "hand")


@pytest.mark.parametrize(
    ("groups", "edges", "caps", "item"),
    [
        ([("a", 0, 1.0)], [], {"n1": 1.0}, "group a"),
        ([("a", 1, -1.0)], [], {"n1": 1.0}, "group a"),
        ([("a", 1, 1.0), ("a", 1, 1.0)], [], {"n1": 1.0}, "group a"),
        ([("a", 1, 1.0)], [("a", "z", 1.0)], {"n1": 1.0}, "edge a->z"),
        ([("a", 1, 1.0)], [("a", "a", 1.0)], {"n1": 1.0}, "edge a->a"),
        (
            [("a", 1, 1.0), ("b", 1, 1.0)],
            [("a", "b", 1.0), ("b", "a", 1.0)],
            {"n1": 1.0},
            "edge b->a",
        ),
        ([("a", 1, 1.0), ("b", 1, 1.0)], [("a", "b", math.nan)], {"n1": 1.0}, "edge a->b"),
        ([("a", 1, 1.0)], [], {}, "cluster"),
        ([("a", 1, 1.0)], [], {"n1": -1.0}, "node n1"),
    ],
)
def test_validation_names_the_item(groups: list, edges: list, caps: dict, item: str) -> None:
    with pytest.raises(ModelError, match=item):
        GroupJob.build(groups, edges, caps)


def topology() -> Topology:
    return Topology.build(
        "t",
        [
            Operator("s", kind="source", cost_ms=2.0, instances=2, tuple_bytes=1000),
            Operator("k", kind="sink", cost_ms=1.0, instances=3),
        ],
        [Edge("s", "k", selectivity=0.5)],
    )


def test_from_topology() -> None:
    cluster = Cluster.build([Node("w1", cores=2, reserved_cpu=50.0), Node("w2", cores=1)])
    j = GroupJob.from_topology(topology(), cluster, rate=100.0, tasks={"k": 5})
    assert [(g.name, g.tasks, g.cost) for g in j.groups] == [("s", 2, 20.0), ("k", 5, 5.0)]
    assert j.edges[0].imc == pytest.approx(0.05)
    assert j.capacities == (150.0, 100.0)
    half = GroupJob.from_topology(topology(), cluster, rate=100.0, utilization=0.5)
    assert half.capacities == (75.0, 50.0)
    bal = GroupJob.from_topology(topology(), cluster, rate=100.0, alpha=1.2)
    assert bal.capacities == pytest.approx((15.0, 15.0))
    with pytest.raises(ModelError, match="utilization"):
        GroupJob.from_topology(topology(), cluster, rate=100.0, utilization=0.0)


def test_scaled_and_renamed() -> None:
    j = job()
    s = j.scaled(0.5)
    assert s.groups[0].cost == 20.0 and s.edges[0].imc == 8.0
    r = j.renamed({"a": "x", "b": "y"}, {"n1": "m1", "n2": "m2"})
    assert [g.name for g in r.groups] == ["x", "y"] and r.nodes == ("m1", "m2")
    assert r.link_imc == j.link_imc
