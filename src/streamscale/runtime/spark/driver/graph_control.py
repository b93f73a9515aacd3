"""Collector and realizer of a job graph: every keyed operator elastic on its own.

A DAG has one :class:`~streamscale.runtime.spark.driver.collector.SparkCollector` and one
:class:`~streamscale.runtime.spark.routing.realizer.SparkRealizer` per keyed operator. The
controller and its policy plan the whole topology at once (the Elasticutor
policies size every keyed operator's instances from one queueing model), so this
module presents them as one collector and one realizer:

* :class:`GraphCollector` merges the per-operator snapshots — each keyed
  operator's own statistics and shards, the source's rate from the first keyed
  operator's arrivals (exact when no stateless filter precedes it) plus the
  source's backlog, edge rates from the keyed operator at the edge, CPU per node
  summed;
* shard-to-shard traffic between keyed operators on the same key (same key field,
  instances and shards, fed through stateless operators only): shard ``g`` of the
  upstream feeds shard ``g`` of the downstream alone, so the traffic is the
  downstream shard's arrival rate (:func:`aligned_traffic`); other keyed edges are
  all-to-all and no placement changes them, so none is reported;
* the batch's fixed cost — its wall time minus, per keyed stage, the longest task — as
  the median of the last :data:`OVERHEAD_BATCHES` batches, with the trigger interval as
  the cycle the batches aim at (:attr:`Snapshot.batch_overhead_s`, ``cycle_target_s``);
* :class:`GraphRealizer` hands every applied plan to each operator's realizer
  (each validates and takes its own operator's part at the next batch boundary).

"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from streamscale.model import (
    Cluster,
    NodeStats,
    OperatorStats,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
)
from streamscale.runtime.spark.driver.collector import SparkCollector
from streamscale.runtime.spark.routing.realizer import SparkRealizer

__all__ = ["OVERHEAD_BATCHES", "GraphCollector", "GraphRealizer"]

#: Batches whose fixed cost the snapshot's ``batch_overhead_s`` is the median of (a cold
#: first batch or one slow stage does not move it alone).
OVERHEAD_BATCHES = 5


class GraphRealizer:
    """One realizer over every keyed operator's :class:`SparkRealizer`."""

    def __init__(self, realizers: Mapping[str, SparkRealizer]) -> None:
        if not realizers:
            raise ValueError("a graph realizer needs at least one keyed operator")
        self.realizers = dict(realizers)
        self._first = next(iter(self.realizers.values()))

    def current(self) -> Plan:
        return self._first.current()

    def apply(self, plan: Plan, now: float) -> None:
        for r in self.realizers.values():  # each validates its part before any takes it
            r.apply(plan, now)


