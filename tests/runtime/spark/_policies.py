"""Stand-in policies for the pipeline tests (pure, deterministic)."""

from __future__ import annotations

from streamscale.control.controller import Decision
from streamscale.model import Allocation, Placement, Plan, Routing, Snapshot, Topology

__all__ = ["Flip", "split_plan"]


def split_plan(topology: Topology, operator: str, k: int) -> Plan:
    """Executor 0 gets ``k`` units (shard s → unit s % k); the others one unit each."""
    op = topology.operator(operator)
    cores, nodes, tables = {}, {}, {}
    for e in range(op.instances):
        inst = f"{operator}[{e}]"
        n = k if e == 0 else 1
        cores[inst] = n
        for t in range(n):
            nodes[f"{inst}#{t}"] = "local"
        tables[inst] = tuple(f"{inst}#{s % n}" for s in range(op.shards))
    return Plan(Allocation(cores), Placement(nodes), Routing(tables))


class Flip:
    """Alternates between one unit per instance and ``k`` units for instance 0."""

    name = "flip"

    def __init__(self, topology: Topology, operator: str, k: int = 3) -> None:
        self.plans = (split_plan(topology, operator, 1), split_plan(topology, operator, k))

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        nxt = self.plans[1] if current == self.plans[0] else self.plans[0]
        return Decision(nxt, "flip", {"units": nxt.allocation.total}, "none")

    def shard_bytes(self, instance: str, shard: int) -> int:
        return 0
