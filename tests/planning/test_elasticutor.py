"""Conformance of the Elasticutor adapters: feasible, deterministic, relabeling-invariant."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.control.policies import initial_plan
from streamscale.model import (
    Allocation,
    Cluster,
    Edge,
    Node,
    Operator,
    OperatorStats,
    Placement,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning.registry import PlanningContext, compose

PIPELINES: dict[str, list[Any]] = {
    "elastic": [("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")],
    "naive-ec": [("allocator", "queueing"), ("placer", "naive-ec"), ("balancer", "shard")],
    "rc": [("allocator", "queueing"), ("balancer", "rc")],
}


def _case(
    cores: list[int], instances: list[int], shards: int, seed: int, prefix: str = ""
) -> tuple[Topology, Cluster, list[Snapshot]]:
    ops = [Operator(f"{prefix}src", kind="source", rate=1000.0)]
    edges = []
    prev = f"{prefix}src"
    for i, e in enumerate(instances):
        name = f"{prefix}op{i}"
        ops.append(Operator(name, key="k", cost_ms=1.0, instances=e, shards=shards))
        edges.append(Edge(prev, name, grouping="key"))
        prev = name
    ops.append(Operator(f"{prefix}out", kind="sink"))
    edges.append(Edge(prev, f"{prefix}out"))
    topo = Topology.build("t", ops, edges)
    cluster = Cluster.build(Node(f"{prefix}n{i}", cores=c) for i, c in enumerate(cores))
    rng = np.random.default_rng(seed)
    budget = 0.6 * sum(cores)
    snaps = []
    for t in range(2):
        operators, stats = {}, []
        for i, e in enumerate(instances):
            name = f"{prefix}op{i}"
            loads = rng.pareto(1.5, e * shards) + 0.01
            loads *= budget / len(instances) / loads.sum() * rng.uniform(0.3, 1.0)
            operators[name] = OperatorStats(1000.0, 1000.0, 1000.0)
            stats += [ShardStats(name, s, float(v), 1, 100 + s) for s, v in enumerate(loads)]
        snaps.append(Snapshot.build(time=float(t), operators=operators, shards=stats))
    return topo, cluster, snaps


def _run(name: str, topo: Topology, cluster: Cluster, snaps: list[Snapshot], seed: int) -> Plan:
    plan = initial_plan(name, topo, cluster)
    for snap in snaps:
        ctx = PlanningContext(topo, cluster, snap, params={"latency_target_ms": 3}, seed=seed)
        plan, _, _ = compose(ctx, plan, steps=PIPELINES[name])
    return plan


def _check(name: str, plan: Plan, topo: Topology, cluster: Cluster) -> None:
    caps = {n.name: n.cores for n in cluster.nodes}
    used = plan.placement.per_node()
    assert all(used[n] <= caps[n] for n in used)
    for op in topo.processing:
        if name == "rc":
            k = plan.allocation.cores[op.name]
            units = {f"{op.name}#{t}" for t in range(k)}
        for e in range(op.instances):
            inst = f"{op.name}[{e}]"
            if name != "rc":
                units = {f"{inst}#{t}" for t in range(plan.allocation.cores[inst])}
            table = plan.routing.tables[inst]
            assert len(table) == op.shards and set(table) <= units
        assert units <= set(plan.placement.nodes)


def _rename(plan: Plan, prefix: str) -> Plan:
    def r(s: str) -> str:
        return s if s.startswith(prefix) else prefix + s

    return Plan(
        Allocation({r(k): v for k, v in plan.allocation.cores.items()}),
        Placement({r(u): r(n) for u, n in plan.placement.nodes.items()}),
        Routing({r(i): tuple(r(u) for u in t) for i, t in plan.routing.tables.items()}),
    )


@settings(max_examples=25)
@given(
    cores=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    instances=st.lists(st.integers(1, 3), min_size=1, max_size=2),
    shards=st.sampled_from([4, 8, 16]),
    seed=st.integers(0, 50),
    name=st.sampled_from(sorted(PIPELINES)),
)
def test_conformance(
    cores: list[int], instances: list[int], shards: int, seed: int, name: str
) -> None:
    if sum(instances) > sum(cores):
        instances = [1] * min(len(instances), sum(cores))
    topo, cluster, snaps = _case(cores, instances, shards, seed)
    plan = _run(name, topo, cluster, snaps, seed)
    _check(name, plan, topo, cluster)
    assert _run(name, topo, cluster, snaps, seed) == plan  # deterministic for a seed
    # relabeling operators and nodes relabels the plan, nothing else
    topo2, cluster2, snaps2 = _case(cores, instances, shards, seed, prefix="x")
    assert _run(name, topo2, cluster2, snaps2, seed) == _rename(plan, "x")
