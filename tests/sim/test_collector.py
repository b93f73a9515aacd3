"""The simulator's Collector reports snapshots with CONTRACTS.md semantics."""

from __future__ import annotations

import pytest

from streamscale.sim import SimConfig, Simulator
from streamscale.sim.collector import SimCollector
from streamscale.sim.realizer import SimRealizer
from tests.sim.helpers import Uniform, elastic_plan, two_stage


def _sim() -> Simulator:
    topo, cluster = two_stage()
    plan = elastic_plan(
        topo,
        {"op[0]": ["n1", "n1"], "op[1]": ["n2", "n2"]},
        {"op[0]": [0] * 4 + [1] * 4, "op[1]": [0] * 4 + [1] * 4},
    )
    return Simulator(topo, cluster, Uniform(2000.0), plan, config=SimConfig(), seed=5)


def test_snapshot_rates_loads_and_nodes() -> None:
    sim = _sim()
    col = SimCollector(sim, window_s=1.0)
    sim.run_until(1.0)
    col.record()
    sim.run_until(3.0)
    snap = col.collect(sim.now)
    assert snap.time == pytest.approx(3.0)
    op = snap.operators["op"]
    assert op.input_rate == pytest.approx(2000, rel=0.1)
    assert op.output_rate == pytest.approx(2000, rel=0.1)
    assert op.service_rate == pytest.approx(1000.0)
    assert snap.operators["src"].input_rate == pytest.approx(2000, rel=0.05)
    shards = snap.shards_of("op")
    assert [s.shard for s in shards] == list(range(16))
    assert sum(s.load for s in shards) == pytest.approx(2.0, rel=0.1)
    assert all(s.state_bytes == 32 * 1024 for s in shards)
    # no copy between 1 s and 2 s: the period is the 2 s since the record at 1 s
    assert sum(s.rows for s in shards) == pytest.approx(4000, rel=0.1)
    assert sum(n.cpu for n in snap.nodes.values()) == pytest.approx(200, rel=0.1)
    assert snap.edges["src->op"] == pytest.approx(2000, rel=0.05)


def test_window_is_the_last_window_s_seconds() -> None:
    sim = _sim()
    col = SimCollector(sim, window_s=1.0)
    sim.run_until(2.0)
    col.record()
    sim.run_until(2.5)
    col.record()
    sim.run_until(3.0)
    snap = col.collect(sim.now)
    # 1 s of traffic, not 3
    assert sum(s.rows for s in snap.shards) == pytest.approx(2000, rel=0.1)


def test_realizer_applies_and_reports_current() -> None:
    sim = _sim()
    real = SimRealizer(sim)
    topo = sim.topology
    new = elastic_plan(
        topo,
        {"op[0]": ["n1", "n2"], "op[1]": ["n2", "n2"]},
        {"op[0]": [1] * 8, "op[1]": [0] * 8},
    )
    real.apply(new, 0.0)
    assert real.current() == new
    sim.run_until(2.0)
    st = sim.ops["op"]
    assert (st.route == st.target).all()
    assert st.remote_moves == 8  # op[0]'s unit #1 moved to n2 with its 8 shards
