"""The Spark collector: a :class:`~streamscale.model.Snapshot` from the batches of a period.

Figures follow CONTRACTS (snapshot semantics): rates are tuples over the
period ÷ its length; a shard's ``load`` is its busy core-seconds ÷ the period
(paper 000, §3: shard load is the computation cost of its tuples over a
window); ``service_rate`` μ is processed tuples ÷ busy core-seconds.
"""

from __future__ import annotations

from collections.abc import Callable

from streamscale.model import (
    Cluster,
    NodeStats,
    OperatorStats,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.runtime.spark.driver.operator import BatchStats
from streamscale.runtime.spark.routing.realizer import SparkRealizer

__all__ = ["SparkCollector"]


class SparkCollector:
    """Accumulates batch statistics and turns them into a snapshot on ``collect``.

    Parameters
    ----------
    topology, operator
        The job's topology and its keyed operator.
    cluster
        The nodes units are placed on (CPU use is reported per node).
    realizer
        Gives the plan in force (which node each unit is placed on).
    start
        Clock reading when the run started (the first period begins there).
    backlog
        Returns the tuples waiting at the source after the batch just
        observed (0 when unknown). Arrivals over a period are the tuples
        taken plus the backlog's growth, so a source that outruns the job
        still shows its true input rate.
    interval_s
        The trigger interval. A micro-batch source always holds what arrived while
        the last batch ran (about one interval of arrivals when the job keeps up):
        that is the next batch, not a backlog to catch up on. The snapshot's
        operator backlog is what waits beyond the arrivals over the last batch's cycle
        (end to end, given to :meth:`observe`), or ``interval_s`` of them if that is
        longer, at the period's input rate; :attr:`backlog` stays the raw count.
    offered
        The rate the source offers now, read between batches (the watch,
        :mod:`~streamscale.runtime.spark.driver.watch`); the snapshot's input rate is at least
        that, so a surge that began during a long batch is planned for at its rate,
        not the period's average.
    """

    def __init__(
        self,
        topology: Topology,
        operator: str,
        cluster: Cluster,
        realizer: SparkRealizer,
        *,
        start: float,
        backlog: Callable[[], float] | None = None,
        interval_s: float = 0.0,
        offered: Callable[[], float | None] | None = None,
    ) -> None:
        self.topology = topology
        self.interval_s = max(0.0, float(interval_s))
        self.operator = operator
        self.cluster = cluster
        self.realizer = realizer
        self._backlog = backlog or (lambda: 0.0)
        self._offered = offered or (lambda: None)
        op = topology.operator(operator)
        self._n_shards = op.instances * op.shards
        self._bytes: dict[int, int] = {}
        self._since = start
        self._queued = 0.0
        self._queued_before = 0.0
        self._last_end: float | None = None
        self._cycle = 0.0
        self._reset()

    def _reset(self) -> None:
        self._rows = 0
        self._in = 0
        self._out = 0
        self._busy = 0.0
        self._shard: dict[int, list[float]] = {}
        self._unit_busy: dict[str, float] = {}

    def observe(self, stats: BatchStats, *, now: float | None = None) -> None:
        """Add one finished batch to the current period (``now``: the clock when it ended,
        so the next batch's queue is counted over the whole batch, not one interval)."""
        if now is not None:
            if self._last_end is not None:
                self._cycle = max(0.0, now - self._last_end)
            self._last_end = now
        self._in += stats.rows + stats.dead_letters
        self._queued = max(0.0, float(self._backlog()))
        for t in stats.tasks:
            self._rows += t.rows
            self._out += t.out_rows
            self._busy += t.busy_s
            self._unit_busy[t.unit] = self._unit_busy.get(t.unit, 0.0) + t.busy_s
            for g, (rows, busy, nbytes, out) in t.shards.items():
                acc = self._shard.setdefault(g, [0, 0.0, 0])
                acc[0] += rows
                acc[1] += busy
                acc[2] += out
                self._bytes[g] = nbytes

    @property
    def backlog(self) -> float:
        """Tuples waiting at the source after the last observed batch."""
        return self._queued

    def shard_bytes(self, shard: int) -> int:
        """Last known state size of a global shard."""
        return self._bytes.get(shard, 0)

    def collect(self, now: float) -> Snapshot:
        period = max(now - self._since, 1e-9)
        shards = []
        for g in range(self._n_shards):
            rows, busy, out = self._shard.get(g, (0, 0.0, 0))
            shards.append(
                ShardStats(
                    operator=self.operator,
                    shard=g,
                    load=busy / period,
                    rows=int(rows),
                    state_bytes=self._bytes.get(g, 0),
                    output_rate=out / period,
                )
            )
        arrived = max(0.0, self._in + self._queued - self._queued_before)
        in_rate, out_rate = arrived / period, self._out / period
        now_rate = self._offered()
        if now_rate is not None and now_rate > in_rate:
            in_rate = now_rate
        excess = max(0.0, self._queued - in_rate * max(self.interval_s, self._cycle))
        ops: dict[str, OperatorStats] = {}
        before = True
        for name in self.topology.topological_order():
            op = self.topology.operator(name)
            if name == self.operator:
                ops[name] = OperatorStats(
                    input_rate=in_rate,
                    output_rate=out_rate,
                    service_rate=self._rows / self._busy if self._rows and self._busy else None,
                    backlog=excess,
                )
                before = False
            elif op.kind == "source":
                ops[name] = OperatorStats(output_rate=in_rate)
            elif op.kind == "sink":
                ops[name] = OperatorStats(input_rate=out_rate)
            else:
                r = in_rate if before else out_rate
                ops[name] = OperatorStats(input_rate=r, output_rate=r)
        order = self.topology.topological_order()
        k = order.index(self.operator)
        edges = {
            e.name: out_rate if order.index(e.src) >= k else in_rate for e in self.topology.edges
        }
        placement = self.realizer.active.placement.nodes
        default = self.cluster.names[0]
        node_busy: dict[str, float] = {n: 0.0 for n in self.cluster.names}
        for unit, busy in self._unit_busy.items():
            node = placement.get(unit, default)
            node_busy[node] = node_busy.get(node, 0.0) + busy
        nodes = {n: NodeStats(cpu=100.0 * b / period) for n, b in node_busy.items()}
        snap = Snapshot.build(time=now, operators=ops, shards=shards, edges=edges, nodes=nodes)
        self._since = now
        self._queued_before = self._queued
        self._reset()
        return snap
