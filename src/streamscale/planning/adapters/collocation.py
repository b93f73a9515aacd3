"""Balancer ``collocate``: traffic-aware routing of every keyed operator's shards.

The units are whatever the plan's placement holds: an instance ``op[e]`` with
units ``op[e]#i`` routes its own shards over them (a *pool* per instance); an
operator with operator-level units ``op#t`` (RC, paper 004's threads) routes
all its shards over those (one pool). Pools are routed operator by operator in
topological order, so a downstream shard sees where its upstream partner was
just routed; a partner not yet routed counts at its node in the current plan.
Partners come from ``Snapshot.traffic`` (shard → shard tuples/s); without traffic
this is plain load balancing that keeps shards where they are when it can.

Shard loads are ``context.loads`` (the instances' demand of this decision) when
given, else the snapshot's shard loads. Allocation and placement are unchanged.
See :func:`streamscale.planning.balancing.collocate.route_pool` for the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Plan, Routing, instance_id, instance_of
from streamscale.planning.adapters.elasticutor import SETTINGS
from streamscale.planning.balancing.collocate import route_pool
from streamscale.planning.balancing.keygroups import keyed_operators
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema

__all__ = ["COLLOCATE_SETTINGS", "collocate_step", "local_traffic_share"]

#: δ bound shared with Elasticutor's balancing (one declaration of ``theta``)
COLLOCATE_SETTINGS = Schema("balancer collocate", SETTINGS["theta"])

Key = tuple[str, int]


def _shard_loads(context: PlanningContext, op: str, n: int) -> list[float]:
    z = context.topology.operator(op).shards
    if context.loads is not None:
        out = [0.0] * n
        for e in range(n // z):
            ld = context.loads.get(instance_id(op, e))
            if ld is not None:
                out[e * z : (e + 1) * z] = [float(x) for x in ld.shard_load]
        return out
    out = [0.0] * n
    if context.snapshot is not None:
        for s in context.snapshot.shards_of(op):
            if 0 <= s.shard < n:
                out[s.shard] = s.load
    return out


def _node_of(plan: Plan, ops: tuple[str, ...], context: PlanningContext) -> dict[Key, str]:
    out: dict[Key, str] = {}
    for op_name in ops:
        op = context.topology.operator(op_name)
        for e in range(op.instances):
            table = plan.routing.tables.get(instance_id(op_name, e), ())
            for s, unit in enumerate(table):
                node = plan.placement.nodes.get(unit)
                if node is not None:
                    out[(op_name, e * op.shards + s)] = node
    return out


def _partners(context: PlanningContext, ops: set[str]) -> dict[Key, dict[Key, float]]:
    out: dict[Key, dict[Key, float]] = {}
    for t in context.snapshot.traffic if context.snapshot is not None else ():
        if t.src in ops and t.dst in ops and t.rate > 0:
            a, b = (t.src, t.src_shard), (t.dst, t.dst_shard)
            out.setdefault(a, {})[b] = out.setdefault(a, {}).get(b, 0.0) + t.rate
            out.setdefault(b, {})[a] = out.setdefault(b, {}).get(a, 0.0) + t.rate
    return out


def local_traffic_share(context: PlanningContext, plan: Plan) -> float | None:
    """Share of the snapshot's shard traffic whose two shards' units share a node."""
    ops = keyed_operators(context.topology)
    node = _node_of(plan, ops, context)
    total = local = 0.0
    for t in context.snapshot.traffic if context.snapshot is not None else ():
        a, b = node.get((t.src, t.src_shard)), node.get((t.dst, t.dst_shard))
        if a is None or b is None:
            continue
        total += t.rate
        local += t.rate if a == b else 0.0
    return local / total if total > 0 else None


def _pools(plan: Plan, op: str, instances: int) -> list[tuple[list[int], list[str]]]:
    """(instance indices, units) per pool of ``op``: one per instance, or one for all."""
    by_inst: dict[str, list[str]] = {}
    for u in plan.placement.nodes:
        by_inst.setdefault(instance_of(u), []).append(u)
    own = [sorted(by_inst.get(instance_id(op, e), ())) for e in range(instances)]
    if all(own):
        return [([e], own[e]) for e in range(instances)]
    shared = sorted(by_inst.get(op, ()))
    if shared:
        return [(list(range(instances)), shared)]
    missing = next(e for e in range(instances) if not own[e])
    raise StreamscaleError("no placed unit to route shards to", item=instance_id(op, missing))


@register(
    "balancer",
    "collocate",
    "shards to placed units, balanced (delta <= theta), communicating shards on one node",
    params=COLLOCATE_SETTINGS,
)
def collocate_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Traffic-aware routing (paper 003 §4.3.2's collocation over paper 000 §3.1's units).

    Examples
    --------
    ``up/g`` feeds only ``down/g``; each operator has one unit on each node, and the current
    tables cross the pairs (``up/0`` on ``n1``, ``down/0`` on ``n2``), so no traffic is local.
    The step routes ``up`` first, each shard to its partner's node, and ``down`` then stays
    where it is: every pair shares a node, and the units stay balanced (δ = 1).

    >>> from streamscale.model import (Allocation, Cluster, Edge, Operator, Placement, Plan,
    ...                                Routing, ShardStats, Snapshot, Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats(op, g, load=0.5) for op in ("up", "down") for g in (0, 1)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> plan = Plan(Allocation({"up[0]": 2, "down[0]": 2}),
    ...             Placement({"up[0]#0": "n1", "up[0]#1": "n2",
    ...                        "down[0]#0": "n1", "down[0]#1": "n2"}),
    ...             Routing({"up[0]": ("up[0]#0", "up[0]#1"),
    ...                      "down[0]": ("down[0]#1", "down[0]#0")}))
    >>> r = collocate_step(PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap), plan)
    >>> r.plan.routing.tables["up[0]"], r.plan.routing.tables["down[0]"]
    (('up[0]#1', 'up[0]#0'), ('down[0]#1', 'down[0]#0'))
    >>> f = r.figures
    >>> f["local_traffic_share_before"], f["local_traffic_share"], f["delta_after"]
    (0.0, 1.0, 1.0)
    """
    theta = COLLOCATE_SETTINGS.read(context.params)["theta"]
    ops = keyed_operators(context.topology)
    if not ops:
        raise StreamscaleError("no keyed operator to route", item=context.topology.name)
    partners = _partners(context, set(ops))
    node = _node_of(plan, ops, context)
    before = local_traffic_share(context, plan)
    tables: dict[str, tuple[str, ...]] = dict(plan.routing.tables)
    deltas: list[float] = []
    moves = 0
    for op_name in ops:
        op = context.topology.operator(op_name)
        z = op.shards
        loads = _shard_loads(context, op_name, op.instances * z)
        for insts, units in _pools(plan, op_name, op.instances):
            shards = [e * z + s for e in insts for s in range(z)]
            cur: list[str | None] = []
            for g in shards:
                table = plan.routing.tables.get(instance_id(op_name, g // z), ())
                cur.append(table[g % z] if len(table) == z else None)
            pref: list[str | None] = []
            for g in shards:
                near = partners.get((op_name, g), {})
                ranked = sorted(
                    ((r, k) for k, r in near.items() if k in node), key=lambda x: (-x[0], x[1])
                )
                pref.append(node[ranked[0][1]] if ranked else None)
            res = route_pool(
                [loads[g] for g in shards],
                units,
                plan.placement.nodes,
                preferred=pref,
                current=cur,
                theta=theta,
            )
            deltas.append(res.delta)
            moves += res.moves
            for e in insts:
                tables[instance_id(op_name, e)] = res.units[
                    insts.index(e) * z : (insts.index(e) + 1) * z
                ]
            for g, u in zip(shards, res.units, strict=True):
                node[(op_name, g)] = plan.placement.nodes[u]
    new = Plan(plan.allocation, plan.placement, Routing(dict(sorted(tables.items()))))
    figures: Mapping[str, Any] = {
        "shard_moves": moves,
        "delta_after": max(deltas),
        "theta": theta,
        "local_traffic_share_before": before,
        "local_traffic_share": local_traffic_share(context, new),
    }
    return StepResult(new, figures)
