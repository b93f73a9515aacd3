"""The simulator's Collector: a :class:`~streamscale.model.Snapshot` from the kernel's counters.

Semantics follow CONTRACTS.md: rates over the statistics period ending at
``now``; ``service_rate`` μ = tuples processed per busy core-second; shard
``load`` = busy core-seconds ÷ period (in cores); node ``cpu`` in % of one
core. The period is the sliding window of paper 000, §3.1 (1 s by default): the
counters are differenced against the last collection at least ``window_s``
old.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamscale.model import NodeStats, OperatorStats, ShardStats, Snapshot
from streamscale.sim.kernel import Simulator

__all__ = ["Counters", "SimCollector", "counters"]


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative counters of a simulator at ``time`` (copies, safe to keep)."""

    time: float
    arrived: dict[str, np.ndarray]
    served: dict[str, np.ndarray]
    emitted: dict[str, float]
    busy: np.ndarray
    migrated: np.ndarray
    remote: np.ndarray
    edges: dict[str, float]


def counters(sim: Simulator) -> Counters:
    """A copy of ``sim``'s cumulative counters now."""
    emitted = dict(sim.emitted)
    emitted.update({n: st.emitted for n, st in sim.ops.items()})
    return Counters(
        sim.now,
        {n: st.arrived.copy() for n, st in sim.ops.items()},
        {n: st.served.copy() for n, st in sim.ops.items()},
        emitted,
        sim.busy.copy(),
        sim.migrated.copy(),
        sim.remote.copy(),
        dict(sim.edge_tuples),
    )


class SimCollector:
    """Observes a :class:`Simulator` (CONTRACTS.md Collector protocol)."""

    def __init__(self, sim: Simulator, *, window_s: float = 1.0) -> None:
        self.sim = sim
        self.window_s = window_s
        self._history: list[Counters] = [counters(sim)]

    def record(self) -> None:
        """Keep a copy of the counters now, so later windows start exactly ``window_s`` back."""
        self._trim(self.sim.now)
        self._history.append(counters(self.sim))

    def _trim(self, now: float) -> Counters:
        base = self._history[0]
        for c in self._history:
            if c.time <= now - self.window_s + 1e-9:
                base = c
        self._history = [c for c in self._history if c.time >= base.time]
        return base

    def collect(self, now: float) -> Snapshot:
        sim = self.sim
        cur = counters(sim)
        base = self._trim(now)
        self._history.append(cur)
        period = max(cur.time - base.time, sim.config.dt)
        operators: dict[str, OperatorStats] = {}
        shards: list[ShardStats] = []
        for name in sim.pending:
            r = (cur.emitted[name] - base.emitted[name]) / period
            # tuples a throttled source still owes are its backlog (CONTRACTS)
            operators[name] = OperatorStats(input_rate=r, output_rate=r, backlog=sim.pending[name])
        for name, st in sim.ops.items():
            served = cur.served[name] - base.served[name]
            rows = float(served.sum())
            sel = max((s for _, s in st.outputs), default=1.0)
            operators[name] = OperatorStats(
                input_rate=float((cur.arrived[name] - base.arrived[name]).sum()) / period,
                output_rate=rows * sel / period,
                service_rate=1.0 / st.cost if rows > 0 else None,
                backlog=st.backlog(),
            )
            if st.keyed:
                load = (served * st.cost / period).tolist()
                out = (served * sel / period).tolist()
                n_rows = np.rint(served).astype(np.int64).tolist()
                size = st.shard_bytes.astype(np.int64).tolist()
                queued = (st.q + st.buf).tolist()
                shards.extend(
                    ShardStats(name, i, load[i], n_rows[i], size[i], out[i], queued[i])
                    for i in range(st.shards)
                )
        cpu = (cur.busy - base.busy) / period * 100.0
        mbps = ((cur.migrated - base.migrated) + (cur.remote - base.remote)) * 8 / 1e6 / period
        nodes = {
            n: NodeStats(cpu=float(cpu[i]), bandwidth_mbps=float(mbps[i]))
            for i, n in enumerate(sim.node_names)
        }
        edges = {e: (cur.edges[e] - base.edges[e]) / period for e in cur.edges}
        return Snapshot(now, operators, tuple(shards), edges, (), nodes)
