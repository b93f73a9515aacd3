"""Every registered planner, found through the registry alone: registering is enough.

Each planner runs on random small jobs (keyed operators in a chain, optional
stateless operator between them, a snapshot with shard loads, diagonal traffic
and node usage, one-point performance models) from several starting plans: the
empty plan, one core per instance, operator-level units, and what each
registered allocator makes of those. It must either raise a ``StreamscaleError``
(a planner may need what a start lacks) or return a plan its family promises:

* allocator: units per instance ≥ 1, every instance of a topology operator;
* placer: something placed, everything placed on a node of the cluster (or a
  slot ``node/l`` of one), and an instance it places has all its units
  ``inst#0 … inst#k−1`` placed (instances of other families are left alone);
* balancer: every keyed executor ``op[e]`` has a complete routing table and every
  unit it routes to is placed on a node of the cluster;

and the same plan again for the same inputs. On a fixed, well-formed job every
planner succeeds from at least one start, so no planner passes by always failing.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscale.control.policies import initial_plan
from streamscale.errors import StreamscaleError
from streamscale.model import (
    Cluster,
    Edge,
    ModelPoint,
    Node,
    NodeStats,
    Operator,
    OperatorStats,
    PerformanceModel,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
    instance_id,
    instance_of,
    operator_of,
    unit_id,
)
from streamscale.model.ids import parse_slot
from streamscale.planning import PlanningContext, entries, registry
from streamscale.planning.registry import Entry

ENTRIES = entries()
# Solver bounds keeping a run short, used where a planner declares them.
FAST = {"time_limit_s": 1.0, "deterministic_limit": 0.05, "work_limit": 0.5}


def _job(
    keyed: list[tuple[int, int, float]], stateless_between: bool, nodes: list[int], seed: int
) -> PlanningContext:
    ops = [Operator("src", kind="source", rate=400.0, tuple_bytes=100)]
    edges: list[Edge] = []
    prev = "src"
    names = []
    for i, (inst, shards, cost) in enumerate(keyed):
        if i and stateless_between:
            ops.append(Operator(f"map{i}", cost_ms=0.1, tuple_bytes=100))
            edges.append(Edge(prev, f"map{i}"))
            prev = f"map{i}"
        name = f"k{i}"
        ops.append(
            Operator(name, cost_ms=cost, key="u", instances=inst, shards=shards, tuple_bytes=100)
        )
        edges.append(Edge(prev, name, "key"))
        prev = name
        names.append(name)
    ops.append(Operator("snk", kind="sink"))
    edges.append(Edge(prev, "snk"))
    topo = Topology.build("job", ops, edges)
    cluster = Cluster.build(Node(f"executor-{i}", cores=c) for i, c in enumerate(nodes))
    rates = topo.rates(None)
    shards, traffic = [], []
    for j, name in enumerate(names):
        op = topo.operator(name)
        n = op.instances * op.shards
        for g in range(n):
            load = rates[name] * op.cost_ms / 1000.0 * (1 + (g * 7 + seed) % 3) / (2 * n)
            shards.append(ShardStats(name, g, load, 10, 1000 * (g + 1)))
        if j and not stateless_between:
            up = topo.operator(names[j - 1])
            if (up.instances, up.shards) == (op.instances, op.shards):
                traffic += [Traffic(up.name, g, name, g, rates[name] / n) for g in range(n)]
    snap = Snapshot.build(
        time=1.0,
        operators={
            o.name: OperatorStats(rates[o.name], rates[o.name], 1000.0 / max(o.cost_ms, 0.1))
            for o in topo.operators
        },
        shards=shards,
        traffic=traffic,
        nodes={cluster.names[0]: NodeStats(cpu=20.0)},
    )
    models = {
        o.name: PerformanceModel.build(
            o.name, [ModelPoint(1, 1000.0 / max(o.cost_ms, 0.1), 100.0, 10.0)]
        )
        for o in topo.operators
    }
    return PlanningContext(topo, cluster, snap, models=models, rate=400.0, seed=seed)


@st.composite
def jobs(draw: st.DrawFn) -> PlanningContext:
    keyed = draw(
        st.lists(
            st.tuples(st.integers(1, 2), st.integers(1, 4), st.sampled_from([0.5, 1.0, 3.0])),
            min_size=1,
            max_size=2,
        )
    )
    same = draw(st.booleans())
    if same and len(keyed) == 2:
        keyed[1] = (keyed[0][0], keyed[0][1], keyed[1][2])
    nodes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    return _job(keyed, draw(st.booleans()), nodes, draw(st.integers(0, 3)))


def _starts(ctx: PlanningContext) -> list[Plan]:
    base = [Plan()]
    for name in ("static", "rc"):
        with contextlib.suppress(StreamscaleError):
            base.append(initial_plan(name, ctx.topology, ctx.cluster))
    out = list(base)
    for e in entries("allocator"):
        for start in base[:2]:
            res = _run(e, ctx, start)
            if res is not None:
                out.append(res)
    return out


def _with_params(entry: Entry, ctx: PlanningContext) -> PlanningContext:
    params: dict[str, Any] = {
        k: v for k, v in FAST.items() if entry.params is not None and k in entry.params
    }
    return PlanningContext(
        ctx.topology, ctx.cluster, ctx.snapshot, ctx.models, ctx.rate, params, ctx.seed
    )


def _run(entry: Entry, ctx: PlanningContext, start: Plan) -> Plan | None:
    try:
        return entry.adapter(_with_params(entry, ctx), start).plan
    except StreamscaleError:
        return None


def _node(ctx: PlanningContext, where: str) -> bool:
    if where in ctx.cluster.names:
        return True
    slot = parse_slot(where)
    return slot is not None and slot.vm in ctx.cluster.names


def _check(entry: Entry, ctx: PlanningContext, plan: Plan) -> None:
    topo = ctx.topology
    if entry.family == "allocator":
        assert plan.allocation.cores
        for inst, k in plan.allocation.cores.items():
            assert operator_of(inst) in topo.names, inst
            assert int(k) == k and k >= 1, (inst, k)
    elif entry.family == "placer":
        assert plan.placement.nodes
        assert all(_node(ctx, w) for w in plan.placement.nodes.values())
        placed = {instance_of(u) for u in plan.placement.nodes}
        for inst, k in plan.allocation.cores.items():
            if inst in placed:
                units = {unit_id(inst, i) for i in range(k)}
                assert units <= set(plan.placement.nodes), (inst, k)
    else:
        for op in topo.processing:
            if not op.keyed:
                continue
            for e in range(op.instances):
                table = plan.routing.tables[instance_id(op.name, e)]
                assert len(table) == op.shards
                for unit in table:
                    assert plan.placement.nodes.get(unit) in ctx.cluster.names, unit


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.family}-{e.name}")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ctx=jobs())
def test_registered_planner_conforms(entry: Entry, ctx: PlanningContext) -> None:
    for start in _starts(ctx):
        plan = _run(entry, ctx, start)
        if plan is None:
            continue
        _check(entry, ctx, plan)
        assert _run(entry, ctx, start) == plan


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.family}-{e.name}")
def test_registered_planner_plans_a_well_formed_job(entry: Entry) -> None:
    ctx = _job([(2, 4, 1.0), (2, 4, 1.0)], False, [2, 2, 2], 0)
    plans = [p for p in (_run(entry, ctx, s) for s in _starts(ctx)) if p is not None]
    assert plans, f"{entry.family} {entry.name} failed from every start"
    for plan in plans:
        _check(entry, ctx, plan)


def test_registration_is_enough(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A new planner module in the adapters package: found and imported only when wanted.
    pkg = tmp_path / "extra_planners"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "solo.py").write_text(
        "from streamscale.planning.registry import StepResult, register\n"
        "@register('placer', 'solo', 'everything on the first node')\n"
        "def solo(context, plan):\n"
        "    return StepResult(plan)\n"
    )
    (pkg / "other.py").write_text("raise AssertionError('imported for nothing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "ADAPTERS_PACKAGE", "extra_planners")
    monkeypatch.setattr(registry, "_REGISTRY", {})
    assert registry.get("placer", "solo").description == "everything on the first node"
    assert "extra_planners.solo" in sys.modules and "extra_planners.other" not in sys.modules
