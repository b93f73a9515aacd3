"""The Spark realizer: applies a plan at the next batch boundary.

The batch boundary is the consistency point of paper 000's shard
reassignment (§3.2) on micro-batches: a plan applied while batch ``b`` runs
takes effect for batch ``b+1``, so no shard is ever split between two tasks
and per-key order holds. Applying a plan means a new routing table (shards →
units) and a new task count (one Spark partition per distinct unit); the
placement is advisory, Spark schedules the tasks.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamscale.model import Allocation, Cluster, Placement, Plan, Routing, Topology, unit_id
from streamscale.model.ids import instance_id
from streamscale.runtime.spark.routing.routing import PartitionMap

__all__ = ["SparkRealizer", "default_plan"]


def default_plan(topology: Topology, operator: str, cluster: Cluster) -> Plan:
    """One unit per instance serving all its shards; instances spread round-robin over nodes."""
    op = topology.operator(operator)
    cores: dict[str, int] = {}
    nodes: dict[str, str] = {}
    tables: dict[str, tuple[str, ...]] = {}
    names = cluster.names
    for e in range(op.instances):
        inst = instance_id(operator, e)
        unit = unit_id(inst, 0)
        cores[inst] = 1
        nodes[unit] = names[e % len(names)]
        tables[inst] = (unit,) * op.shards
    return Plan(Allocation(cores), Placement(nodes), Routing(tables))


class SparkRealizer:
    """Holds the plan in force and the one to use from the next batch on.

    Parameters
    ----------
    topology, operator
        The job's topology and its keyed operator.
    plan
        The initial plan (validated like every applied plan).
    """

    def __init__(self, topology: Topology, operator: str, plan: Plan) -> None:
        self.topology = topology
        self.operator = operator
        self._active_map = PartitionMap.from_plan(plan, topology, operator)
        self._active = plan
        self._pending: Plan | None = None
        self._shard_load: dict[int, float] = {}
        self.applied = 0

    def current(self) -> Plan:
        """The newest plan: the pending one if a change waits for the boundary."""
        return self._pending if self._pending is not None else self._active

    @property
    def active(self) -> Plan:
        """The plan the running batch uses."""
        return self._active

    def apply(self, plan: Plan, now: float) -> None:
        """Validate ``plan`` now (a bad plan fails here, not in a task); use it from the next batch."""
        PartitionMap.from_plan(plan, self.topology, self.operator)
        self._pending = plan
        self.applied += 1

    def observe(self, shard_load: Mapping[int, float]) -> None:
        """Busy seconds per global shard in the last batch: the order of the next batch's tasks."""
        self._shard_load = dict(shard_load)

    def begin_batch(self, max_partitions: int | None = None) -> PartitionMap:
        """Switch to the pending plan, if any; the partition map for the batch about to run,
        its partitions numbered heaviest first (see :meth:`PartitionMap.by_load`), folded
        onto at most ``max_partitions`` (the cores ready to run them; see
        :meth:`PartitionMap.folded`)."""
        if self._pending is not None:
            self._active_map = PartitionMap.from_plan(self._pending, self.topology, self.operator)
            self._active, self._pending = self._pending, None
        pmap = self._active_map.by_load(self._shard_load)
        if max_partitions is not None and pmap.partitions > max_partitions:
            pmap = pmap.folded(max(1, max_partitions), self._shard_load)
        return pmap
