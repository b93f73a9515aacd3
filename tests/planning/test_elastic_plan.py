from __future__ import annotations

import numpy as np
import pytest

from streamscale.errors import ModelError
from streamscale.model import (
    Cluster,
    Edge,
    Node,
    Operator,
    OperatorStats,
    Placement,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning.elastic_plan import (
    fill_assignment,
    instance_loads,
    keyed_instances,
    placement_matrix,
    realize_units,
    table_to_tasks,
    tasks_to_table,
    trim_cores,
)
from tests.planning import _reference as ref


def _topo(instances: int = 2, shards: int = 4) -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source", rate=1000.0),
            Operator("op", key="k", cost_ms=1.0, instances=instances, shards=shards,
                     state_bytes=8000, tuple_bytes=100),
            Operator("free", cost_ms=1.0),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "op", tuple_bytes=50), Edge("op", "free"), Edge("free", "out")],
    )  # fmt: skip


def test_executors_and_homes() -> None:
    cluster = Cluster.build([Node("a", cores=8), Node("b", cores=4)])
    insts = keyed_instances(_topo(instances=3), cluster)
    assert [e.instance for e in insts] == ["op[0]", "op[1]", "op[2]"]  # non-keyed skipped
    assert [e.home for e in insts] == ["a", "b", "a"]  # proportional to cores


def test_loads_from_snapshot_and_model() -> None:
    topo = _topo()
    cluster = Cluster.uniform(2, cores=2)
    insts = keyed_instances(topo, cluster)
    model = instance_loads(topo, insts, None)
    assert model["op[0]"].load == pytest.approx(0.5)  # 1000 t/s × 1 ms over 2 executors
    assert model["op[0]"].arrival == pytest.approx(500.0)
    assert model["op[0]"].state == 4000
    assert model["op[0]"].bytes_rate == pytest.approx(500 * 50 + 500 * 100)
    snap = Snapshot.build(
        operators={"op": OperatorStats(1000.0, 1000.0, 2000.0)},
        shards=[ShardStats("op", s, 0.1 * s, 1, 10 * s) for s in range(8)],
    )
    obs = instance_loads(topo, insts, snap)
    assert obs["op[1]"].shard_load.tolist() == pytest.approx([0.4, 0.5, 0.6, 0.7])
    assert obs["op[1]"].arrival == pytest.approx(2.2 * 2000.0)
    assert obs["op[1]"].shard_bytes.tolist() == [40, 50, 60, 70]


def test_realize_units_keeps_ids_and_renames_on_same_node() -> None:
    topo = _topo(instances=1)
    insts = keyed_instances(topo, Cluster.uniform(2, cores=4))
    cur = Plan(placement=Placement({"op[0]#0": "n1", "op[0]#1": "n2", "op[0]#2": "n1"}))
    nodes = ["n1", "n2"]
    assert placement_matrix(cur, insts, nodes).tolist() == [[2], [1]]
    # one core fewer on n1: n1 keeps its lowest unit (0), unit 2 is released
    x = np.array([[1], [1]])
    place, ren = realize_units(cur, insts, x, nodes)
    assert place == {"op[0]#0": "n1", "op[0]#1": "n2"}
    assert ren["op[0]"] == [0, 1, None]
    # drop n2's core: unit 2 (n1) is renamed into the freed index 1, same node
    x = np.array([[2], [0]])
    place, ren = realize_units(cur, insts, x, nodes)
    assert place == {"op[0]#0": "n1", "op[0]#1": "n1"}
    assert ren["op[0]"] == [0, None, 1]
    table = ("op[0]#2", "op[0]#1", "op[0]#0", "op[0]#2")
    assert table_to_tasks(table, "op[0]", 4, ren["op[0]"]) == [1, None, 0, 1]
    assert table_to_tasks(None, "op[0]", 2, None) == [None, None]
    assert tasks_to_table("op[0]", [1, 0]) == ("op[0]#1", "op[0]#0")


def test_fill_assignment_and_trim() -> None:
    x = fill_assignment(np.array([[1, 0], [1, 1]]), [1, 3], [2, 2], [0, 1])
    # executor 0 sheds its remote core (node 1); executor 1 fills home then elsewhere
    assert x.tolist() == [[1, 1], [0, 2]]
    assert trim_cores([3, 3], [2.9, 1.0], 4) == [3, 1]
    assert trim_cores([1, 1, 1], [5.0, 5.0, 5.0], 2) == [1, 1, 1]


