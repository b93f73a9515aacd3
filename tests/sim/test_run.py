"""The control loop drives the simulator through the shared policies on the simulated clock."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamscale.control.policies import initial_plan, make_policy
from streamscale.sim.run import quantile, simulate
from streamscale.sim.state import LATENCY_BINS
from streamscale.sim.workloads import MicroBenchmark


def _wl() -> MicroBenchmark:
    return MicroBenchmark(nodes=2, cores=4, instances=2, shards=32, keys=2000, omega=6, seed=2)


@pytest.mark.parametrize("name", ["static", "elastic", "rc"])
def test_policies_run_on_the_simulator(name: str) -> None:
    wl = _wl()
    topo = wl.static_topology() if name == "static" else wl.topology()
    cluster = wl.cluster()
    policy = make_policy(name, topo, cluster, params={"latency_target_ms": 0.5})
    res = simulate(
        topo,
        cluster,
        wl.demand(),
        policy,
        initial_plan(name, topo, cluster),
        duration_s=6.0,
        warmup_s=2.0,
        seed=1,
    )
    assert res.decisions > 0
    assert len(res.samples) == 8
    assert 0 < res.throughput <= 8 * 1000 * 1.1  # never above the cluster's cores
    assert res.mean_latency_ms >= 1.0 * 0.9  # at least one service time
    if name == "static":
        assert res.applied == 0 and res.shard_moves == 0
    else:
        assert res.applied > 0 and res.shard_moves > 0
        assert max(s.cores for s in res.samples) > 2


def test_quantile_of_histogram() -> None:
    h = np.zeros(LATENCY_BINS.size + 1)
    h[100] = 99
    h[200] = 1
    assert LATENCY_BINS[99] <= quantile(h, 0.5) <= LATENCY_BINS[100]
    assert LATENCY_BINS[99] <= quantile(h, 0.99) <= LATENCY_BINS[100]
    assert LATENCY_BINS[199] <= quantile(h, 0.999) <= LATENCY_BINS[200]
    assert math.isnan(quantile(np.zeros(3), 0.5))


def test_waiting_at_a_throttled_source_counts_in_latency() -> None:
    # 2 static cores at 1 ms serve 2000 t/s; the source offers 3000 t/s, so its
    # backlog grows by 3000 − X t/s (X served); by Little's law the tuple-seconds
    # waited per tuple emitted are ∫(3000 − X)t dt / XT = (3000 − X)T / 2X (T/4 at X = 2000)
    wl = MicroBenchmark(
        nodes=1, cores=2, instances=2, shards=4, keys=2000, alpha=0.0, rate=3000.0, seed=2
    )
    topo = wl.static_topology()
    cluster = wl.cluster()
    policy = make_policy("static", topo, cluster)
    res = simulate(
        topo,
        cluster,
        wl.demand(),
        policy,
        initial_plan("static", topo, cluster),
        duration_s=6.0,
        seed=4,
    )
    x = res.throughput
    assert x == pytest.approx(2000, rel=0.1)
    assert res.mean_latency_ms == pytest.approx((3000 - x) * 6.0 / (2 * x) * 1e3, rel=0.1)
    assert res.p99_ms > res.p50_ms > 1000.0
