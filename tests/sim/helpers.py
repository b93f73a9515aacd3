"""Small simulator set-ups shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from streamscale.model import (
    Allocation,
    Cluster,
    Edge,
    Operator,
    Placement,
    Plan,
    Routing,
    Topology,
)

__all__ = ["Uniform", "elastic_plan", "station", "two_stage"]


class Uniform:
    """A constant offered rate spread evenly over the shards."""

    def __init__(self, rate: float) -> None:
        self.r = rate

    def rate(self, source: str, now: float) -> float:
        return self.r

    def weights(
        self, operator: str, instances: int, shards: int, now: float
    ) -> tuple[Hashable, np.ndarray]:
        n = instances * shards
        return 0, np.full(n, 1.0 / n)


def station(
    replicas: int, cores: int, cost_ms: float, *, keyed: bool
) -> tuple[Topology, Cluster, Plan]:
    """``replicas`` independent stations of ``cores`` cores each (one shard per instance)."""
    ops = [
        Operator("src", kind="source"),
        Operator("st", key="k" if keyed else None, cost_ms=cost_ms, instances=replicas, shards=1),
        Operator("sink", kind="sink"),
    ]
    topo = Topology.build("station", ops, [Edge("src", "st"), Edge("st", "sink")])
    cluster = Cluster.uniform(1, cores=replicas * cores)
    alloc = {f"st[{e}]": cores for e in range(replicas)}
    nodes = {f"st[{e}]#{i}": "n1" for e in range(replicas) for i in range(cores)}
    tables = {f"st[{e}]": (f"st[{e}]#0",) for e in range(replicas)} if keyed else {}
    return topo, cluster, Plan(Allocation(alloc), Placement(nodes), Routing(tables))


def two_stage(
    instances: int = 2, shards: int = 8, *, nodes: int = 2, cores: int = 2, upstream: int = 4
) -> tuple[Topology, Cluster]:
    """src → op (keyed, 1 ms, 32 KB/shard) → sink on ``nodes`` × ``cores``."""
    ops = [
        Operator("src", kind="source", instances=upstream),
        Operator(
            "op",
            key="k",
            cost_ms=1.0,
            instances=instances,
            shards=shards,
            state_bytes=32 * 1024 * instances * shards,
        ),
        Operator("sink", kind="sink"),
    ]
    topo = Topology.build("two", ops, [Edge("src", "op", "key"), Edge("op", "sink")])
    return topo, Cluster.uniform(nodes, cores=cores, bandwidth_mbps=100.0)


def elastic_plan(topo: Topology, units: dict[str, list[str]], tables: dict[str, list[int]]) -> Plan:
    """A plan from ``units[instance] = [node of unit 0, node of unit 1, …]`` and
    ``tables[instance][s] = unit index``; an instance may also name operator-level units
    (``op#t``) via negative indices ``-t-1`` (RC)."""
    alloc = {inst: len(ns) for inst, ns in units.items()}
    nodes = {f"{inst}#{i}": n for inst, ns in units.items() for i, n in enumerate(ns)}
    routing = {}
    for inst, tab in tables.items():
        op = inst.split("[")[0]
        routing[inst] = tuple(f"{inst}#{t}" if t >= 0 else f"{op}#{-t - 1}" for t in tab)
    return Plan(Allocation(alloc), Placement(nodes), Routing(routing))
