"""Registry adapters of the key-group balancers (paper 003) over the domain model."""

from __future__ import annotations

import pytest

from streamscale.errors import StreamscaleError
from streamscale.model import (
    Cluster,
    Edge,
    NodeStats,
    Operator,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
)
from streamscale.planning.registry import PlanningContext, get

NAMES = ("milp", "albic", "flux", "potc", "cola")


def _context(params: dict[str, object] | None = None) -> PlanningContext:
    topo = Topology.build(
        "pipe",
        [
            Operator("src", kind="source", rate=100.0),
            Operator("count", key="k", instances=2, shards=4),
            Operator("top", key="k", instances=1, shards=8),
            Operator("sink", kind="sink"),
        ],
        [Edge("src", "count", "key"), Edge("count", "top", "key"), Edge("top", "sink")],
    )
    cluster = Cluster.uniform(3, cores=4)
    shards = [
        ShardStats("count", g, load=0.2 + 0.1 * (g % 3), state_bytes=1000 * (g + 1))
        for g in range(8)
    ]
    shards += [ShardStats("top", g, load=0.1, state_bytes=500) for g in range(8)]
    traffic = [Traffic("count", g, "top", g, 50.0) for g in range(8)]
    traffic += [Traffic("count", g, "top", (g + 1) % 8, 1.0) for g in range(8)]
    snap = Snapshot.build(
        time=10.0, shards=shards, traffic=traffic, nodes={"n3": NodeStats(marked_for_removal=True)}
    )
    return PlanningContext(
        topology=topo, cluster=cluster, snapshot=snap, params=params or {}, seed=1
    )


@pytest.mark.parametrize("name", NAMES)
def test_adapter_routes_every_key_group_to_a_node_unit(name: str) -> None:
    ctx = _context({"max_migrations": 3, "deterministic_limit": 0.02, "time_limit_s": 10})
    res = get("balancer", name).adapter(ctx, Plan())
    plan = res.plan
    assert plan.allocation.cores["count"] == 3 and plan.allocation.cores["top"] == 3
    assert set(plan.routing.tables) == {"count[0]", "count[1]", "top[0]"}
    for inst, table in plan.routing.tables.items():
        op = inst.split("[")[0]
        assert len(table) == (4 if op == "count" else 8)
        assert all(u.startswith(op + "#") and u in plan.placement.nodes for u in table)
    assert res.figures["key_groups"] == 16
    # Second round from the first plan: the diff is the migration count, within budget.
    again = get("balancer", name).adapter(ctx, plan)
    diff = plan.diff(again.plan)
    if name != "cola":
        assert len(diff.shard_moves) == again.figures["migrations"] <= 3
        moved_into_removed = [m for m in diff.shard_moves if m.dst_node == "n3"]
        assert not moved_into_removed


def test_needs_a_snapshot() -> None:
    ctx = _context()
    bare = PlanningContext(topology=ctx.topology, cluster=ctx.cluster)
    with pytest.raises(StreamscaleError, match="snapshot"):
        get("balancer", "milp").adapter(bare, Plan())


def test_bad_param_is_a_user_error() -> None:
    with pytest.raises(StreamscaleError, match="max_migrations"):
        get("balancer", "flux").adapter(_context({"max_migrations": "many"}), Plan())


def test_albic_pair_share_adds_pairs_within_its_budget() -> None:
    base = {"max_migrations": 4, "deterministic_limit": 0.02, "time_limit_s": 10}
    one = get("balancer", "albic").adapter(_context(base), Plan())
    many = get("balancer", "albic").adapter(
        _context({**base, "pair_share": 1.0, "max_load_distance_pct": 100.0}), Plan()
    )
    assert one.figures["new_pairs"] <= 1
    assert 1 < many.figures["new_pairs"] <= 4
    assert many.figures["migrations"] <= 4
    with pytest.raises(StreamscaleError, match="pair_share"):
        get("balancer", "albic").adapter(_context({"pair_share": 2.0}), Plan())
