"""The Spark collector's snapshot from synthetic batch statistics (no Spark)."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.model import Cluster, Edge, Node, Operator, Topology
from streamscale.runtime.spark.driver.collector import SparkCollector
from streamscale.runtime.spark.driver.operator import BatchStats, TaskStats
from streamscale.runtime.spark.routing.realizer import SparkRealizer, default_plan


def _topo() -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source"),
            Operator("op", key="key", instances=2, shards=2),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "op", grouping="key"), Edge("op", "out")],
    )


def _task(p: int, unit: str, shards: dict[int, tuple[int, float, int, int]]) -> TaskStats:
    return TaskStats(
        partition=p,
        unit=unit,
        host="h",
        busy_s=sum(s[1] for s in shards.values()),
        rows=sum(s[0] for s in shards.values()),
        out_rows=sum(s[3] for s in shards.values()),
        shards=shards,
        latencies_ms=np.empty(0, dtype=np.float32),
    )


def test_snapshot_follows_the_contract() -> None:
    topo = _topo()
    cluster = Cluster.build([Node("a", cores=2), Node("b", cores=2)])
    realizer = SparkRealizer(topo, "op", default_plan(topo, "op", cluster))
    col = SparkCollector(topo, "op", cluster, realizer, start=0.0, backlog=lambda: 7.0)
    tasks = (
        _task(0, "op[0]#0", {0: (30, 0.3, 100, 30), 1: (10, 0.1, 50, 10)}),
        _task(1, "op[1]#0", {3: (20, 0.4, 80, 20)}),
    )
    col.observe(BatchStats(0, 1.0, tasks, dead_letters=2, partitions=2))
    snap = col.collect(2.0)
    assert snap.time == 2.0
    op = snap.operators["op"]
    # Arrivals: 60 rows + 2 dead letters taken, and 7 more waiting, over 2 s.
    assert op.input_rate == pytest.approx(34.5)
    assert op.output_rate == pytest.approx(30.0)
    assert op.service_rate == pytest.approx(60 / 0.8)
    assert op.backlog == 7.0
    loads = {s.shard: s for s in snap.shards}
    assert sorted(loads) == [0, 1, 2, 3]  # global shard indices, idle ones included
    assert loads[0].load == pytest.approx(0.15) and loads[0].rows == 30
    assert loads[3].state_bytes == 80 and loads[2].load == 0.0
    assert snap.edges == {"src->op": pytest.approx(34.5), "op->out": pytest.approx(30.0)}
    assert snap.nodes["a"].cpu == pytest.approx(20.0)  # 0.4 busy s over 2 s
    assert snap.nodes["b"].cpu == pytest.approx(20.0)
    # The next period starts empty but remembers state sizes.
    nxt = col.collect(3.0)
    assert nxt.operators["op"].input_rate == 0.0  # nothing taken, the backlog did not grow
    assert nxt.operators["op"].backlog == 7.0
    assert {s.shard: s.state_bytes for s in nxt.shards}[0] == 100


def test_one_interval_of_arrivals_is_the_next_batch_not_a_backlog() -> None:
    topo = _topo()
    cluster = Cluster.build([Node("a", cores=2)])
    realizer = SparkRealizer(topo, "op", default_plan(topo, "op", cluster))
    waiting = [100.0]
    col = SparkCollector(
        topo, "op", cluster, realizer, start=0.0, backlog=lambda: waiting[0], interval_s=2.0
    )
    tasks = (_task(0, "op[0]#0", {0: (100, 1.0, 10, 100)}),)
    col.observe(BatchStats(0, 1.0, tasks, dead_letters=0, partitions=1))
    # 100 taken + 100 waiting over 4 s: 50 t/s; two seconds of it (100) is the next batch
    snap = col.collect(4.0)
    assert snap.operators["op"].input_rate == pytest.approx(50.0)
    assert snap.operators["op"].backlog == 0.0
    assert col.backlog == 100.0  # the raw count stays reported
    waiting[0] = 400.0  # the source outran the job: 300 more than one interval brings
    col.observe(BatchStats(1, 1.0, tasks, dead_letters=0, partitions=1))
    snap = col.collect(8.0)
    # arrivals: 100 taken + growth 300 over 4 s = 100 t/s; 400 − 2 s × 100 t/s wait beyond
    assert snap.operators["op"].input_rate == pytest.approx(100.0)
    assert snap.operators["op"].backlog == pytest.approx(200.0)


def test_realizer_applies_at_the_next_batch_boundary() -> None:
    topo = _topo()
    cluster = Cluster.build([Node("a", cores=4)])
    first = default_plan(topo, "op", cluster)
    realizer = SparkRealizer(topo, "op", first)
    assert realizer.begin_batch().units == ("op[0]#0", "op[1]#0")
    from tests.runtime.spark._policies import split_plan

    second = split_plan(topo, "op", 2)
    realizer.apply(second, 1.0)
    assert realizer.current() == second and realizer.active == first
    assert realizer.begin_batch().units == ("op[0]#0", "op[0]#1", "op[1]#0")
    assert realizer.active == second


def test_what_arrived_during_a_long_batch_is_the_next_batch_not_a_backlog() -> None:
    topo = _topo()
    cluster = Cluster.build([Node("a", cores=2)])
    realizer = SparkRealizer(topo, "op", default_plan(topo, "op", cluster))
    waiting = [0.0]
    col = SparkCollector(
        topo, "op", cluster, realizer, start=0.0, backlog=lambda: waiting[0], interval_s=2.0
    )
    tasks = (_task(0, "op[0]#0", {0: (600, 1.0, 10, 600)}),)
    col.observe(BatchStats(0, 6.0, tasks, dead_letters=0, partitions=1), now=6.0)
    col.collect(6.0)
    # a steady 100 t/s and 6 s batches: the batch ending at 12 s took the 600 that arrived
    # during the one before, and the 600 that arrived during it wait for the next
    waiting[0] = 600.0
    col.observe(BatchStats(1, 6.0, tasks, dead_letters=0, partitions=1), now=12.0)
    snap = col.collect(12.0)
    # arrivals: 600 taken + 600 of growth over 6 s = 200 t/s ... of which the 6 s batch
    # cycle's worth (1,200) covers the 600 waiting: no backlog (one 2 s interval's worth,
    # 400, would have left 200)
    assert snap.operators["op"].input_rate == pytest.approx(200.0)
    assert snap.operators["op"].backlog == 0.0
    # a batch admission cap that leaves 900 behind after a 3 s cycle at 200 t/s: 300 wait
    # beyond what arrived during the batch
    waiting[0] = 900.0
    col.observe(BatchStats(2, 3.0, tasks, dead_letters=0, partitions=1), now=15.0)
    snap = col.collect(15.0)
    # arrivals over 3 s: 600 taken + 300 of growth = 300 t/s; 900 - 3 s x 300 t/s = 0
    assert snap.operators["op"].input_rate == pytest.approx(300.0)
    assert snap.operators["op"].backlog == pytest.approx(0.0)


def test_graph_snapshot_carries_the_median_fixed_cost_of_recent_batches() -> None:
    """A batch's fixed cost is its wall time minus each keyed stage's longest task; the
    snapshot has the median of the last five with the trigger as the cycle aimed at."""
    from streamscale.runtime.spark.driver.graph_control import OVERHEAD_BATCHES, GraphCollector

    topo = _topo()
    cluster = Cluster.build([Node("a", cores=2), Node("b", cores=2)])
    realizer = SparkRealizer(topo, "op", default_plan(topo, "op", cluster))
    col = GraphCollector(topo, ("op",), cluster, {"op": realizer}, start=0.0, interval_s=2.0)
    assert col.collect(1.0).batch_overhead_s == 0.0  # no batch yet: unknown
    tasks = (
        _task(0, "op[0]#0", {0: (30, 0.3, 100, 30), 1: (10, 0.1, 50, 10)}),  # 0.4 s
        _task(1, "op[1]#0", {3: (20, 0.7, 80, 20)}),  # the longest: 0.7 s
    )
    stats = BatchStats(0, 1.0, tasks, dead_letters=0, partitions=2)
    # 1.5 s of wall time, 0.7 s of it the longest task: 0.8 s that more cores keep
    assert col.batch(1.5, {"op": stats}) == pytest.approx(0.8)
    assert col.batch(0.5, {"op": stats}) == 0.0  # never below 0
    assert col.batch(5.0, {"op": stats}) == pytest.approx(4.3)  # a cold batch
    snap = col.collect(2.0)
    assert snap.batch_overhead_s == pytest.approx(0.8) and snap.cycle_target_s == 2.0
    for wall in (1.0, 1.1, 1.2, 1.3, 1.4):  # five more: the first three drop out
        col.batch(wall, {"op": stats})
    assert OVERHEAD_BATCHES == 5
    assert col.collect(3.0).batch_overhead_s == pytest.approx(0.5)
