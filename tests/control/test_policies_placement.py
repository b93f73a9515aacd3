"""Hand-checked cases of the placement-aware live policies: albic, td, tl, gma.

Two keyed operators ``a → b`` share their key (shard ``g`` of ``a`` feeds only
shard ``g`` of ``b``); outcomes are checked against brute force or against
arithmetic done here, never against figures the policies report.
"""

from __future__ import annotations

import itertools
import math

import pytest

from streamscale.control.policies import initial_plan, make_policy
from streamscale.model import Allocation, Placement, Plan, Routing, instance_id, unit_id
from tests.control._jobs import chain, settle, shard_node, snapshot, units_per_node


def _local_share(plan: Plan, topo, n: int) -> float:  # type: ignore[no-untyped-def]
    return (
        sum(shard_node(plan, topo, "a", g) == shard_node(plan, topo, "b", g) for g in range(n)) / n
    )


def _node_loads(plan: Plan, topo, loads: dict[str, list[float]]) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out: dict[str, float] = {}
    for op, ls in loads.items():
        for g, x in enumerate(ls):
            node = shard_node(plan, topo, op, g)
            out[node] = out.get(node, 0.0) + x
    return out


def _spread_plan(topo, nodes: list[str], where) -> Plan:  # type: ignore[no-untyped-def]
    """Executor ``op[e]`` with one unit per node, shard ``g`` of ``op`` on ``where(op, g)``."""
    cores, placement, tables = {}, {}, {}
    for op in ("a", "b"):
        o = topo.operator(op)
        for e in range(o.instances):
            inst = instance_id(op, e)
            row = []
            for s in range(o.shards):
                i = where(op, e * o.shards + s)
                row.append(unit_id(inst, i))
                placement[unit_id(inst, i)] = nodes[i]
            tables[inst] = tuple(row)
            cores[inst] = len(set(row))
    return Plan(Allocation(cores), Placement(placement), Routing(tables))


# -- albic -------------------------------------------------------------------------


