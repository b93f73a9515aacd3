"""Kernel validation: M/M/1 and M/M/k latency, conservation, migration protocols."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.errors import ModelError
from streamscale.model import Placement, Plan
from streamscale.sim import SimConfig, Simulator
from tests.sim.helpers import Uniform, elastic_plan, station, two_stage


def _erlang_c_sojourn(k: int, lam: float, mu: float) -> float:
    a = lam / mu
    terms, t = [1.0], 1.0
    for i in range(1, k):
        t *= a / i
        terms.append(t)
    last = t * a / k * k / (k - a)
    return last / (sum(terms) + last) / (k * mu - lam) + 1.0 / mu


def _pollaczek_khinchine_sojourn(lam: float, mu: float, cv: float) -> float:
    rho = lam / mu
    return rho * (1.0 + cv * cv) / (2.0 * (mu - lam)) + 1.0 / mu


def _measure(
    keyed: bool, cores: int, lam: float, cost_ms: float, service: str, replicas: int = 100
) -> tuple[float, float]:
    """Mean sojourn by Little's law and by the latency histogram, at the reproduction's
    10 ms step, over ``replicas`` independent stations for 8 simulated seconds."""
    topo, cluster, plan = station(replicas, cores, cost_ms, keyed=keyed)
    cfg = SimConfig(dt=0.01, service=service, queue_capacity=1e9)  # type: ignore[arg-type]
    sim = Simulator(topo, cluster, Uniform(lam * replicas), plan, config=cfg, seed=3)
    sim.run_until(1.0)
    st = sim.ops["st"]
    i0, s0, l0, a0 = st.in_system_s, st.served.sum(), st.lat_sum, st.arrived.sum()
    sim.run_until(9.0)
    little = (st.in_system_s - i0) / (st.served.sum() - s0)
    hist = (st.lat_sum - l0) / (st.arrived.sum() - a0)
    return little, hist


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
@pytest.mark.parametrize("cost_ms", [1.0, 0.05])
def test_mm1_mean_latency_matches_analytic(rho: float, cost_ms: float) -> None:
    # the reproduction's operators cost 0.05–1 ms: 10–200 service times per step
    mu = 1000.0 / cost_ms
    lam = rho * mu
    expected = 1.0 / (mu - lam)
    # a fast operator completes 20× more tuples per station: fewer stations suffice
    little, hist = _measure(True, 1, lam, cost_ms, "exponential", 100 if cost_ms >= 1 else 30)
    assert little == pytest.approx(expected, rel=0.05)
    assert hist == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_mg1_mean_latency_matches_pollaczek_khinchine(rho: float) -> None:
    # the paper's per-tuple cost N(c, (0.5c)^2): mean sojourn by the P-K formula
    mu = 1000.0
    lam = rho * mu
    expected = _pollaczek_khinchine_sojourn(lam, mu, 0.5)
    little, hist = _measure(True, 1, lam, 1.0, "normal")
    assert little == pytest.approx(expected, rel=0.05)
    assert hist == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_mmk_mean_latency_matches_erlang_c(rho: float) -> None:
    k, mu = 4, 1000.0
    lam = rho * k * mu
    expected = _erlang_c_sojourn(k, lam, mu)
    little, hist = _measure(False, k, lam, 1.0, "exponential", replicas=40)
    assert little == pytest.approx(expected, rel=0.05)
    assert hist == pytest.approx(expected, rel=0.05)


def test_queue_capacity_in_time_scales_with_cost() -> None:
    topo, cluster, plan = station(1, 1, 0.05, keyed=True)
    sim = Simulator(topo, cluster, Uniform(1e9), plan, config=SimConfig(queue_s=0.1), seed=0)
    assert sim.capacity(sim.ops["st"]) == pytest.approx(2000.0)
    sim.run_until(1.0)
    # saturated at 20 K tuples/s with a queue of 0.1 s of work (2000 tuples), not 1000
    assert sim.ops["st"].q.sum() > 1500


def _ec_setup(rate: float = 2500.0) -> Simulator:
    topo, cluster = two_stage()
    plan = elastic_plan(
        topo,
        {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]},
        {"op[0]": [0] * 4 + [1] * 4, "op[1]": [0] * 4 + [1] * 4},
    )
    return Simulator(topo, cluster, Uniform(rate), plan, config=SimConfig(), seed=1)


def _check_conservation(sim: Simulator) -> None:
    for st in sim.ops.values():
        total_in = float(st.arrived.sum())
        total_out = float(st.served.sum())
        assert total_in == pytest.approx(total_out + st.backlog(), abs=1e-6 * max(total_in, 1))
        assert (st.q >= 0).all() and (st.buf >= 0).all()


def test_conservation_every_step_through_moves() -> None:
    sim = _ec_setup()
    topo = sim.topology
    rng = np.random.default_rng(0)
    for step in range(600):
        if step % 100 == 50:
            tab = {f"op[{e}]": rng.integers(0, 2, size=8).tolist() for e in range(2)}
            units = {"op[0]": ["n1", "n2"], "op[1]": ["n2", "n1"]}
            sim.apply(elastic_plan(topo, units, tab), sim.now)
        if step == 380:  # an operator-level (RC) repartitioning
            tab = {f"op[{e}]": [-1 - int(t) for t in rng.integers(0, 3, size=8)] for e in range(2)}
            plan = elastic_plan(topo, {}, tab)
            nodes = {"op#0": "n1", "op#1": "n2", "op#2": "n2"}
            sim.apply(Plan(plan.allocation, Placement(nodes), plan.routing), sim.now)
        sim.step()
        _check_conservation(sim)
    assert sim.ops["op"].completed_moves > 0


def _move_one(sim: Simulator, dst_node: str) -> None:
    topo = sim.topology
    units = {"op[0]": ["n1", "n1", dst_node], "op[1]": ["n2", "n2"]}
    tab = {"op[0]": [2] + [0] * 3 + [1] * 4, "op[1]": [0] * 4 + [1] * 4}
    sim.apply(elastic_plan(topo, units, tab), sim.now)


def test_shard_move_within_a_node_costs_no_transfer() -> None:
    sim = _ec_setup()
    sim.run_until(1.0)
    _move_one(sim, "n1")
    sim.run_until(3.0)
    st = sim.ops["op"]
    assert st.completed_moves == 1
    assert st.transfer_s == 0.0
    assert sim.migrated.sum() == 0.0


def test_remote_shard_move_takes_bytes_over_bandwidth() -> None:
    sim = _ec_setup()
    sim.run_until(1.0)
    _move_one(sim, "n2")
    sim.run_until(3.0)
    st = sim.ops["op"]
    assert st.completed_moves == 1
    expected = 32 * 1024 / (100e6 / 8)
    # transfer completes at the first step boundary after bytes / bandwidth
    assert expected <= st.transfer_s <= expected + sim.config.dt
    assert sim.migrated.sum() == 32 * 1024


def test_elastic_pauses_one_shard_rc_pauses_the_operator() -> None:
    sim = _ec_setup()
    sim.run_until(1.0)
    _move_one(sim, "n2")
    sim.step()
    st = sim.ops["op"]
    assert np.count_nonzero(st.phase) == 1 and not st.rc_active
    before = st.q.copy()
    sim.step()
    others = np.arange(st.shards) != 0
    assert st.buf[others].sum() == 0.0  # the other shards keep receiving
    assert not np.allclose(st.q[others], before[others])

    rc = _ec_setup()
    rc.run_until(1.0)
    tab = {"op[0]": [-1] * 7 + [-2], "op[1]": [-2] * 8}
    plan = elastic_plan(rc.topology, {}, tab)
    rc.apply(Plan(plan.allocation, Placement({"op#0": "n1", "op#1": "n2"}), plan.routing), 1.0)
    rc.step()
    st = rc.ops["op"]
    assert st.rc_active
    start = rc.now
    held = st.buf.sum()
    rc.step()
    assert st.buf.sum() > held  # every shard's input is held upstream
    rc.run_until(5.0)
    assert not st.rc_active and st.buf.sum() == 0.0
    (a, b), *_ = st.reconfigurations
    # the global sync costs rc_sync_s per upstream instance (4 here) plus
    # rc_sync_shard_s per moved shard (all 16 change unit)
    cfg = rc.config
    assert st.shard_moves == 16
    assert b - a >= 4 * cfg.rc_sync_s + 16 * cfg.rc_sync_shard_s - 1e-9
    assert a <= start


def test_backpressure_bounds_queues() -> None:
    sim = _ec_setup(rate=1e9)
    sim.run_until(2.0)
    st = sim.ops["op"]
    queued = np.bincount(st.route, st.q + st.buf, minlength=len(st.pools))
    # Poisson arrivals may overshoot the bound by a few tuples in a step
    assert queued.max() <= sim.config.queue_capacity * 1.2
    # saturated: all four cores busy ⇒ throughput ≈ 4000 tuples/s
    assert st.served.sum() / 2.0 == pytest.approx(4000, rel=0.1)


def test_bad_plan_names_the_instance() -> None:
    topo, cluster = two_stage()
    with pytest.raises(ModelError, match=r"op\[1\]"):
        Simulator(
            topo, cluster, Uniform(1.0), elastic_plan(topo, {"op[0]": ["n1"]}, {"op[0]": [0] * 8})
        )


def test_concurrent_transfers_share_the_nic() -> None:
    sim = _ec_setup()
    sim.run_until(1.0)
    topo = sim.topology
    units = {"op[0]": ["n1", "n1", "n2"], "op[1]": ["n2", "n2"]}
    tab = {"op[0]": [2, 2] + [0] * 2 + [1] * 4, "op[1]": [0] * 4 + [1] * 4}
    sim.apply(elastic_plan(topo, units, tab), sim.now)
    sim.run_until(3.0)
    st = sim.ops["op"]
    assert st.completed_moves == 2
    one = 32 * 1024 / (100e6 / 8)
    # both labels sit behind the same queue, so both leave n1 together at half rate each
    assert 2 * one - 1e-9 <= st.transfer_s / 2 <= 2 * one + sim.config.dt
    assert sim.migrated.sum() == pytest.approx(2 * 32 * 1024)


def _held_release_setup() -> tuple[Simulator, float]:
    """Saturating sources; shard 0 moves to n2 with 8 MB of state over 100 Mbps
    (a 0.67 s pause), so it holds more tuples than its new task's queue takes."""
    topo, cluster = two_stage()
    plan = elastic_plan(
        topo,
        {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]},
        {"op[0]": [0] * 4 + [1] * 4, "op[1]": [0] * 4 + [1] * 4},
    )
    cfg = SimConfig(queue_capacity=20.0)
    sim = Simulator(topo, cluster, Uniform(3000.0), plan, config=cfg, seed=2)
    sim.ops["op"].shard_bytes[0] = 8e6
    return sim, 3000.0


