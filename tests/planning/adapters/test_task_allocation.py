"""Placers naive, tl, tl-imc, td and optimal through the registry (paper 001)."""

from __future__ import annotations

import pytest

from streamscale.errors import InfeasibleError
from streamscale.model import (
    Allocation,
    Cluster,
    Edge,
    Operator,
    OperatorStats,
    Placement,
    Plan,
    Snapshot,
    Topology,
)
from streamscale.planning import PlanningContext, compose, entries, get
from streamscale.planning.adapters.task_allocation import build_job

NAMES = ["naive", "tl", "tl-imc", "td", "optimal"]


def topology() -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source", cost_ms=1.0, instances=2, tuple_bytes=1000),
            Operator("a", cost_ms=4.0, instances=4, tuple_bytes=500),
            Operator("snk", kind="sink", cost_ms=0.5, instances=1),
        ],
        [Edge("src", "a"), Edge("a", "snk")],
    )


def test_registered() -> None:
    names = {e.name for e in entries("placer")}
    assert set(NAMES) <= names


def test_job_from_topology_costs_and_imc() -> None:
    ctx = PlanningContext(topology(), Cluster.uniform(3, cores=1), rate=500.0)
    job = build_job(ctx, Plan())
    assert [(g.name, g.tasks) for g in job.groups] == [("src", 2), ("a", 4), ("snk", 1)]
    # 500 t/s × 1 ms = 50 % of a core; × 4 ms = 200 %.
    assert [g.cost for g in job.groups] == pytest.approx([50.0, 200.0, 25.0])
    # 500 t/s × 1000 B = 0.5 MB/s; 500 t/s × 500 B = 0.25 MB/s.
    assert [e.imc for e in job.edges] == pytest.approx([0.5, 0.25])
    assert job.capacities == (100.0, 100.0, 100.0)


def test_job_from_snapshot_and_executor_instances() -> None:
    snap = Snapshot.build(
        operators={
            "src": OperatorStats(input_rate=100.0),
            "a": OperatorStats(input_rate=100.0),
            "snk": OperatorStats(input_rate=100.0),
        },
        edges={"src->a": 100.0, "a->snk": 50.0},
    )
    plan = Plan(allocation=Allocation(cores={"a[0]": 2, "a[1]": 1, "src": 1, "snk": 1}))
    ctx = PlanningContext(topology(), Cluster.uniform(2, cores=2), snapshot=snap)
    job = build_job(ctx, plan)
    names = [g.name for g in job.groups]
    assert sorted(names) == ["a[0]", "a[1]", "snk", "src"]
    cost = {g.name: g.cost for g in job.groups}
    assert cost["a[0]"] == pytest.approx(20.0) and cost["a[1]"] == pytest.approx(20.0)
    imc = {(e.src, e.dst): e.imc for e in job.edges}
    assert imc[("src", "a[0]")] == pytest.approx(0.05)
    assert imc[("a[1]", "snk")] == pytest.approx(0.0125)


@pytest.mark.parametrize("name", NAMES)
def test_every_unit_placed_with_figures(name: str) -> None:
    ctx = PlanningContext(topology(), Cluster.uniform(3, cores=1), rate=400.0)
    other = Placement(nodes={"elsewhere#0": "n1"})
    res = get("placer", name).adapter(ctx, Plan(placement=other))
    nodes = res.plan.placement.nodes
    assert nodes["elsewhere#0"] == "n1"
    units = {u for u in nodes if u != "elsewhere#0"}
    cores = res.plan.allocation.cores
    assert units == {f"{g}#{i}" for g, k in cores.items() for i in range(k)}
    f = res.figures
    assert f["complete"] and f["algorithm"] == name
    assert f["imc_gain_mbps"] <= f["total_imc_mbps"] + 1e-12
    assert all(v <= 100.0 + 1e-9 for v in f["node_load"].values())