def test_albic_collocates_communicating_shards_as_well_as_brute_force() -> None:
    topo, cluster = chain(instances=2, shards=6, nodes=2, cores=4)
    n = 12
    loads = [0.2] * n
    snap = snapshot(loads, loads)
    # start: a's shards alternate nodes, b's in halves: half of the pairs apart
    start = _spread_plan(topo, list(cluster.names), lambda op, g: g % 2 if op == "a" else g // 6)
    assert _local_share(start, topo, n) == 0.5
    # Brute force over every node choice of every pair: the best share of traffic kept
    # local at the smallest load spread (pairs apart can only lose traffic).
    best = min(abs(sum(side) - (n - sum(side))) for side in itertools.product((0, 1), repeat=n))
    assert best == 0  # all pairs together and perfectly balanced is possible: share 1.0
    pol = make_policy("albic", topo, cluster, params={"max_migrations": 0, "time_limit_s": 5.0})
    plan, _ = settle(pol, snap, start)
    assert _local_share(plan, topo, n) == 1.0
    node_load = _node_loads(plan, topo, {"a": loads, "b": loads})
    mean = sum(node_load.values()) / 2
    assert max(node_load.values()) <= mean * 1.05 + 1e-9


def test_albic_scale_in_drains_the_highest_nodes_within_the_budget() -> None:
    topo, cluster = chain(instances=2, shards=8, nodes=4, cores=2)
    n = 16
    loads = [0.04] * n  # 1.28 cores: ceil(1.28 / 0.7) = 2 cores, one 2-core node
    snap = snapshot(loads, loads)
    start = _spread_plan(topo, list(cluster.names), lambda op, g: g % 4)
    pol = make_policy("albic", topo, cluster, params={"max_migrations": 6, "time_limit_s": 5.0})
    plan = start
    for t in range(20):
        d = pol.decide(snap, plan, float(t))
        if d.plan is None:
            break
        moved = sum(
            shard_node(plan, topo, op, g) != shard_node(d.plan, topo, op, g)
            for op in ("a", "b")
            for g in range(n)
        )
        assert moved <= 6
        plan = d.plan
    need_cores = math.ceil(2 * n * 0.04 / 0.7)
    keep = need_cores // 2 + (need_cores % 2 > 0)
    used = {shard_node(plan, topo, op, g) for op in ("a", "b") for g in range(n)}
    assert used == {f"executor-{i}" for i in range(keep)}
    assert set(plan.placement.nodes.values()) == used


def test_albic_scales_out_onto_the_next_nodes_when_load_grows() -> None:
    topo, cluster = chain(instances=1, shards=32, nodes=4, cores=2)
    loads = [0.075] * 32  # 4.8 cores: ceil(4.8 / 0.7) = 7 cores, four 2-core nodes
    start = initial_plan("albic", topo, cluster)
    assert set(start.placement.nodes.values()) == {"executor-0"}
    pol = make_policy("albic", topo, cluster, params={"max_migrations": 0, "time_limit_s": 5.0})
    plan, _ = settle(pol, snapshot(loads, loads), start)
    used = {shard_node(plan, topo, op, g) for op in ("a", "b") for g in range(32)}
    assert used == set(cluster.names)
    assert _local_share(plan, topo, 32) == 1.0


def test_albic_drains_marked_nodes_within_the_budget_and_releases_them() -> None:
    # ALBIC's adaptation loop (paper 003, §4.1) as the live policy runs it. Pair loads
    # (a/g + b/g) 0.1, 0.3, 0.2, 0.2, 0.24, 0.16, 0.2, 0.2: 1.6 cores (and 160 queued
    # tuples / 30 s / 1000 t/s per core = 0.005) -> ⌈1.605 / 0.7⌉ = 3 cores -> two 2-core
    # nodes kept, executor-2 and executor-3 drained, two key groups moved a decision.
    topo, cluster = chain(instances=1, shards=8, nodes=4, cores=2)
    half = [0.05, 0.15, 0.1, 0.1, 0.12, 0.08, 0.1, 0.1]
    snap = snapshot(half, half)
    start = _spread_plan(topo, list(cluster.names), lambda op, g: g % 4)
    params = {"max_migrations": 2, "time_limit_s": 5.0, "deterministic_limit": 0.5}
    pol = make_policy("albic", topo, cluster, params=params)
    plan, draining = start, {"executor-2", "executor-3"}
    for t in range(20):
        d = pol.decide(snap, plan, float(t))
        if d.plan is None:
            break
        moves = [
            (shard_node(plan, topo, op, g), shard_node(d.plan, topo, op, g))
            for op in ("a", "b")
            for g in range(8)
        ]
        moved = [(old, new) for old, new in moves if old != new]
        assert len(moved) <= 2  # the per-decision budget
        assert not [new for _, new in moved if new in draining]  # nothing moves in
        plan = d.plan
    used = {shard_node(plan, topo, op, g) for op in ("a", "b") for g in range(8)}
    assert used == {"executor-0", "executor-1"}  # drained ...
    assert set(plan.placement.nodes.values()) == used  # ... and released
    # the two nodes split the 1.6 cores within ALBIC's 5 % load distance of the mean 0.8
    loads = _node_loads(plan, topo, {"a": half, "b": half})
    assert max(loads.values()) <= 0.8 * 1.05 + 1e-9


def test_albic_adds_a_node_only_when_the_kept_nodes_cannot_carry_the_load() -> None:
    # Everything starts on executor-0 of three 2-core nodes. 0.2 a shard: 1.6 cores (and
    # 0.005 of backlog) -> ⌈1.605 / 0.7⌉ = 3 cores: two nodes, balanced, executor-2 idle.
    # 0.4 a shard: 3.2 cores -> ⌈3.205 / 0.7⌉ = 5 cores: all three nodes.
    topo, cluster = chain(instances=1, shards=4, nodes=3, cores=2)
    start = _spread_plan(topo, list(cluster.names), lambda op, g: 0)
    params = {"max_migrations": 0, "time_limit_s": 5.0}
    pol = make_policy("albic", topo, cluster, params=params)
    plan, _ = settle(pol, snapshot([0.2] * 4, [0.2] * 4), start)
    used = {shard_node(plan, topo, op, g) for op in ("a", "b") for g in range(4)}
    assert used == {"executor-0", "executor-1"}
    assert sorted(_node_loads(plan, topo, {"a": [0.2] * 4, "b": [0.2] * 4}).values()) == [
        pytest.approx(0.8),
        pytest.approx(0.8),
    ]
    pol = make_policy("albic", topo, cluster, params=params)
    plan, _ = settle(pol, snapshot([0.4] * 4, [0.4] * 4), start)
    used = {shard_node(plan, topo, op, g) for op in ("a", "b") for g in range(4)}
    assert used == set(cluster.names)


# -- td / tl -------------------------------------------------------------------------


def _check_units(plan: Plan, topo, cluster) -> None:  # type: ignore[no-untyped-def]
    cores = {n.name: n.cores for n in cluster.nodes}
    for node, count in units_per_node(plan).items():
        assert count <= cores[node], (node, count)
    for op in ("a", "b"):
        o = topo.operator(op)
        for e in range(o.instances):
            inst = instance_id(op, e)
            units = {unit_id(inst, i) for i in range(plan.allocation.cores[inst])}
            assert set(plan.routing.tables[inst]) <= units <= set(plan.placement.nodes)


@pytest.mark.parametrize("name", ["td", "tl"])
def test_task_allocation_keeps_every_pair_on_one_node_within_cores(name: str) -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2)
    loads = [0.3] * 8
    snap = snapshot(loads, loads)
    pol = make_policy(name, topo, cluster, params={"latency_target_ms": 5})
    plan, _ = settle(pol, snap, initial_plan(name, topo, cluster))
    _check_units(plan, topo, cluster)
    # every unit's traffic local: the upper bound of any placement, attained
    assert _local_share(plan, topo, 8) == 1.0
    # b's shards dealt to its units the other way round: pairs apart, load still balanced
    tables = dict(plan.routing.tables)
    for e in range(2):
        tables[instance_id("b", e)] = tables[instance_id("b", e)][::-1]
    crossed = Plan(plan.allocation, plan.placement, Routing(tables))
    assert _local_share(crossed, topo, 8) < 1.0
    plan, _ = settle(pol, snap, crossed)
    _check_units(plan, topo, cluster)
    assert _local_share(plan, topo, 8) == 1.0
    # balanced within theta over each executor's units (loads from the snapshot)
    for op in ("a", "b"):
        for e in range(2):
            table = plan.routing.tables[instance_id(op, e)]
            per = {u: 0.0 for u in set(table)}
            for s, u in enumerate(table):
                per[u] += loads[e * 4 + s]
            k = plan.allocation.cores[instance_id(op, e)]
            assert max(per.values()) <= 1.2 * sum(per.values()) / k + 1e-9