class GraphCollector:
    """One collector over every keyed operator's :class:`SparkCollector`.

    Parameters
    ----------
    topology
        The job's topology (any DAG).
    keyed
        Its keyed operators, in topological order.
    cluster
        The nodes units are placed on.
    realizers
        Each keyed operator's realizer.
    start
        Clock reading when the run started.
    backlog
        Tuples waiting at the source after the batch just observed.
    interval_s
        The trigger interval.
    offered
        The source's offered rate as the watch measured it (``None``: not measured);
        the source's figures are the first keyed operator's, so it alone reads it.
    fused
        The run fuses ``topology``'s chain in its keyed operator's tasks
        (:func:`~streamscale.runtime.spark.driver.job.fused_job`): the snapshot is that
        operator's collector's own (every operator of the chain, as its tasks report it).
    """

    def __init__(
        self,
        topology: Topology,
        keyed: tuple[str, ...],
        cluster: Cluster,
        realizers: Mapping[str, SparkRealizer],
        *,
        start: float,
        backlog: Callable[[], float] | None = None,
        interval_s: float = 0.0,
        offered: Callable[[], float | None] | None = None,
        fused: bool = False,
    ) -> None:
        self.topology = topology
        self.keyed = keyed
        self.fused = fused
        self.interval_s = max(0.0, float(interval_s))
        self._overheads: deque[float] = deque(maxlen=OVERHEAD_BATCHES)
        self.collectors = {
            name: SparkCollector(
                topology,
                name,
                cluster,
                realizers[name],
                start=start,
                backlog=backlog,
                interval_s=interval_s,
                offered=offered if name == keyed[0] else None,
            )
            for name in keyed
        }

    @property
    def backlog(self) -> float:
        return self.collectors[self.keyed[0]].backlog

    def observe(self, operator: str, stats: Any, *, now: float | None = None) -> None:
        """Add one finished batch of ``operator`` (a keyed operator) to the current period
        (``now``: the clock when the batch ended)."""
        self.collectors[operator].observe(stats, now=now)

    def batch(self, wall_s: float, stages: Mapping[str, Any]) -> float:
        """Add one batch's fixed cost: ``wall_s`` (its wall time so far) minus the longest
        task of each keyed stage in ``stages`` (operator → its batch statistics); the
        cost, which is never below 0."""
        longest = sum(max((t.busy_s for t in st.tasks), default=0.0) for st in stages.values())
        cost = max(0.0, float(wall_s) - longest)
        self._overheads.append(cost)
        return cost

    def collect(self, now: float) -> Snapshot:
        return replace(
            self._collect(now),
            batch_overhead_s=statistics.median(self._overheads) if self._overheads else 0.0,
            cycle_target_s=self.interval_s,
        )

    def _collect(self, now: float) -> Snapshot:
        if self.fused:
            return self.collectors[self.keyed[0]].collect(now)
        snaps = {name: c.collect(now) for name, c in self.collectors.items()}
        first = snaps[self.keyed[0]]
        ops: dict[str, OperatorStats] = {}
        for name, snap in snaps.items():
            ops[name] = snap.operators[name]
        for op in self.topology.operators:
            if op.name not in ops and op.kind == "source":
                ops[op.name] = OperatorStats(
                    output_rate=first.operators[self.keyed[0]].input_rate,
                    backlog=first.operators[self.keyed[0]].backlog,
                )
        edges: dict[str, float] = {}
        for e in self.topology.edges:
            owner = e.dst if e.dst in snaps else e.src if e.src in snaps else self.keyed[0]
            edges[e.name] = snaps[owner].edges.get(e.name, 0.0)
        cpu: dict[str, float] = {}
        for snap in snaps.values():
            for node, st in snap.nodes.items():
                cpu[node] = cpu.get(node, 0.0) + st.cpu
        shards = [s for snap in snaps.values() for s in snap.shards]
        return Snapshot.build(
            time=now,
            operators=ops,
            shards=shards,
            edges=edges,
            traffic=aligned_traffic(self.topology, ops, shards),
            nodes={n: NodeStats(cpu=c) for n, c in cpu.items()},
        )


def upstream_keyed(topology: Topology, operator: str) -> str | None:
    """The keyed operator feeding ``operator`` through a chain of single-input stateless
    operators (``None``: a source, a union or a fan-in comes first)."""
    cur = operator
    while True:
        ins = topology.inputs(cur)
        if len(ins) != 1:
            return None
        src = topology.operator(ins[0].src)
        if src.kind == "source":
            return None
        if src.key:
            return src.name
        cur = src.name


def aligned_traffic(
    topology: Topology, ops: Mapping[str, OperatorStats], shards: list[ShardStats]
) -> list[Traffic]:
    """Tuples/s from shard ``g`` of a keyed operator to shard ``g`` of the keyed operator
    it feeds on the same key (same field, instances and shards)."""
    rows: dict[str, dict[int, int]] = {}
    for s in shards:
        rows.setdefault(s.operator, {})[s.shard] = s.rows
    out: list[Traffic] = []
    for dst in topology.operators:
        src_name = upstream_keyed(topology, dst.name) if dst.key else None
        if src_name is None:
            continue
        src = topology.operator(src_name)
        if (src.key, src.instances, src.shards) != (dst.key, dst.instances, dst.shards):
            continue
        per = rows.get(dst.name, {})
        total = sum(per.values())
        rate = ops[dst.name].input_rate if dst.name in ops else 0.0
        if total <= 0 or rate <= 0:
            continue
        out.extend(
            Traffic(src.name, g, dst.name, g, rate * n / total) for g, n in sorted(per.items()) if n
        )
    return out