def test_released_tuples_drain_through_the_bounded_queue_and_none_is_lost() -> None:
    sim, rate = _held_release_setup()
    st = sim.ops["op"]
    cap = sim.capacity(st)
    sim.run_until(1.0)
    _move_one(sim, "n2")
    peak_held = 0.0
    released = False
    for _ in range(300):
        sim.step()
        # tuples in = processed + queued + held, at the operator and at the source
        _check_conservation(sim)
        offered = rate * sim.now
        assert sim.emitted["src"] + sim.pending["src"] == pytest.approx(offered, rel=1e-9)
        # arrivals are Poisson around what the source emits (§4.1's M/M/k input)
        gap = abs(float(st.arrived.sum()) - sim.emitted["src"])
        assert gap <= 5 * np.sqrt(sim.emitted["src"])
        peak_held = max(peak_held, float(st.buf[0]))
        queued = np.bincount(st.route, st.q, minlength=len(st.pools))
        # the resumed shard's held tuples never overflow its task's queue
        assert queued.max() <= cap + 1e-6 + 3 * np.sqrt(cap)  # Poisson overshoot of a step
        released |= st.phase[0] == 0 and st.completed_moves == 1
    assert released
    assert peak_held > 3 * cap  # the pause held several queues' worth
    assert st.buf.sum() == pytest.approx(0.0, abs=1e-9)  # and all of it drained