@pytest.mark.parametrize("name", ["td", "tl"])
def test_task_allocation_packs_low_nodes_and_scales_in_from_the_top(name: str) -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2)
    pol = make_policy(name, topo, cluster, params={"latency_target_ms": 5})
    busy, _ = settle(pol, snapshot([0.4] * 8, [0.4] * 8), initial_plan(name, topo, cluster))
    calm, _ = settle(pol, snapshot([0.05] * 8, [0.05] * 8), busy)
    for plan in (busy, calm):
        _check_units(plan, topo, cluster)
        units = plan.allocation.total
        prefix = {f"executor-{i}" for i in range(math.ceil(units / 2))}
        assert set(plan.placement.nodes.values()) <= prefix
    assert calm.allocation.total < busy.allocation.total
    assert len(set(calm.placement.nodes.values())) < len(set(busy.placement.nodes.values()))


def test_td_without_traffic_still_routes_everything() -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=2, cores=4)
    snap = snapshot([0.3] * 8, [0.3] * 8, traffic=0.0)
    assert not snap.traffic
    pol = make_policy("td", topo, cluster, params={"latency_target_ms": 5})
    plan, _ = settle(pol, snap, initial_plan("td", topo, cluster))
    _check_units(plan, topo, cluster)


# -- gma -------------------------------------------------------------------------------


