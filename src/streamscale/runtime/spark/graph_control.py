"""Collector and realizer of a job graph: every keyed operator elastic on its own.

A DAG has one :class:`~streamscale.runtime.spark.collector.SparkCollector` and one
:class:`~streamscale.runtime.spark.realizer.SparkRealizer` per keyed operator. The
controller and its policy plan the whole topology at once (the Elasticutor
policies size every keyed operator's executors from one queueing model), so this
module presents them as one collector and one realizer:

* :class:`GraphCollector` merges the per-operator snapshots — each keyed
  operator's own statistics and shards, the source's rate from the first keyed
  operator's arrivals (exact when no stateless filter precedes it) plus the
  source's backlog, edge rates from the keyed operator at the edge, CPU per node
  summed;
* :class:`GraphRealizer` hands every applied plan to each operator's realizer
  (each validates and takes its own operator's part at the next batch boundary).

"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamscale.model import Cluster, NodeStats, OperatorStats, Plan, Snapshot, Topology
from streamscale.runtime.spark.collector import SparkCollector
from streamscale.runtime.spark.realizer import SparkRealizer

__all__ = ["GraphCollector", "GraphRealizer"]


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
    ) -> None:
        self.topology = topology
        self.keyed = keyed
        self.collectors = {
            name: SparkCollector(
                topology, name, cluster, realizers[name], start=start, backlog=backlog
            )
            for name in keyed
        }

    @property
    def backlog(self) -> float:
        return self.collectors[self.keyed[0]].backlog

    def observe(self, operator: str, stats: Any) -> None:
        """Add one finished batch of ``operator`` (a keyed operator) to the current period."""
        self.collectors[operator].observe(stats)

    def collect(self, now: float) -> Snapshot:
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
            nodes={n: NodeStats(cpu=c) for n, c in cpu.items()},
        )
