"""Every declared live policy, on random small jobs: the plans it starts with and decides
are plans a runtime can enforce.

Random topologies (one or two keyed operators, maybe a stateless one between),
clusters of ``executor-i`` nodes with a core for every executor, and snapshots (shard loads, diagonal traffic
when two keyed operators share their shape, other work on some nodes). For the
initial plan and for two successive decisions:

* every shard of every keyed executor ``op[e]`` is routed (a table of ``Z`` units);
* every routed unit is placed, on a node of the cluster;
* every instance of the allocation has ≥ 1 core and exactly that many placed units,
  and no placed unit belongs to an instance without cores;
* the figures are plain JSON (numbers stay numbers in ``metrics.jsonl``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscale.control.policies import initial_plan, make_policy, specs
from streamscale.control.policies.spec import PolicySpec
from streamscale.model import (
    Cluster,
    Edge,
    Node,
    NodeStats,
    Operator,
    OperatorStats,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
    instance_id,
    instance_of,
)

SPECS = specs()
FAST = {"time_limit_s": 0.5, "deterministic_limit": 0.05}


@st.composite
def cases(draw: st.DrawFn) -> tuple[Topology, Cluster, Snapshot]:
    n_keyed = draw(st.integers(1, 2))
    between = draw(st.booleans())
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 6)))
    ops = [Operator("src", kind="source", rate=draw(st.floats(50.0, 3000.0)), tuple_bytes=100)]
    edges: list[Edge] = []
    prev, keyed = "src", []
    for i in range(n_keyed):
        if i and between:
            ops.append(Operator("map", cost_ms=0.1))
            edges.append(Edge(prev, "map"))
            prev = "map"
        same = i == 0 or draw(st.booleans())
        inst, z = shape if same else (draw(st.integers(1, 3)), draw(st.integers(1, 6)))
        cost = draw(st.sampled_from([0.0, 0.2, 1.0, 2.5]))
        ops.append(Operator(f"k{i}", cost_ms=cost, key="u", instances=inst, shards=z))
        edges.append(Edge(prev, f"k{i}", "key"))
        prev = f"k{i}"
        keyed.append(f"k{i}")
    ops.append(Operator("snk", kind="sink"))
    edges.append(Edge(prev, "snk"))
    topo = Topology.build("job", ops, edges)
    cores = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    # every policy gives each executor at least one core: the cluster must have them
    need = sum(o.instances for o in topo.processing if o.keyed)
    cores[-1] += max(0, need - sum(cores))
    cluster = Cluster.build(Node(f"executor-{i}", cores=c) for i, c in enumerate(cores))
    rates = topo.rates(None)
    shards, traffic = [], []
    for j, name in enumerate(keyed):
        op = topo.operator(name)
        n = op.instances * op.shards
        weights = draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
        total = sum(weights) or 1.0
        busy = rates[name] * op.cost_ms / 1000.0
        shards += [ShardStats(name, g, busy * w / total, 5, 100 * g) for g, w in enumerate(weights)]
        up = topo.operator(keyed[j - 1]) if j else None
        if (
            up is not None
            and not between
            and (up.instances, up.shards) == (op.instances, op.shards)
        ):
            traffic += [Traffic(up.name, g, name, g, rates[name] / n) for g in range(n)]
    busy_nodes = draw(st.lists(st.sampled_from(cluster.names), max_size=2, unique=True))
    snap = Snapshot.build(
        time=1.0,
        operators={
            o.name: OperatorStats(rates[o.name], rates[o.name], 1000.0 / max(o.cost_ms, 0.1))
            for o in topo.operators
        },
        shards=shards,
        traffic=traffic,
        nodes={n: NodeStats(cpu=draw(st.floats(0.0, 300.0))) for n in busy_nodes},
    )
    return topo, cluster, snap


def check_plan(plan: Plan, topo: Topology, cluster: Cluster) -> None:
    nodes = set(cluster.names)
    for op in topo.processing:
        if not op.keyed:
            continue
        for e in range(op.instances):
            table = plan.routing.tables[instance_id(op.name, e)]
            assert len(table) == op.shards
            for unit in table:
                assert plan.placement.nodes.get(unit) in nodes, unit
    placed: dict[str, int] = {}
    for unit, node in plan.placement.nodes.items():
        assert node in nodes
        placed[instance_of(unit)] = placed.get(instance_of(unit), 0) + 1
    for inst, k in plan.allocation.cores.items():
        assert k >= 1 and placed.get(inst, 0) == k, (inst, k, placed.get(inst))
    assert set(placed) <= set(plan.allocation.cores)


def _strict(obj: Any) -> Any:
    raise TypeError(f"not JSON: {type(obj).__name__}")


def params_for(spec: PolicySpec) -> dict[str, Any]:
    return {k: v for k, v in FAST.items() if k in spec.settings}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_live_policy_plans_are_enforceable(
    spec: PolicySpec, case: tuple[Topology, Cluster, Snapshot]
) -> None:
    topo, cluster, snap = case
    params = params_for(spec)
    plan = initial_plan(spec.name, topo, cluster, params=params)
    check_plan(plan, topo, cluster)
    pol = make_policy(spec.name, topo, cluster, params=params, seed=1)
    for t in (1.0, 2.0):
        d = pol.decide(snap, plan, t)
        json.dumps(d.figures, default=_strict)
        if d.plan is not None:
            check_plan(d.plan, topo, cluster)
            plan = d.plan


def test_every_declared_step_is_a_registered_planner() -> None:
    from streamscale.planning import get

    for s in SPECS:
        for family, name in s.steps:
            assert get(family, name).name == name