def test_relaxation_refines_coarse_tasks_for_td() -> None:
    # At 540 t/s a's four tasks cost 54 % each: no 100 % node holds two, so no complete
    # allocation of these tasks exists on three nodes (TD's backtracking finds none);
    # the GCD re-cut (§5: d = 1 %, 297 % on 300 %) fits them.
    ctx = PlanningContext(topology(), Cluster.uniform(3, cores=1), rate=540.0)
    res = get("placer", "td").adapter(ctx, Plan())
    assert res.plan.allocation.cores["a"] > 4
    assert res.notes and "GCD" in res.notes[0]
    strict = PlanningContext(
        topology(), Cluster.uniform(3, cores=1), rate=540.0, params={"relax": False}
    )
    with pytest.raises(InfeasibleError, match="group a"):
        get("placer", "td").adapter(strict, Plan())


def test_td_backtracks_before_recutting() -> None:
    # At 500 t/s a's tasks cost 50 %: TD's single pass leaves one without room, but
    # a, a | a, a | src, src, snk (75 %) is complete, so no re-cut is needed (§2.2).
    ctx = PlanningContext(topology(), Cluster.uniform(3, cores=1), rate=500.0)
    res = get("placer", "td").adapter(ctx, Plan())
    assert res.plan.allocation.cores == {"src": 2, "a": 4, "snk": 1} and not res.notes
    load: dict[str, float] = {}
    for unit, node in res.plan.placement.nodes.items():
        load[node] = load.get(node, 0.0) + {"src": 25.0, "a": 50.0, "snk": 25.0}[unit[:-2]]
    assert len(res.plan.placement.nodes) == 7 and max(load.values()) <= 100.0


def test_infeasible_names_the_group() -> None:
    ctx = PlanningContext(topology(), Cluster.uniform(1, cores=1), rate=500.0)
    with pytest.raises(InfeasibleError, match="fit on no node"):
        get("placer", "td").adapter(ctx, Plan())


def test_composes_after_nothing() -> None:
    ctx = PlanningContext(topology(), Cluster.uniform(4, cores=1), rate=300.0)
    plan, figures, _ = compose(ctx, steps=[("placer", "td")])
    assert figures["placer:td"]["complete"]
    assert len(plan.placement.nodes) == 7


def test_skewed_instance_is_split_and_mapped_back() -> None:
    from streamscale.model import Node, Routing, ShardStats

    topo = Topology.build(
        "skew",
        [
            Operator("src", kind="source", cost_ms=1.0, tuple_bytes=100),
            Operator("a", kind="sink", key="k", shards=4, cost_ms=1.0),
        ],
        [Edge("src", "a", grouping="key")],
    )
    snap = Snapshot.build(
        operators={"src": OperatorStats(input_rate=600.0), "a": OperatorStats(input_rate=600.0)},
        shards=[ShardStats("a", s, load=v) for s, v in enumerate([0.6, 0.6, 0.3, 0.1])],
        edges={"src->a": 600.0},
    )
    plan = Plan(
        allocation=Allocation(cores={"src": 1, "a[0]": 2}),
        routing=Routing(tables={"a[0]": ("a[0]#0", "a[0]#0", "a[0]#0", "a[0]#1")}),
    )
    cluster = Cluster.build([Node("n1", cores=2), Node("n2", cores=2)])
    ctx = PlanningContext(topo, cluster, snapshot=snap)
    res = get("placer", "td").adapter(ctx, plan)
    nodes = res.plan.placement.nodes
    assert set(nodes) == {"src#0", "a[0]#0", "a[0]#1"}
    assert res.plan.allocation.cores["a[0]"] == 2
    assert any("skewed" in n for n in res.notes)
    # a[0]#0 serves 150 % of a core, so src (60 %) cannot share its node.
    assert nodes["a[0]#0"] != nodes["src#0"]
    assert res.figures["tasks"] == {"src": 1, "a[0]/0": 1, "a[0]/1": 1}
    off = get("placer", "td").adapter(
        PlanningContext(topo, cluster, snapshot=snap, params={"skew": False}), plan
    )
    assert not any("skewed" in n for n in off.notes)
    small = Cluster.build([Node("n1", cores=1), Node("n2", cores=1)])
    with pytest.raises(InfeasibleError, match="a\\[0\\]/0"):
        get("placer", "td").adapter(PlanningContext(topo, small, snapshot=snap), plan)