def test_trim_takes_cores_from_executors_without_a_queue_first() -> None:
    # executor 0 is throttled: 0.9 core-seconds of work queued (≥ 0.05 s per core),
    # its observed load (0.95 cores) held down by its own cores; executor 1 shows
    # more load but nothing waits at it
    assert trim_cores([2, 2], [0.95, 1.2], 3, [0.9, 0.0]) == [2, 1]
    # observed load alone would starve the queued executor
    assert trim_cores([2, 2], [0.95, 1.2], 3, [0.0, 0.0]) == [1, 2]
    # a few queued tuples (below wait_s per core) are noise, not throttling
    assert trim_cores([2, 2], [0.95, 1.2], 3, [0.01, 0.0]) == [1, 2]
    # when every executor queues, utilisation decides again
    assert trim_cores([3, 3], [2.9, 1.0], 4, [0.5, 0.8]) == [3, 1]
    # executors without a queue go down to one core before a queued one loses any
    assert trim_cores([3, 3, 3], [0.1, 0.1, 0.1], 5, [0.0, 0.0, 0.5]) == [1, 1, 3]


def _queued_at_executor_1() -> Snapshot:
    """Equal observed load on 8 shards; all 600 queued tuples wait at shards 4-7
    (executor 1's)."""
    return Snapshot.build(
        operators={"op": OperatorStats(1000.0, 1000.0, 1000.0, backlog=600.0)},
        shards=[
            ShardStats("op", s, 0.125, 1, 10, backlog=150.0 if s >= 4 else 0.0) for s in range(8)
        ],
    )


def test_catch_up_goes_to_the_executor_the_queue_waits_at() -> None:
    topo = _topo()
    insts = keyed_instances(topo, Cluster.uniform(2, cores=2))
    snap = _queued_at_executor_1()
    loads = instance_loads(topo, insts, snap, catch_up_s=30.0)
    assert loads["op[0]"].backlog_rate == pytest.approx(0.0)
    assert loads["op[1]"].backlog_rate == pytest.approx(600.0 / 30.0)
    assert loads["op[1]"].queued == pytest.approx(600.0)
    assert loads["op[1]"].arrival == pytest.approx(500.0 + 20.0)


def test_no_nodes() -> None:
    with pytest.raises(ModelError):
        keyed_instances(_topo(), Cluster(()))


def _random_topology(rng: np.random.Generator) -> Topology:
    ops = [Operator("src", kind="source", rate=100.0)]
    edges = []
    prev = "src"
    for i in range(int(rng.integers(1, 4))):
        keyed = i == 0 or rng.random() < 0.7
        name = f"op{i}"
        ops.append(Operator(name, key="k" if keyed else None, instances=int(rng.integers(1, 40))))
        edges.append(Edge(prev, name))
        prev = name
    ops.append(Operator("out", kind="sink"))
    edges.append(Edge(prev, "out"))
    return Topology.build("r", ops, edges)


def test_executors_match_the_scanning_reference() -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        nodes = [
            Node(f"n{i}", cores=int(rng.choice([1, 2, 3, 4, 8, 16])))
            for i in range(int(rng.integers(1, 30)))
        ]
        cluster, topo = Cluster.build(nodes), _random_topology(rng)
        assert keyed_instances(topo, cluster) == ref.keyed_instances(topo, cluster)


def test_realize_units_matches_the_reference() -> None:
    rng = np.random.default_rng(5)
    for _ in range(60):
        topo = _random_topology(rng)
        cluster = Cluster.uniform(int(rng.integers(1, 12)), cores=4)
        insts = keyed_instances(topo, cluster)
        nodes = list(cluster.names)
        units = {}
        for info in insts:
            for t in rng.choice(12, int(rng.integers(0, 6)), replace=False).tolist():
                units[f"{info.instance}#{t}"] = str(rng.choice([*nodes, "gone"]))
        units["stray"] = nodes[0]
        cur = Plan(placement=Placement(units))
        x = rng.integers(0, 3, (len(nodes), len(insts)))
        assert realize_units(cur, insts, x, nodes) == ref.realize_units(cur, insts, x, nodes)


def test_latency_catch_up_sizes_for_the_larger_of_rate_and_backlog() -> None:
    topo = _topo()
    insts = keyed_instances(topo, Cluster.uniform(2, cores=2))
    snap = _queued_at_executor_1()
    # executor 1: 500 t/s arriving, its 600 queued tuples at 600 / 30 = 20 t/s: the rate
    # decides (draining would add them: 520); with a 1 s catch-up the queue decides (600)
    slow = instance_loads(topo, insts, snap, catch_up_s=30.0, catch_up_form="latency")
    assert slow["op[1]"].arrival == pytest.approx(500.0)
    fast = instance_loads(topo, insts, snap, catch_up_s=1.0, catch_up_form="latency")
    assert fast["op[1]"].arrival == pytest.approx(600.0)
    assert fast["op[0]"].arrival == pytest.approx(500.0)
    with pytest.raises(ValueError, match="catch_up_form"):
        instance_loads(topo, insts, snap, catch_up_s=1.0, catch_up_form="soon")
