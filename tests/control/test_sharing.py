"""Units sharing cores: the packing, the split of an instance's work over its units, the
damped scale-in, and the elastic policy holding only the cores its work needs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.control.policies import initial_plan, make_policy
from streamscale.control.policies.base import scale
from streamscale.control.sharing import (
    held_cores,
    pack_units,
    shared_slots,
    unit_demand,
    with_slots,
)
from streamscale.model import (
    Allocation,
    Edge,
    Operator,
    OperatorStats,
    Placement,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.model.snapshot import batch_headroom
from streamscale.runtime.spark.executors.resources import capacity_cluster


def test_pack_units_hand_checked() -> None:
    assert pack_units([], capacity=0.9) == 0
    assert pack_units([0.0, 0.0, 0.0], capacity=0.9) == 1
    # first fit decreasing: 0.5+0.4 | 0.5+0.3 | 0.2  (0.9 fits exactly)
    assert pack_units([0.2, 0.5, 0.3, 0.4, 0.5], capacity=0.9) == 3
    # a unit at or above the bound keeps its core; nothing joins it
    assert pack_units([0.95, 0.05, 2.0], capacity=0.9) == 3
    assert pack_units([0.25] * 8, capacity=0.9) == 3
    assert pack_units([0.25] * 8, capacity=1.0) == 2
    with pytest.raises(ValueError):
        pack_units([0.1], capacity=0.0)


def test_pack_units_first_fit_decreasing_trace() -> None:
    # sorted 0.7 0.6 0.45 0.33 0.2 0.2 0.1 0.05 at 0.9:
    # 0.7 → A; 0.6 → B; 0.45 → C; 0.33 → C (0.78); 0.2 → A (0.9); 0.2 → B (0.8);
    # 0.1 → B (0.9); 0.05 → C (0.83): three cores, the least any packing can use
    demand = [0.1, 0.7, 0.33, 0.2, 0.2, 0.45, 0.05, 0.6]
    assert pack_units(demand, capacity=0.9) == 3 == math.ceil(sum(demand) / 0.9)


def test_units_are_packed_onto_whole_executors() -> None:
    # 1.4 cores of work in seven units, at 0.72 a core: three cores packed core by core
    # (three units a core), which two-core executors round up to four; one executor's
    # two cores hold it
    demand = [0.2] * 7
    assert pack_units(demand, capacity=0.72) == 3
    assert pack_units(demand, capacity=0.72, group=2) == 2
    # a unit above the bound fills one core of an executor; the other core takes the rest
    assert pack_units([1.5, 0.4, 0.4], capacity=0.9, group=2) == 2
    assert pack_units([1.5, 0.4, 0.4, 0.2], capacity=0.9, group=2) == 4
    assert pack_units([0.1], capacity=0.9, group=3) == 3
    assert pack_units([], capacity=0.9, group=2) == 0
    with pytest.raises(ValueError):
        pack_units([0.1], capacity=0.9, group=0)
    # scale-in by whole executors, damped as core by core (at 0.9 × 0.9 = 0.81 a core)
    assert shared_slots(demand, capacity=0.9, current=4, group=2) == 2  # 1.4 ≤ 1.62
    assert shared_slots([0.2] * 9, capacity=0.9, current=4, group=2) == 4  # 1.8 > 1.62
    assert shared_slots([0.2] * 8, capacity=0.9, current=4, group=2) == 2  # 1.6 ≤ 1.62
    damped = shared_slots([0.2] * 8, capacity=0.9, current=4, group=2, scale_in_margin=0.8)
    assert damped == 4  # 1.6 > 1.44


@settings(max_examples=300, deadline=None)
@given(
    demand=st.lists(st.floats(0.0, 2.0, allow_nan=False), max_size=12),
    capacity=st.sampled_from([0.5, 0.72, 0.8, 0.9, 1.0]),
    group=st.integers(1, 4),
)
def test_packing_onto_executors_is_whole_executors_and_no_worse_than_core_by_core(
    demand: list[float], capacity: float, group: int
) -> None:
    cores = pack_units(demand, capacity=capacity, group=group)
    assert cores % group == 0
    # at least the executors the work needs (a unit counts at most one core's bound) ...
    work = sum(min(d, capacity) for d in demand)
    need = math.ceil(work / (group * capacity) - 1e-9) if demand else 0
    assert cores >= group * max(need, 1 if demand else 0)
    # ... and never more than the core-by-core packing rounded up to whole executors
    assert cores <= group * math.ceil(pack_units(demand, capacity=capacity) / group)


def _fewest_bins(weights: list[float], size: float) -> int:
    """The fewest bins of ``size`` holding ``weights``, by trying every assignment."""
    best = len(weights)

    def place(i: int, bins: list[float]) -> None:
        nonlocal best
        if len(bins) >= best:
            return
        if i == len(weights):
            best = len(bins)
            return
        for j in range(len(bins)):
            if bins[j] + weights[i] <= size + 1e-12:
                bins[j] += weights[i]
                place(i + 1, bins)
                bins[j] -= weights[i]
        place(i + 1, [*bins, weights[i]])

    place(0, [])
    return best


@settings(max_examples=200, deadline=None)
@given(
    demand=st.lists(st.floats(0.01, 2.0, allow_nan=False), min_size=1, max_size=7),
    capacity=st.sampled_from([0.5, 0.72, 0.9]),
    group=st.integers(2, 3),
)
def test_packing_onto_executors_is_near_the_fewest_executors(
    demand: list[float], capacity: float, group: int
) -> None:
    # against brute force: first-fit decreasing's bound, 11/9 of the optimum plus 6/9
    fewest = _fewest_bins([min(d, capacity) for d in demand], group * capacity)
    executors = pack_units(demand, capacity=capacity, group=group) // group
    assert fewest <= executors <= 11 / 9 * fewest + 6 / 9


def _plan(tables: dict[str, tuple[str, ...]], slots: int | None = None) -> Plan:
    cores = {inst: len(set(t)) for inst, t in tables.items()}
    nodes = {u: "n0" for t in tables.values() for u in t}
    return Plan(Allocation(cores, slots), Placement(nodes), Routing(tables))


def test_unit_demand_by_shard_load() -> None:
    p = _plan({"op[0]": ("op[0]#0", "op[0]#1", "op[0]#0", "op[0]#1")})
    # shards 0 and 2 on #0 carry 0.3 + 0.1 of 0.6: two thirds of 0.9 cores
    got = unit_demand(p, "op[0]", 0.9, [0.3, 0.1, 0.1, 0.1])
    assert got == pytest.approx({"op[0]#0": 0.6, "op[0]#1": 0.3})
    # no load seen: equal per shard
    assert unit_demand(p, "op[0]", 0.9, [0.0] * 4) == pytest.approx(
        {"op[0]#0": 0.45, "op[0]#1": 0.45}
    )
    assert unit_demand(p, "op[9]", 1.0, [1.0]) == {}


def test_shared_slots_damps_scale_in() -> None:
    # 8 units of 0.25: 3 per core at 0.9, 2 per core at 0.72 (0.75 > 0.72)
    def slots(d: list[float], current: int | None) -> int:
        return shared_slots(d, capacity=0.9, current=current, scale_in_margin=0.8)

    assert slots([0.25] * 8, None) == 3
    assert slots([0.25] * 8, 8) == 4  # after a surge: 8 → 4
    assert slots([0.25] * 8, 4) == 4  # then holds, no 4 ↔ 3
    assert slots([0.25] * 8, 3) == 3
    assert slots([0.25] * 8, 2) == 3  # more work: up at once
    assert slots([0.1] * 8, 4) == 2  # 7 per core at 0.72
    # the default margin, 0.9: 3 per core fit the 0.81 bound, so 8 → 3 at once
    assert shared_slots([0.25] * 8, capacity=0.9, current=8) == 3
    assert shared_slots([0.28] * 8, capacity=0.9, current=4) == 4  # 0.84 > 0.81: held


def test_held_cores_and_scale_direction() -> None:
    p = _plan({f"op[{e}]": (f"op[{e}]#0",) * 4 for e in range(8)})
    assert held_cores(p.allocation) == 8
    assert held_cores(with_slots(p, 3).allocation) == 3
    assert held_cores(with_slots(p, 12).allocation) == 8  # never more than the units
    assert scale(p, with_slots(p, 3)) == "down"
    assert scale(with_slots(p, 3), with_slots(p, 6)) == "up"
    assert scale(with_slots(p, 3), with_slots(p, 3)) == "none"


def _job(instances: int = 8, shards: int = 4) -> Topology:
    ops = [
        Operator("gen", kind="source", tuple_bytes=64),
        Operator("calc", cost_ms=20.0, key="k", instances=instances, shards=shards, tuple_bytes=64),
        Operator("out", kind="sink"),
    ]
    return Topology.build("surge", ops, [Edge("gen", "calc", "key"), Edge("calc", "out")])


def _observed(
    rate: float, shards: int = 32, *, overhead_s: float = 0.0, cycle_s: float = 0.0
) -> Snapshot:
    # μ = 50 tuples/s per core (20 ms each): rate / 50 cores of work, even over the shards
    work = rate / 50.0
    return Snapshot.build(
        time=10.0,
        operators={"gen": OperatorStats(0.0, rate), "calc": OperatorStats(rate, rate, 50.0)},
        shards=[ShardStats("calc", g, work / shards, 10, 1000) for g in range(shards)],
        batch_overhead_s=overhead_s,
        cycle_target_s=cycle_s,
    )


@pytest.mark.parametrize("name", ["elastic", "proportional"])
def test_policy_holds_the_work_not_one_core_per_instance(name: str) -> None:
    """Eight instances at 100 t/s of 20 ms tuples: 2 cores of work, 0.25 per instance.

    One core per instance held 8 cores (4 two-core executors, static-peak's size); shared,
    the units pack 3 to a core at the 0.9 utilisation bound: 3 cores, 2 executors. At
    300 t/s (0.75 per instance) no two units fit one core: 8 cores. Back at 100 t/s the
    units fit 3 a core at the scale-in bound (0.9 of 0.9: 0.81): 3 cores; with a
    ``scale_in_margin`` of 0.8 (a 0.72 bound) the scale-in is damped to 2 per core: 4
    cores, still 2 executors.
    """
    topo, cluster = _job(), capacity_cluster(8, 2)
    params = {"latency_target_ms": 2000.0, "share_cores": True}
    p0 = initial_plan(name, topo, cluster, params=params)
    assert held_cores(p0.allocation) == 8
    pol = make_policy(name, topo, cluster, params=params, seed=1)
    # an empty first batch measures no work: the cores held stay
    idle = pol.decide(_observed(0.0), p0, 5.0)
    assert held_cores((idle.plan or p0).allocation) == 8
    base = pol.decide(_observed(100.0), p0, 10.0)
    assert base.plan is not None and base.scale == "down"
    assert base.plan.allocation.total >= 8  # every instance keeps a unit
    assert held_cores(base.plan.allocation) == 3
    assert math.ceil(held_cores(base.plan.allocation) / 2) == 2  # ExecutorResources.wanted
    peak = pol.decide(_observed(300.0), base.plan, 20.0)
    assert peak.plan is not None and peak.scale == "up"
    assert held_cores(peak.plan.allocation) == 8
    after = pol.decide(_observed(100.0), peak.plan, 30.0)
    assert after.plan is not None and held_cores(after.plan.allocation) == 3
    damped = make_policy(name, topo, cluster, params={**params, "scale_in_margin": 0.8}, seed=1)
    after = damped.decide(_observed(100.0), peak.plan, 30.0)
    assert after.plan is not None and held_cores(after.plan.allocation) == 4
    # off: one core per unit, as before
    plain = make_policy(name, topo, cluster, params={**params, "share_cores": False}, seed=1)
    d = plain.decide(_observed(100.0), p0, 10.0)
    held = held_cores((d.plan or p0).allocation)
    assert held == (d.plan or p0).allocation.total >= 8


@pytest.mark.parametrize("rate", [20.0, 70.0, 100.0, 300.0])
def test_policy_holds_whole_executors_no_more_than_core_by_core(rate: float) -> None:
    """``core_group`` 2 (two-core executors, as the driver derives it): the cores held are
    whole executors, never more executors than the core-by-core packing asks for."""
    topo, cluster = _job(), capacity_cluster(8, 2)
    params = {"latency_target_ms": 2000.0, "share_cores": True}
    p0 = initial_plan("elastic", topo, cluster, params=params)
    held = {}
    for group in (None, 2):
        pol = make_policy("elastic", topo, cluster, params={**params, "core_group": group}, seed=1)
        d = pol.decide(_observed(rate), p0, 10.0)
        held[group] = held_cores((d.plan or p0).allocation)
    assert held[2] % 2 == 0
    assert held[2] <= 2 * math.ceil(held[None] / 2)
    assert held[2] >= 2 * math.ceil(rate / 50.0 / 2 / 0.9 - 1e-9)  # the work, at the bound


def test_batch_headroom_hand_checked() -> None:
    # a cycle of F / (1 - u) is the target T at u = 1 - F/T
    for f, t in ((0.5, 2.0), (0.6, 2.0), (0.2, 1.0)):
        u = batch_headroom(f, t)
        assert f / (1.0 - u) == pytest.approx(t)
    # an overhead of half the target or more: a cycle of 2F, half of it work
    assert batch_headroom(1.0, 2.0) == batch_headroom(5.0, 2.0) == 0.5
    assert batch_headroom(0.0, 2.0) == batch_headroom(0.7, 0.0) == 1.0


@pytest.mark.parametrize("name", ["elastic", "proportional"])
def test_policy_leaves_each_batch_its_fixed_cost(name: str) -> None:
    """At 100 t/s the eight units carry 0.25 cores each. With no batch overhead they pack
    three to a core at 0.9 (3 cores). A 0.8 s fixed cost per batch against a 2 s trigger
    leaves 0.6 of every cycle to work, less than 0.9: two units per core, 4 cores."""
    topo, cluster = _job(), capacity_cluster(8, 2)
    params = {"latency_target_ms": 2000.0, "share_cores": True}
    p0 = initial_plan(name, topo, cluster, params=params)

    def held(overhead: float) -> int:
        pol = make_policy(name, topo, cluster, params=params, seed=1)
        d = pol.decide(_observed(100.0, overhead_s=overhead, cycle_s=2.0), p0, 10.0)
        assert d.figures["batch_headroom"] == pytest.approx(batch_headroom(overhead, 2.0), 1e-3)
        return held_cores((d.plan or p0).allocation)

    assert [held(0.0), held(0.8)] == [3, 4]


def test_elastic_splits_an_executor_whose_core_would_stretch_every_batch() -> None:
    """At 300 t/s each instance carries 0.75 cores. A 1.2 s overhead on a 2 s trigger
    aims at a 2.4 s cycle with half of it work: one core at 0.75 would settle at
    1.2 / (1 − 0.75) = 4.8 s, so every executor gets ⌈0.75 / 0.5⌉ = 2 cores (eight more
    than the queueing model's one each), and its units, 0.375 each, hold a core each."""
    topo, cluster = _job(), capacity_cluster(8, 2)
    params = {"latency_target_ms": 2000.0, "share_cores": True}
    p0 = initial_plan("elastic", topo, cluster, params=params)
    pol = make_policy("elastic", topo, cluster, params=params, seed=1)
    d = pol.decide(_observed(300.0, overhead_s=1.2, cycle_s=2.0), p0, 10.0)
    assert d.plan is not None
    assert all(d.plan.allocation.cores[f"calc[{e}]"] == 2 for e in range(8))
    assert d.figures["allocator:queueing.cycle_floor_cores"] == 8
    assert held_cores(d.plan.allocation) == 16
    # without batch figures (a simulator's snapshot) one core each is enough for the model
    same = make_policy("elastic", topo, cluster, params=params, seed=1).decide(
        _observed(300.0), p0, 10.0
    )
    plan = same.plan or p0
    assert all(plan.allocation.cores[f"calc[{e}]"] == 1 for e in range(8))


def _shared_policy(name: str) -> tuple[Plan, Any]:
    """The initial plan and a fresh policy with shared cores on 8 executors × 2 cores."""
    topo, cluster = _job(), capacity_cluster(8, 2)
    params = {"latency_target_ms": 2000.0, "share_cores": True}
    return initial_plan(name, topo, cluster, params=params), make_policy(
        name, topo, cluster, params=params, seed=1
    )


@pytest.mark.parametrize("name", ["elastic", "proportional"])
def test_a_batch_that_processed_nothing_keeps_the_cores_held(name: str) -> None:
    """A query's first batch often admits no tuple while the source already offers 100 t/s
    and a few wait: no service rate is measured, and the cores of no work measured
    (planned from the topology's nominal cost, 0.07 cores in a surge run) released three
    of four executors just before the first batches of tuples ran on cold executors."""
    p0, pol = _shared_policy(name)
    empty = Snapshot.build(
        time=3.4,
        operators={"gen": OperatorStats(0.0, 100.0), "calc": OperatorStats(100.0, 0.0, None, 17.0)},
        shards=[ShardStats("calc", g, 0.0, 0, 0) for g in range(32)],
    )
    d = pol.decide(empty, p0, 3.4)
    assert held_cores((d.plan or p0).allocation) == held_cores(p0.allocation) == 8


@pytest.mark.parametrize("name", ["elastic", "proportional"])
def test_units_are_sized_for_the_offered_rate_not_the_processed_one(name: str) -> None:
    """300 t/s offered while the batch processed only 150 (its shards' load: 3 cores of
    20 ms tuples). Sized from the processed load, eight units of 0.375 cores pack two to
    a core at 0.9: 4 cores, and the backlog grows. Sized for the offered 6 cores, each
    unit carries 0.75 and no two fit one core: 8 (first-fit decreasing by hand)."""
    p0, pol = _shared_policy(name)
    lagging = Snapshot.build(
        time=10.0,
        operators={"gen": OperatorStats(0.0, 300.0), "calc": OperatorStats(300.0, 150.0, 50.0)},
        shards=[ShardStats("calc", g, 3.0 / 32, 10, 1000) for g in range(32)],
    )
    d = pol.decide(lagging, p0, 10.0)
    assert held_cores((d.plan or p0).allocation) == 8
    assert d.figures["offered_work_cores"] == {"calc": 6.0}
    # what the processed load alone gave: the same snapshot with 150 t/s offered
    steady = pol.decide(_observed(150.0), p0, 10.0)
    assert held_cores((steady.plan or p0).allocation) == 4
