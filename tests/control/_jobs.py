"""Small jobs for the placement policies: two keyed operators sharing a key, chained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamscale.model import (
    Cluster,
    Edge,
    Node,
    NodeStats,
    Operator,
    OperatorStats,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
    instance_id,
    instance_of,
)


def chain(
    *,
    instances: int = 1,
    shards: int = 4,
    nodes: int = 4,
    cores: int = 2,
    rate: float | None = 1000.0,
) -> tuple[Topology, Cluster]:
    """src → a → b → snk; ``a`` and ``b`` keyed by the same field with the same E and Z
    (``rate`` None: the source declares none, as on a running Spark job)."""
    ops = [
        Operator("src", kind="source", rate=rate, tuple_bytes=100),
        Operator("a", cost_ms=1.0, key="k", instances=instances, shards=shards, tuple_bytes=100),
        Operator("b", cost_ms=1.0, key="k", instances=instances, shards=shards, tuple_bytes=100),
        Operator("snk", kind="sink"),
    ]
    edges = [Edge("src", "a", "key"), Edge("a", "b", "key"), Edge("b", "snk")]
    cluster = Cluster.build(Node(f"executor-{i}", cores=cores) for i in range(nodes))
    return Topology.build("chain", ops, edges), cluster


def snapshot(
    loads_a: Sequence[float],
    loads_b: Sequence[float],
    *,
    rate: float = 1000.0,
    traffic: float | None = None,
    nodes: Mapping[str, float] | None = None,
) -> Snapshot:
    """Shard loads (cores) of ``a`` and ``b``; diagonal traffic ``a/g → b/g`` (tuples/s each)."""
    n = len(loads_a)
    per = rate / n if traffic is None else traffic
    return Snapshot.build(
        time=1.0,
        operators={
            "src": OperatorStats(0.0, rate),
            "a": OperatorStats(rate, rate, 1000.0),
            "b": OperatorStats(rate, rate, 1000.0),
        },
        shards=[ShardStats("a", g, x, 10, 1000) for g, x in enumerate(loads_a)]
        + [ShardStats("b", g, x, 10, 1000) for g, x in enumerate(loads_b)],
        traffic=[Traffic("a", g, "b", g, per) for g in range(n)] if per > 0 else [],
        nodes={k: NodeStats(cpu=v) for k, v in (nodes or {}).items()},
    )


def shard_node(plan: Plan, topo: Topology, op: str, g: int) -> str:
    """The node that serves global shard ``g`` of ``op`` under ``plan``."""
    z = topo.operator(op).shards
    unit = plan.routing.tables[instance_id(op, g // z)][g % z]
    return plan.placement.nodes[unit]


def units_per_node(plan: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in plan.placement.nodes.values():
        out[node] = out.get(node, 0) + 1
    return out


def settle(policy: object, snap: Snapshot, plan: Plan, rounds: int = 30) -> tuple[Plan, int]:
    """Decide until the policy asks for no change; the final plan and the decisions taken."""
    for i in range(rounds):
        d = policy.decide(snap, plan, float(i + 1))  # type: ignore[attr-defined]
        if d.plan is None:
            return plan, i
        plan = d.plan
    raise AssertionError(f"no fixed point within {rounds} decisions")


__all__ = ["chain", "instance_of", "settle", "shard_node", "snapshot", "units_per_node"]
