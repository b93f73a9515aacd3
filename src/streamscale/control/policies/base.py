"""What every live policy shares: its inputs, one planning context per decision, figures.

A policy is pure: no clock (``now`` is passed in), no I/O. Its only memory is
the last decision's shard sizes, which :meth:`PolicyBase.shard_bytes` reports to
the controller for the migration cost of a plan change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from streamscale.control.controller import Decision
from streamscale.control.sharing import held_cores
from streamscale.errors import InfeasibleError
from streamscale.model import (
    Cluster,
    PerformanceModel,
    Placement,
    Plan,
    Snapshot,
    Topology,
    instance_of,
    unit_id,
)
from streamscale.planning.adapters.elasticutor import with_loads
from streamscale.planning.elastic_plan import (
    InstanceInfo,
    InstanceLoad,
    assemble,
    keyed_instances,
    placement_matrix,
    realize_units,
)
from streamscale.planning.registry import Family, PlanningContext, StepResult, compose, get
from streamscale.settings import Schema

__all__ = [
    "PolicyBase",
    "decision",
    "keep_unit_ids",
    "packed_initial",
    "place_packed",
    "prefix_cluster",
    "scale",
    "static_plan",
    "without",
]


class PolicyBase:
    """Topology, cluster, parsed settings, instances and the last shard sizes."""

    name = ""
    #: sizes cores from load: the watch may request executors for it between boundaries
    mid_batch = False

    def __init__(
        self,
        topology: Topology,
        cluster: Cluster,
        params: Mapping[str, Any],
        seed: int | None,
        models: Mapping[str, PerformanceModel] | None = None,
    ) -> None:
        self.topology = topology
        self.cluster = cluster
        self.params = params  # parsed at the edge (read-only), read as they are
        self.seed = seed
        self.models = dict(models or {})
        self.insts: tuple[InstanceInfo, ...] = keyed_instances(topology, cluster)
        self._by_instance = {info.instance: info for info in self.insts}
        self._state: dict[str, np.ndarray] = {}

    def shard_bytes(self, instance: str, shard: int) -> int:
        """State size of local ``shard`` of instance ``instance`` (last snapshot, else model)."""
        sizes = self._state.get(instance)
        if sizes is not None and 0 <= shard < sizes.size:
            return int(sizes[shard])
        info = self._by_instance.get(instance)
        if info is None:
            return 0
        op = self.topology.operator(info.operator)
        return op.state_bytes // max(op.instances * op.shards, 1)

    def context(
        self,
        snapshot: Snapshot | None,
        now: float,
        *,
        cluster: Cluster | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> PlanningContext:
        """This decision's planning context, the instances' demand computed once in it."""
        ctx = PlanningContext(
            self.topology,
            cluster or self.cluster,
            snapshot,
            models=self.models,
            params=self.params if params is None else params,
            seed=self.seed,
            now=now,
        )
        if not self.insts:
            return ctx
        ctx = with_loads(ctx)
        self._state = {inst: ld.shard_bytes for inst, ld in self.loads(ctx).items()}
        return ctx

    @staticmethod
    def loads(context: PlanningContext) -> Mapping[str, InstanceLoad]:
        return context.loads or {}

    def compose(
        self, context: PlanningContext, current: Plan, steps: list[tuple[Family, str]]
    ) -> tuple[Plan, dict[str, Any]]:
        """Run registered planners in order; figures flattened as ``family:name.figure``."""
        plan, figures, notes = compose(context, current, steps=steps)
        flat: dict[str, Any] = {"cores": plan.allocation.total}
        for step, figs in figures.items():
            flat.update({f"{step}.{k}": v for k, v in figs.items() if k != "cores_per_node"})
        if notes:
            flat["notes"] = list(notes)
        return plan, flat


def scale(current: Plan, plan: Plan) -> str:
    """The direction of a change: by the cores held (:func:`held_cores`: shared slots or
    one per unit), then by the units."""
    before = (held_cores(current.allocation), current.allocation.total)
    after = (held_cores(plan.allocation), plan.allocation.total)
    return "up" if after > before else "down" if after < before else "none"


def decision(current: Plan, plan: Plan, reason: str, figures: Mapping[str, Any]) -> Decision:
    """No change when ``plan`` is the current one, else ``plan`` with its direction."""
    if plan == current:
        return Decision(None, "no change needed", figures)
    return Decision(plan, reason, figures, scale(current, plan))  # type: ignore[arg-type]


def prefix_cluster(cluster: Cluster, cores: int) -> Cluster:
    """The fewest leading nodes of ``cluster`` with at least ``cores`` cores (all if short).

    Placement-aware policies pack onto low-index nodes (``executor-0`` first) so a
    runtime that holds one executor per used node scales in by vacating the highest.
    """
    total = 0
    for i, n in enumerate(cluster.nodes):
        total += n.cores
        if total >= cores:
            return Cluster.build(cluster.nodes[: i + 1], cluster.vm_types)
    return cluster


def static_plan(insts: tuple[InstanceInfo, ...]) -> Plan:
    """One core per instance on its home node; every shard on that core (paper 000, §5)."""
    cores = {info.instance: 1 for info in insts}
    placement = {unit_id(info.instance, 0): info.home for info in insts}
    tables = {info.instance: (unit_id(info.instance, 0),) * info.shards for info in insts}
    return assemble(cores, placement, tables)


def packed_initial(
    topology: Topology,
    cluster: Cluster,
    params: Mapping[str, Any],
    models: Mapping[str, PerformanceModel] | None = None,
) -> Plan:
    """One core per instance, homes on the fewest leading nodes that hold them all.

    The start of the placement-aware policies: a job begins on ``executor-0 …`` and
    grows from there rather than touching every node it may ever use.
    """
    n = sum(op.instances for op in topology.processing if op.keyed)
    return static_plan(keyed_instances(topology, prefix_cluster(cluster, n)))


def keep_unit_ids(
    current: Plan, placed: Plan, insts: tuple[InstanceInfo, ...], cluster: Cluster
) -> Plan:
    """``placed`` with its instances' units renamed so that units staying on their node keep
    their ids (paper 000, §3): a placer that numbers units afresh then moves no shard whose
    node keeps a unit of its instance."""
    nodes = list(cluster.names)
    x = placement_matrix(placed, insts, nodes)
    mine, _ = realize_units(current, insts, x, nodes)
    ours = {info.instance for info in insts}
    placement = {u: n for u, n in placed.placement.nodes.items() if instance_of(u) not in ours}
    placement.update(mine)
    return Plan(placed.allocation, Placement(dict(sorted(placement.items()))), placed.routing)


def place_packed(
    insts: tuple[InstanceInfo, ...],
    context: PlanningContext,
    sized: Plan,
    placer: str,
    *,
    feasible: Callable[[StepResult], bool] = lambda r: True,
    cores: int | None = None,
) -> tuple[Plan, dict[str, Any], int]:
    """Run registered ``placer`` on the fewest leading nodes that can take the plan's units.

    Starts with the nodes whose cores cover ``cores`` (default: the allocation's units,
    one core each) and adds one node at a time
    while the placer fails (:class:`InfeasibleError`) or its result is not ``feasible``;
    the last attempt uses the whole cluster and is returned as it is. Returns the plan
    (the units of ``insts`` keep their ids where they stay, :func:`keep_unit_ids`), the
    step's figures and the number of nodes offered.
    """
    cluster = context.cluster
    want = sized.allocation.total if cores is None else cores
    n = len(prefix_cluster(cluster, want).nodes)
    entry = get("placer", placer)
    while True:
        sub = Cluster.build(cluster.nodes[:n], cluster.vm_types)
        last = n >= len(cluster.nodes)
        try:
            res = entry.adapter(replace(context, cluster=sub), sized)
        except InfeasibleError:
            if last:
                raise
            n += 1
            continue
        if feasible(res) or last:
            plan = keep_unit_ids(sized, res.plan, insts, cluster)
            figures = {f"placer:{placer}.{k}": v for k, v in res.figures.items()}
            if res.notes:
                figures["notes"] = list(res.notes)
            return plan, figures, n
        n += 1


def without(schema: Schema, *names: str) -> Schema:
    """``schema`` less the settings a policy fixes itself."""
    return Schema(schema.group, *(s for s in schema.settings if s.name not in names))
