"""Fast paths of the elastic-plan glue: routing without balancing, shard-record ingestion."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.model import (
    Cluster,
    Edge,
    Node,
    Operator,
    OperatorStats,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning.balancing.shard_balance import balance_shards, imbalance, task_loads
from streamscale.planning.elastic_plan import (
    assemble,
    instance_loads,
    keyed_instances,
    route,
    table_delta,
    table_to_tasks,
    tasks_to_table,
)


def _topo(shards: int = 16) -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source", rate=1000.0),
            Operator("a", key="k", cost_ms=1.0, instances=3, shards=shards, state_bytes=4800),
            Operator("b", key="k", cost_ms=2.0, instances=2, shards=shards, state_bytes=3200),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "a"), Edge("a", "b"), Edge("b", "out")],
    )


def _cluster() -> Cluster:
    return Cluster.build([Node("n1", cores=4), Node("n2", cores=4)])


def test_table_delta_matches_imbalance() -> None:
    w = np.array([0.1, 0.3, 0.2, 0.0])
    assert table_delta(w, [0, 1, 1, 0], 2) == pytest.approx(
        imbalance(task_loads(w, [0, 1, 1, 0], 2))
    )
    assert table_delta(w, [0, None, 1, 0], 2) is None
    assert table_delta(w, [0, 2, 1, 0], 2) is None
    assert table_delta(np.zeros(4), [0, 0, 1, 1], 2) == 1.0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("theta", [1.05, 1.2, 2.0])
def test_route_equals_balancing_every_executor(seed: int, theta: float) -> None:
    rng = np.random.default_rng(seed)
    topo, cluster = _topo(), _cluster()
    insts = keyed_instances(topo, cluster)
    shards = []
    for op, e in (("a", 3), ("b", 2)):
        shards += [ShardStats(op, i, float(v), 1, 100) for i, v in enumerate(rng.random(e * 16))]
    snap = Snapshot.build(time=1.0, operators={}, shards=shards)
    loads = instance_loads(topo, insts, snap)
    cores = {info.instance: int(rng.integers(1, 4)) for info in insts}
    tables = {}
    for info in insts:
        # tables over 1..3 tasks: some executors lose tasks (orphans), some gain
        k0 = int(rng.integers(1, 4))
        tables[info.instance] = tasks_to_table(
            info.instance, rng.integers(0, k0, info.shards).tolist()
        )
    plan: Plan = assemble({}, {}, tables)
    got, results = route(plan, insts, loads, cores, theta=theta)
    for info in insts:
        cur = table_to_tasks(tables[info.instance], info.instance, info.shards, None)
        ref = balance_shards(
            loads[info.instance].shard_load, cur, cores[info.instance], theta=theta
        )
        assert got[info.instance] == tasks_to_table(info.instance, ref.tasks)
        assert results[info.instance].tasks == ref.tasks
        assert results[info.instance].moves == ref.moves
        assert results[info.instance].delta_after == pytest.approx(ref.delta_after)
    # the tables and δ a caller read already give the same routing, result for result
    known = {}
    for info in insts:
        cur = table_to_tasks(tables[info.instance], info.instance, info.shards, None)
        known[info.instance] = (
            cur,
            table_delta(loads[info.instance].shard_load, cur, cores[info.instance]),
        )
    assert route(plan, insts, loads, cores, theta=theta, known=known) == (got, results)


def test_route_applies_renames_on_the_fast_path() -> None:
    topo, cluster = _topo(shards=4), _cluster()
    insts = keyed_instances(topo, cluster)
    snap = Snapshot.build(time=1.0, operators={}, shards=[])
    loads = instance_loads(topo, insts, snap)
    inst = insts[0].instance
    plan = assemble({}, {}, {inst: tasks_to_table(inst, [0, 2, 0, 2])})
    cores = {info.instance: 2 for info in insts}
    # unit 2 renamed to 1: balanced already, yet the table must name the new unit
    got, _ = route(plan, insts, loads, cores, {inst: [0, None, 1]}, theta=1.2)
    assert got[inst] == (f"{inst}#0", f"{inst}#1", f"{inst}#0", f"{inst}#1")


def test_shard_records_in_any_order() -> None:
    topo, cluster = _topo(shards=2), _cluster()
    insts = keyed_instances(topo, cluster)
    ops = {"a": OperatorStats(100.0, 100.0, 1000.0), "b": OperatorStats(100.0, 100.0, 500.0)}
    recs = [ShardStats("a", i, 0.01 * (i + 1), 1, 10 * i) for i in range(6)]
    recs += [ShardStats("b", i, 0.02 * (i + 1), 1, 7 * i) for i in range(4)]
    rng = np.random.default_rng(0)
    mixed = [recs[i] for i in rng.permutation(len(recs))]
    a = instance_loads(topo, insts, Snapshot.build(time=1.0, operators=ops, shards=recs))
    b = instance_loads(topo, insts, Snapshot.build(time=1.0, operators=ops, shards=mixed))
    for inst, ld in a.items():
        np.testing.assert_allclose(ld.shard_load, b[inst].shard_load)
        np.testing.assert_array_equal(ld.shard_bytes, b[inst].shard_bytes)
    assert a["b[1]"].shard_load.tolist() == pytest.approx([0.06, 0.08])
    assert a["a[2]"].shard_bytes.tolist() == [40, 50]
