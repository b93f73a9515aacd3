"""``albic``: ALBIC (paper 003) as a live policy — key groups to nodes, collocated.

Each decision is one period of ALBIC's adaptation loop (§4.1, Algorithm 1), the one
implementation of it; it decides the node count from the demand before balancing
(docs/algorithms.md, "003 — ALBIC"). At each decision:

1. **How many nodes.** The demand ``D`` (cores) is the keyed operators' shard
   load plus the cores that drain their backlog within ``catch_up_s``; the job
   keeps the fewest leading nodes of the cluster whose cores cover
   ``D / target_utilization`` (``executor-0`` first).
2. **Scale-in by marking and draining** (§4.3.1): nodes that still hold key groups
   but are no longer kept are marked for removal (N_r); the MILP moves their key
   groups away within the migration budget, over as many rounds as it takes. New
   kept nodes are empty and receive key groups as balancing sees fit.
3. **Balance and collocate** (§4.3.1–§4.3.2): the registered ``albic`` balancer
   assigns every key group (shard) of the keyed operators to a node, within
   ``max_migrations`` / ``max_migration_bytes`` per round, collocating key groups
   that exchange traffic (``Snapshot.traffic``: shard ``g`` of an upstream keyed
   operator feeding shard ``g`` of a downstream one sharing its key).
4. **Realize as units.** Instance ``op[e]`` gets one unit per node holding any of
   its shards, ``op[e]#i`` where ``i`` is the node's index in the cluster, placed
   on that node; its routing table sends each shard to its node's unit. So a shard
   moves exactly when its key group changes node, and ``Allocation.cores[op[e]]``
   is the number of nodes it spans.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from streamscale.control.controller import Decision
from streamscale.control.policies.base import PolicyBase, decision, packed_initial, prefix_cluster
from streamscale.control.policies.elasticutor import TARGET_UTILIZATION
from streamscale.control.policies.spec import policy
from streamscale.model import (
    Cluster,
    NodeStats,
    Plan,
    ShardStats,
    Snapshot,
    instance_id,
    instance_of,
    operator_of,
    parse_instance,
    unit_id,
)
from streamscale.planning.adapters.albic import ALBIC_SETTINGS
from streamscale.planning.adapters.elasticutor import SETTINGS as ELASTICUTOR_SETTINGS
from streamscale.planning.elastic_plan import assemble
from streamscale.planning.registry import PlanningContext
from streamscale.settings import Schema

__all__ = ["ALBIC_POLICY_SETTINGS", "AlbicPolicy", "realize_nodes"]

ALBIC_POLICY_SETTINGS = ALBIC_SETTINGS.merged(
    Schema("albic", TARGET_UTILIZATION, ELASTICUTOR_SETTINGS["catch_up_s"]), group="albic"
)


def realize_nodes(plan: Plan, cluster: Cluster, instances: Mapping[str, int]) -> Plan:
    """The key group → node plan of the ``albic`` balancer as per-(instance, node) units.

    ``instances`` maps each keyed operator to its instance count; the balancer's
    operator-level units ``op#j`` are replaced, every other entry of ``plan`` kept.
    """
    index = {n: i for i, n in enumerate(cluster.names)}
    ops = set(instances)
    cores = {k: v for k, v in plan.allocation.cores.items() if operator_of(k) not in ops}
    placement = {u: n for u, n in plan.placement.nodes.items() if operator_of(u) not in ops}
    tables = {k: v for k, v in plan.routing.tables.items() if operator_of(k) not in ops}
    for op, count in instances.items():
        for e in range(count):
            inst = instance_id(op, e)
            table = plan.routing.tables[inst]
            row = []
            for unit in table:
                node = plan.placement.nodes[unit]
                mine = unit_id(inst, index[node])
                placement[mine] = node
                row.append(mine)
            tables[inst] = tuple(row)
            cores[inst] = len(set(row))
    return assemble(cores, placement, tables)


def _used_nodes(plan: Plan, ops: set[str]) -> set[str]:
    out: set[str] = set()
    for inst, table in plan.routing.tables.items():
        if operator_of(inst) in ops:
            out.update(plan.placement.nodes[u] for u in table if u in plan.placement.nodes)
    return out


@policy(
    "albic",
    "ALBIC: key groups to nodes within a migration budget, collocated, scale-in by draining",
    settings=ALBIC_POLICY_SETTINGS,
    steps=(("balancer", "albic"),),
    initial=packed_initial,
)
class AlbicPolicy(PolicyBase):
    """ALBIC (paper 003, §4.3): see the module docstring for each decision's steps."""

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        loads = self.loads(context)
        demand = sum(
            ld.load + (ld.backlog_rate / ld.service if math.isfinite(ld.service) else 0.0)
            for ld in loads.values()
        )
        u = self.params["target_utilization"]
        need = max(1, math.ceil(demand / u - 1e-9))
        keep = set(prefix_cluster(self.cluster, need).names)
        ops = {info.operator for info in self.insts}
        used = _used_nodes(current, ops) & set(self.cluster.names)
        active = [n for n in self.cluster.nodes if n.name in keep | used]
        draining = sorted(used - keep)
        sub = Cluster.build(active, self.cluster.vm_types)
        marked = dict(snapshot.nodes)
        for n in draining:
            marked[n] = replace(marked.get(n, NodeStats()), marked_for_removal=True)
        shards = snapshot.shards or _shards_from(context)
        snap = replace(snapshot, nodes=marked, shards=shards)
        # units on nodes the balancer does not see (not the job's) would read as unknown
        start = _within(current, set(sub.names), ops)
        ctx = replace(context, cluster=sub, snapshot=snap)
        plan, figures = self.compose(ctx, start, [("balancer", "albic")])
        counts = {op: self.topology.operator(op).instances for op in sorted(ops)}
        plan = realize_nodes(plan, self.cluster, counts)
        figures.update(
            {
                "cores": plan.allocation.total,
                "demand_cores": demand,
                "nodes_kept": len(keep),
                "nodes_draining": draining,
                "nodes_used": len(_used_nodes(plan, ops)),
            }
        )
        return decision(current, plan, f"albic: {len(keep)} node(s) kept", figures)


def _shards_from(context: PlanningContext) -> tuple[ShardStats, ...]:
    """Shard records from the instances' demand, for snapshots that carry none."""
    out: list[ShardStats] = []
    for inst, ld in (context.loads or {}).items():
        iid = parse_instance(inst)
        if iid.index is None:
            continue
        op, e = iid.operator, iid.index
        z = len(ld.shard_load)
        out.extend(
            ShardStats(op, e * z + s, float(ld.shard_load[s]), 0, int(ld.shard_bytes[s]))
            for s in range(z)
        )
    return tuple(out)


def _within(plan: Plan, nodes: set[str], ops: set[str]) -> Plan:
    """``plan`` without the keyed operators' units placed outside ``nodes``."""
    placement = {
        u: n
        for u, n in plan.placement.nodes.items()
        if n in nodes or operator_of(instance_of(u)) not in ops
    }
    return Plan(plan.allocation, replace(plan.placement, nodes=placement), plan.routing)
