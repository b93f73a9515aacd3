"""Backlog-aware sizing (DS2-style catch-up) and RC hysteresis of the control policies."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.control.policies import initial_plan, make_policy
from streamscale.errors import StreamscaleError
from streamscale.model import (
    Cluster,
    OperatorStats,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning.elastic_plan import backlog_rates, instance_loads, keyed_instances


def _snapshot(loads: np.ndarray, *, backlog: float = 0.0, source_backlog: float = 0.0) -> Snapshot:
    rate = float(loads.sum()) * 1000.0
    return Snapshot.build(
        time=1.0,
        operators={
            "gen": OperatorStats(rate, rate, None, source_backlog),
            "calc": OperatorStats(rate, rate, 1000.0, backlog),
        },
        shards=[ShardStats("calc", i, float(v), 10, 32768) for i, v in enumerate(loads)],
    )


def _even(cores: float) -> np.ndarray:
    return np.full(256, cores / 256)


def test_backlog_rates_hand_checked(topo: Topology) -> None:
    snap = _snapshot(_even(2.0), backlog=3000.0, source_backlog=6000.0)
    # own 3000 + visit ratio 1 × 6000 at the source, drained in 30 s
    assert backlog_rates(topo, snap, 30.0) == {"calc": pytest.approx(300.0)}
    assert backlog_rates(topo, _snapshot(_even(2.0)), 30.0) == {}
    assert backlog_rates(topo, None, 30.0) == {}


def test_backlog_spread_by_load(topo: Topology, cluster: Cluster) -> None:
    loads = _even(1.0)
    loads[:64] *= 3.0  # executor 0 carries half of the operator's load
    insts = keyed_instances(topo, cluster)
    plain = instance_loads(topo, insts, _snapshot(loads), catch_up_s=30.0)
    more = instance_loads(topo, insts, _snapshot(loads, backlog=6000.0), catch_up_s=30.0)
    assert more["calc[0]"].backlog_rate == pytest.approx(100.0)
    assert more["calc[1]"].backlog_rate == pytest.approx(100.0 / 3)
    for inst, ld in plain.items():
        assert ld.backlog_rate == 0.0
        assert more[inst].arrival == pytest.approx(ld.arrival + more[inst].backlog_rate)


@pytest.mark.parametrize("name", ["elastic", "naive-ec", "rc", "proportional"])
def test_backlog_raises_cores(topo: Topology, cluster: Cluster, name: str) -> None:
    params = {"latency_target_ms": 5}
    p0 = initial_plan(name, topo, cluster)
    loads = _even(6.0)
    base = make_policy(name, topo, cluster, params=params).decide(_snapshot(loads), p0, 1.0)
    own = make_policy(name, topo, cluster, params=params).decide(
        _snapshot(loads, backlog=120_000.0), p0, 1.0
    )
    src = make_policy(name, topo, cluster, params=params).decide(
        _snapshot(loads, source_backlog=120_000.0), p0, 1.0
    )
    assert base.plan is not None and own.plan is not None and src.plan is not None
    # 120 K tuples over 30 s = 4000 t/s more at μ = 1000/s: about four more cores
    assert own.plan.allocation.total >= base.plan.allocation.total + 3
    assert src.plan.allocation.total >= base.plan.allocation.total + 3


@pytest.mark.parametrize("name", ["elastic", "rc", "proportional"])
def test_no_backlog_no_change(topo: Topology, cluster: Cluster, name: str) -> None:
    loads = _even(4.0)
    loads[64:128] *= 2.0
    p0 = initial_plan(name, topo, cluster)
    a = make_policy(name, topo, cluster, params={"latency_target_ms": 5}, seed=2)
    b = make_policy(
        name, topo, cluster, params={"latency_target_ms": 5, "catch_up_s": 1e12}, seed=2
    )
    da, db = a.decide(_snapshot(loads), p0, 1.0), b.decide(_snapshot(loads), p0, 1.0)
    assert da.plan == db.plan


def _rc_setup(
    topo: Topology, cluster: Cluster, name: str = "rc-damped"
) -> tuple[object, object, np.ndarray]:
    pol = make_policy(name, topo, cluster, params={"latency_target_ms": 5})
    loads = _even(3.0)
    loads[64:128] *= 3.0
    d = pol.decide(_snapshot(loads), initial_plan("rc", topo, cluster), 1.0)
    assert d.plan is not None
    return pol, d, loads


def test_rc_rebalances_below_theta_low(topo: Topology, cluster: Cluster) -> None:
    _, d, _ = _rc_setup(topo, cluster)
    assert d.figures["balancer:rc.theta_low"] == pytest.approx(1.1)
    assert d.figures["balancer:rc.delta_after"] <= 1.1 + 1e-9


def test_rc_holds_when_delta_within_theta(topo: Topology, cluster: Cluster) -> None:
    pol, d, loads = _rc_setup(topo, cluster)
    plan = d.plan
    k = plan.allocation.cores["calc"]
    tables = [plan.routing.tables[f"calc[{e}]"] for e in range(4)]
    tasks = np.array([int(u.split("#")[1]) for t in tables for u in t])
    # raise the load of the busiest unit's shards so δ lands between θ_low and θ
    per = np.bincount(tasks, weights=loads, minlength=k)
    hot = int(np.argmax(per))
    noisy = loads.copy()
    scale = 1.15 * per.mean() / per[hot]
    noisy[tasks == hot] *= scale
    per2 = np.bincount(tasks, weights=noisy, minlength=k)
    delta = per2.max() / per2.mean()
    assert 1.1 < delta <= 1.2
    held = pol.decide(_snapshot(noisy), plan, 2.0)
    assert held.plan is None
    # past θ it repartitions, down to θ_low
    noisy[tasks == hot] *= 1.4
    moved = pol.decide(_snapshot(noisy), plan, 3.0)
    assert moved.plan is not None
    assert moved.figures["balancer:rc.delta_after"] <= 1.1 + 1e-9


def test_theta_low_validated(topo: Topology, cluster: Cluster) -> None:
    with pytest.raises(StreamscaleError, match="theta_low"):
        make_policy("rc-damped", topo, cluster, params={"theta": 1.2, "theta_low": 1.5})


def test_rc_balances_to_theta_as_elasticutor_does(topo: Topology, cluster: Cluster) -> None:
    # the paper's RC: same balancing algorithm as Elasticutor, down to θ, no hysteresis
    _, d, _ = _rc_setup(topo, cluster, "rc")
    assert d.figures["balancer:rc.theta_low"] == pytest.approx(1.2)
    assert d.figures["balancer:rc.delta_after"] <= 1.2 + 1e-9


def test_rc_repartitions_even_for_a_small_gain(topo: Topology, cluster: Cluster) -> None:
    pol = make_policy("rc", topo, cluster, params={"latency_target_ms": 5})
    p0 = initial_plan("rc", topo, cluster)
    hot = np.full(256, 1e-4)
    hot[5] = 3.0 - hot[1:].sum()
    moved = pol.decide(_snapshot(hot), p0, 2.0)
    assert moved.plan is not None
    assert moved.figures["balancer:rc.held_small_gain"] == 0


def test_rc_holds_when_moves_gain_little(topo: Topology, cluster: Cluster) -> None:
    pol = make_policy("rc-damped", topo, cluster, params={"latency_target_ms": 5})
    p0 = initial_plan("rc", topo, cluster)
    assert pol.decide(_snapshot(_even(3.0)), p0, 1.0).plan is None  # k stays 4
    # the same total load, nearly all of it in one shard: δ ≫ θ, but moving the
    # small shards off its unit lowers δ by almost nothing
    hot = np.full(256, 1e-4)
    hot[5] = 3.0 - hot[1:].sum()
    held = pol.decide(_snapshot(hot), p0, 2.0)
    assert held.plan is None
    assert held.figures["balancer:rc.held_small_gain"] == 1
    assert held.figures["balancer:rc.delta_before"] > 1.2


@pytest.mark.parametrize(("name", "total"), [("elastic", 8), ("rc", 6)])
def test_backlog_bounds_utilization(
    topo: Topology, cluster: Cluster, name: str, total: int
) -> None:
    # every executor at ρ = 0.95: a loose latency target keeps one core each
    params = {"latency_target_ms": 50}
    p0 = initial_plan(name, topo, cluster)
    loads = _even(4 * 0.95)
    calm = make_policy(name, topo, cluster, params=params).decide(_snapshot(loads), p0, 1.0)
    assert calm.plan is None or calm.plan.allocation.total == 4
    # a backlog (however small) means back-pressure: ⌈1.2 · 0.95 / 0.9⌉ = 2 per
    # executor; rc pools the operator: ⌈1.2 · 3.8 / 0.9⌉ = 6 units
    busy = make_policy(name, topo, cluster, params=params).decide(
        _snapshot(loads, backlog=10.0), p0, 1.0
    )
    assert busy.plan is not None and busy.plan.allocation.total == total
    assert busy.figures["allocator:queueing.utilization_floor_cores"] == total - 4