def test_gma_leaves_a_node_busy_with_other_work() -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2)
    loads = [0.1] * 8
    start = initial_plan("gma", topo, cluster)
    # executor-0 is full with other work: 200 % on top of this job's own executors there
    # (one unit each at the start, every executor carrying 4 shards × 0.1 cores)
    own0 = sum(0.4 for n in start.placement.nodes.values() if n == "executor-0")
    snap = snapshot(loads, loads, nodes={"executor-0": 200.0 + 100 * own0, "executor-1": 0.0})
    pol = make_policy("gma", topo, cluster, params={"latency_target_ms": 50})
    d = pol.decide(snap, start, 1.0)
    assert d.plan is not None
    assert "executor-0" not in set(d.plan.placement.nodes.values())
    assert set(d.plan.placement.nodes.values()) <= set(cluster.names)
    assert all(k <= 2 for k in units_per_node(d.plan).values())
    # the same job on free nodes packs from executor-0 up
    free = make_policy("gma", topo, cluster, params={"latency_target_ms": 50})
    d2 = free.decide(snapshot(loads, loads), start, 1.0)
    plan2 = d2.plan or start
    assert "executor-0" in set(plan2.placement.nodes.values())


@pytest.mark.parametrize("name", ["td", "tl"])
def test_task_allocation_matches_brute_force_when_not_every_pair_fits(name: str) -> None:
    # a[1]↔b[1] exchange 100/s per shard, a[0]↔b[0] 10/s; nodes of 2, 1 and 1 cores hold
    # the four one-core units, so only one pair can share a node
    topo, cluster = chain(instances=2, shards=2, nodes=3, cores=1)
    cluster = type(cluster).build(
        [type(n)(n.name, cores=2 if i == 0 else 1) for i, n in enumerate(cluster.nodes)]
    )
    rates = [10.0, 10.0, 100.0, 100.0]
    loads = [0.1] * 4
    snap = snapshot(loads, loads)
    snap = type(snap).build(
        time=snap.time,
        operators=snap.operators,
        shards=snap.shards,
        traffic=[
            type(t)(t.src, t.src_shard, t.dst, t.dst_shard, rates[t.src_shard])
            for t in snap.traffic
        ],
    )
    pol = make_policy(name, topo, cluster, params={"latency_target_ms": 50})
    plan, _ = settle(pol, snap, initial_plan(name, topo, cluster))
    assert plan.allocation.total == 4
    _check_units(plan, topo, cluster)
    got = sum(
        rates[g]
        for g in range(4)
        if shard_node(plan, topo, "a", g) == shard_node(plan, topo, "b", g)
    )
    caps = {n.name: n.cores for n in cluster.nodes}
    best = 0.0
    for where in itertools.product(cluster.names, repeat=4):  # a[0], a[1], b[0], b[1]
        if any(where.count(n) > c for n, c in caps.items()):
            continue
        best = max(best, sum(rates[2 * e] * 2 for e in range(2) if where[e] == where[2 + e]))
    assert best == 200.0
    assert got == best


@pytest.mark.parametrize("name", ["td", "tl", "gma", "albic", "model-driven"])
def test_policies_plan_a_job_whose_source_declares_no_rate(name: str) -> None:
    # the Spark collector reports the keyed operators and the sources, not every edge
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2, rate=None)
    pol = make_policy(name, topo, cluster, params={"time_limit_s": 1.0} if name == "albic" else {})
    plan, _ = settle(pol, snapshot([0.3] * 8, [0.3] * 8), initial_plan(name, topo, cluster))
    if name in ("td", "tl"):
        _check_units(plan, topo, cluster)
    assert {shard_node(plan, topo, op, g) for op in "ab" for g in range(8)} <= set(cluster.names)
