"""Placers gma, random and even through the registry (paper 002 over the domain model)."""

from __future__ import annotations

import pytest

from streamscale.errors import InfeasibleError
from streamscale.model import (
    Allocation,
    Cluster,
    Edge,
    Node,
    NodeStats,
    Operator,
    OperatorStats,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning import PlanningContext, compose, get
from streamscale.planning.adapters.elastic_allocator import build_problem


def topology() -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source", cost_ms=0.5, tuple_bytes=1000),
            Operator("work", cost_ms=2.0, instances=2, tuple_bytes=500),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "work"), Edge("work", "out", grouping="global")],
    )


def cluster(reserved: tuple[float, ...] = (0.0, 0.0, 0.0)) -> Cluster:
    return Cluster.build(
        Node(f"n{i}", cores=2, bandwidth_mbps=100, reserved_cpu=r) for i, r in enumerate(reserved)
    )


def test_problem_from_topology_by_hand() -> None:
    ctx = PlanningContext(topology(), cluster((50.0, 0.0, 0.0)), rate=100.0)
    problem, alloc = build_problem(ctx, Plan())
    assert alloc.cores == {"src": 1, "work": 2, "out": 1}
    cpu = {o.name: o.cpu for o in problem.operators}
    # 100 tuples/s × 2 ms = 20 % of a core, split over two units
    assert cpu == pytest.approx({"src#0": 5.0, "work#0": 10.0, "work#1": 10.0, "out#0": 0.0})
    flows = {(f.src, f.dst): f.mbps for f in problem.flows}
    # shuffle: 100 × 1000 B × 8 = 0.8 Mbit/s over 1 × 2 pairs; global: all to out#0
    assert flows == pytest.approx(
        {
            ("src#0", "work#0"): 0.4,
            ("src#0", "work#1"): 0.4,
            ("work#0", "out#0"): 0.2,
            ("work#1", "out#0"): 0.2,
        }
    )
    assert [n.reserved_cpu for n in problem.nodes] == [50.0, 0.0, 0.0]
    assert problem.nodes[0].cpu_capacity == 200.0 and problem.nodes[0].slots == 2


def test_snapshot_rates_and_observed_usage() -> None:
    snap = Snapshot.build(
        operators={
            "src": OperatorStats(input_rate=10),
            "work": OperatorStats(input_rate=10),
            "out": OperatorStats(input_rate=10),
        },
        edges={"src->work": 10.0, "work->out": 10.0},
        nodes={"n0": NodeStats(cpu=120.0, bandwidth_mbps=7.0)},
    )
    ctx = PlanningContext(topology(), cluster(), snapshot=snap, params={"usage": "observed"})
    problem, _ = build_problem(ctx, Plan())
    assert sum(o.cpu for o in problem.operators) == pytest.approx(10 * 2.5 / 10)
    assert (
        problem.nodes[0].reserved_cpu == 120.0 and problem.nodes[0].reserved_bandwidth_mbps == 7.0
    )


def test_units_follow_the_plans_allocation() -> None:
    plan = Plan(allocation=Allocation(cores={"work[0]": 2, "work[1]": 1}))
    ctx = PlanningContext(topology(), cluster(), rate=100.0)
    res = get("placer", "gma").adapter(ctx, plan)
    assert set(res.plan.placement.nodes) == {"work[0]#0", "work[0]#1", "work[1]#0"}
    assert res.plan.allocation == plan.allocation


@pytest.mark.parametrize("name", ["gma", "random", "even"])
def test_every_unit_placed_with_figures(name: str) -> None:
    ctx = PlanningContext(topology(), cluster((150.0, 20.0, 0.0)), rate=100.0, seed=3)
    plan, figs, _ = compose(ctx, steps=[("placer", name)])
    assert set(plan.placement.nodes) == {"src#0", "work#0", "work#1", "out#0"}
    f = figs[f"placer:{name}"]
    for key in ("cpu_utilization", "bw_utilization", "cpu_deviation", "bw_deviation"):
        assert isinstance(f[key], float)
    assert set(f["node_cpu_load"]) == {"n0", "n1", "n2"}
    assert compose(ctx, steps=[("placer", name)])[0] == plan  # deterministic for a seed


def test_gma_avoids_the_loaded_node_and_strict_raises() -> None:
    ctx = PlanningContext(topology(), cluster((175.0, 0.0, 0.0)), rate=100.0)
    plan, figs, notes = compose(ctx, steps=[("placer", "gma")])
    assert "n0" not in {n for u, n in plan.placement.nodes.items() if u != "out#0"}
    assert figs["placer:gma"]["feasible"] and not notes
    hot = PlanningContext(topology(), cluster((190.0, 190.0, 190.0)), rate=1000.0)
    _, figs, notes = compose(hot, steps=[("placer", "gma")])
    assert not figs["placer:gma"]["feasible"] and notes
    strict = PlanningContext(hot.topology, hot.cluster, rate=1000.0, params={"strict": True})
    with pytest.raises(InfeasibleError, match="placer gma"):
        compose(strict, steps=[("placer", "gma")])


def test_unit_demand_follows_routed_shard_loads() -> None:
    topo = Topology.build(
        "k",
        [
            Operator("src", kind="source", tuple_bytes=1000),
            Operator("work", key="k", cost_ms=1.0, shards=4),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "work", grouping="key"), Edge("work", "out")],
    )
    snap = Snapshot.build(
        operators={n: OperatorStats(input_rate=100) for n in ("src", "work", "out")},
        shards=[ShardStats("work", s, load=0.1) for s in range(4)],
        edges={"src->work": 100.0, "work->out": 100.0},
    )
    units = ("work[0]#0", "work[0]#0", "work[0]#0", "work[0]#1")
    plan = Plan(
        allocation=Allocation(cores={"src": 1, "work[0]": 2, "out": 1}),
        routing=Routing(tables={"work[0]": units}),
    )
    problem, _ = build_problem(PlanningContext(topo, cluster(), snapshot=snap), plan)
    cpu = {o.name: o.cpu for o in problem.operators}
    assert cpu["work[0]#0"] == pytest.approx(30.0) and cpu["work[0]#1"] == pytest.approx(10.0)
    flows = {(f.src, f.dst): f.mbps for f in problem.flows}
    # the key grouping delivers 3/4 of 0.8 Mbit/s to the unit serving three shards
    assert flows[("src#0", "work[0]#0")] == pytest.approx(0.6)
    assert flows[("src#0", "work[0]#1")] == pytest.approx(0.2)
    stale = Plan(allocation=plan.allocation)  # no routing: shares fall back to even
    problem2, _ = build_problem(PlanningContext(topo, cluster(), snapshot=snap), stale)
    assert {o.name: o.cpu for o in problem2.operators}["work[0]#1"] == pytest.approx(20.0)