def test_a_label_behind_a_fraction_of_a_tuple_is_reached() -> None:
    # fluid service leaves fractions of a tuple; a task whose shards all move
    # gets no new arrivals, so such dust must not hold the label back
    topo, cluster = two_stage()
    plan = elastic_plan(
        topo,
        {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]},
        {"op[0]": [0] * 4 + [1] * 4, "op[1]": [0] * 4 + [1] * 4},
    )
    sim = Simulator(topo, cluster, Uniform(0.0), plan, seed=0)
    st = sim.ops["op"]
    st.q[:4] = 1e-4
    units = {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]}
    sim.apply(elastic_plan(topo, units, {"op[0]": [1] * 8, "op[1]": [0] * 4 + [1] * 4}), 0.0)
    sim.run_until(0.05)
    assert st.completed_moves == 4
    assert st.q.sum() == pytest.approx(4e-4)  # the dust moved with its shards, not lost


def _waited(sim: Simulator) -> float:
    """Tuple-seconds spent in the operator plus held back at the source."""
    return sim.ops["op"].in_system_s + sum(sim.source_wait_s.values())


def test_rc_pause_is_counted_as_waiting() -> None:
    # a 1 s global sync (4 upstream instances × 0.25 s) at 2000 t/s offered on 4
    # cores: the tuples held upstream and at the source wait λ·P²/2 = 1000
    # tuple-seconds during the pause alone, and all of it shows in the latency
    runs = []
    for pause in (False, True):
        topo, cluster = two_stage()
        units = {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]}
        tab = {"op[0]": [0] * 4 + [1] * 4, "op[1]": [0] * 4 + [1] * 4}
        cfg = SimConfig(rc_sync_s=0.25, rc_sync_shard_s=0.0)
        sim = Simulator(
            topo, cluster, Uniform(2000.0), elastic_plan(topo, units, tab), config=cfg, seed=5
        )
        sim.run_until(1.0)
        if pause:
            rc = elastic_plan(topo, {}, {"op[0]": [-1, -2] * 4, "op[1]": [-3, -4] * 4})
            nodes = {"op#0": "n1", "op#1": "n1", "op#2": "n2", "op#3": "n2"}
            sim.apply(Plan(rc.allocation, Placement(nodes), rc.routing), sim.now)
        w0 = _waited(sim)
        sim.run_until(5.0)
        runs.append((_waited(sim) - w0, sim))
    (calm, _), (paused, sim) = runs
    st = sim.ops["op"]
    (a, b), *_ = st.reconfigurations
    assert b - a >= 1.0 - 1e-9
    assert paused - calm >= 2000.0 * (b - a) ** 2 / 2
    assert st.buf.sum() == pytest.approx(0.0, abs=1e-9)  # drained after the pause
