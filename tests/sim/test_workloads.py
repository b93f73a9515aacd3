"""Workloads: seeded, pure per epoch, paper-shaped."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.errors import ModelError
from streamscale.sim.workloads import MicroBenchmark, StockExchange, key_shards, zipf_weights


def test_zipf_weights() -> None:
    w = zipf_weights(100, 0.5)
    assert w.sum() == pytest.approx(1.0)
    assert (np.diff(w) <= 0).all()
    assert w[0] / w[3] == pytest.approx(2.0)  # (4/1)^0.5
    assert np.allclose(zipf_weights(10, 0.0), 0.1)
    with pytest.raises(ModelError):
        zipf_weights(0, 1.0)


def test_key_shards_static_and_in_range() -> None:
    a = key_shards(10_000, 32, 256)
    assert a.min() >= 0 and a.max() < 32 * 256
    assert (a == key_shards(10_000, 32, 256)).all()
    # the instance part is the same whatever Z is: keys never change instance
    assert ((key_shards(1000, 8, 16) // 16) == (key_shards(1000, 8, 64) // 64)).all()


def test_micro_shuffles_omega_times_per_minute() -> None:
    wl = MicroBenchmark(nodes=2, cores=4, instances=2, shards=16, keys=500, omega=2, seed=3)
    d = wl.demand()
    v0, p0 = d.weights("calculator", 2, 16, 0.0)
    v1, p1 = d.weights("calculator", 2, 16, 14.9)
    v2, p2 = d.weights("calculator", 2, 16, 15.0)
    assert wl.shuffle_times(60.0) == [15.0, 45.0]
    assert v0 == v1 == 0 and v2 == 1
    assert np.array_equal(p0, p1) and not np.allclose(p0, p2)
    assert p2.sum() == pytest.approx(1.0)
    # pure: another instance with the same seed gives the same permutation
    _, q2 = (
        MicroBenchmark(nodes=2, cores=4, instances=2, shards=16, keys=500, omega=2, seed=3)
        .demand()
        .weights("calculator", 2, 16, 30.0)
    )
    assert np.array_equal(p2, q2)
    with pytest.raises(ModelError):
        MicroBenchmark(omega=-1)


def test_micro_topologies() -> None:
    wl = MicroBenchmark()
    calc = wl.topology().operator("calculator")
    assert (calc.instances, calc.shards, calc.state_bytes) == (32, 256, 256 * 1024 * 1024)
    static = wl.static_topology().operator("calculator")
    assert static.instances == 256 and static.instances * static.shards == 8192
    assert wl.cluster().total_cores == 256


def test_stock_exchange_shape_and_dynamics() -> None:
    wl = StockExchange(nodes=4, cores=4, instances=4, shards=8, stocks=300, seed=1)
    topo = wl.topology()
    assert len(topo.processing) == 12
    assert len(topo.outputs("transactor")) == 11
    s0, s1 = wl.shares(0), wl.shares(1)
    assert s0.sum() == pytest.approx(1.0) and s1.sum() == pytest.approx(1.0)
    assert not np.allclose(s0, s1)
    assert np.allclose(
        wl.shares(7),
        StockExchange(nodes=4, cores=4, instances=4, shards=8, stocks=300, seed=1).shares(7),
    )
    # popularity shifts: the top stock is not always the same
    tops = {int(np.argmax(wl.shares(e))) for e in range(0, 60, 5)}
    assert len(tops) > 1
    static = wl.static_topology()
    assert sum(op.instances for op in static.processing) <= wl.nodes * wl.cores
    # no per-operator cost knowledge: every operator gets the same instances
    assert len({op.instances for op in static.processing}) == 1
    big = StockExchange(nodes=8, cores=8, instances=4, shards=8, stocks=300, seed=1)
    oracle = big.static_topology(sized_by_cost=True)
    assert oracle.operator("vwap").instances > oracle.operator("halt").instances


def test_capacity_and_hot_shard_ceiling() -> None:
    wl = MicroBenchmark(nodes=2, cores=4, instances=2, shards=4, keys=8, alpha=0.0)
    assert wl.capacity() == pytest.approx(8000.0)
    # 8 equally popular keys over 8 shards: the hottest shard holds at least 1/8
    p = wl._w.shard_weights(2, 4, 0, wl.frequencies(0))
    assert wl.hot_shard_ceiling(10.0) == pytest.approx(1000.0 / p.max())
    assert wl.hot_shard_ceiling(10.0) <= 8000.0
    # more skew, lower ceiling
    skewed = MicroBenchmark(nodes=2, cores=4, instances=2, shards=4, keys=8, alpha=1.5)
    assert skewed.hot_shard_ceiling(10.0) < wl.hot_shard_ceiling(10.0)
    sse = StockExchange(nodes=2, cores=4, instances=2, shards=8, stocks=100)
    assert sse.capacity() == pytest.approx(8 * 1000.0 / (0.1 + 0.6 * (6 * 0.25 + 5 * 0.05)))
    # the hottest shard is a fraction of the orders: above one core of vwap (0.6 × 0.25 ms)
    assert sse.hot_shard_ceiling(6.0) > 1000.0 / 0.15


def test_finite_rate_ramps_up_over_ramp_s() -> None:
    d = MicroBenchmark(nodes=1, cores=2, instances=1, shards=4, keys=8, rate=1000.0, ramp_s=4.0)
    demand = d.demand()
    assert demand.rate("generator", 0.0) == 0.0
    assert demand.rate("generator", 2.0) == pytest.approx(500.0)
    assert demand.rate("generator", 9.0) == pytest.approx(1000.0)
    saturating = MicroBenchmark(nodes=1, cores=2, instances=1, shards=4, keys=8, ramp_s=4.0)
    assert saturating.demand().rate("generator", 0.0) == float("inf")
