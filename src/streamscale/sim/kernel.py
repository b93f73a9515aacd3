"""The simulator kernel: a continuous-operator (Storm-like) cluster in small time steps.

Paper 000, §3 and §5 describe the system simulated here: operators made of
instances, each instance's key subspace split into shards by a static hash,
shards routed to tasks (one per core) by a dynamic table, per-task FIFO queues,
back-pressure that throttles the sources when a queue is full, and state that
moves with a shard when its task is on another node.

Time advances in steps of ``dt`` (10 ms by default). Every quantity is a numpy
vector over the shards or the pools of an operator, never a loop over tuples:

* **Arrivals** per shard and step are Poisson with mean (tuples admitted ×
  the shard's share of the key distribution), so the arrival process is Poisson
  as in the M/M/k model of §4.1.
* **Service** per pool and step follows the queue's sample path *inside* the
  step (:mod:`streamscale.sim.service`): Erlang service times (exponential, or
  Erlang-4 for the paper's N(c, (0.5c)²) costs, same mean and variance),
  uniformised with the step's arrivals, so queueing that builds and drains
  within a step is seen even when a step lasts hundreds of service times. A
  pool serves the shards in its queue in proportion to their queued tuples,
  the fluid picture of FIFO.
* **Latency**: the mean is exact by Little's law (tuple-seconds spent in the
  operator, integrated along each step's path, ÷ tuples completed).
  Percentiles come from an arrival-weighted histogram of each admitted tuple's
  expected sojourn given the work it finds ahead of it (phases of the tuples
  queued and in service, plus its own), plus the remaining pause of a paused
  shard. The histogram carries no service-time variance of the tuple itself,
  so its tail is that of the queueing delay.
* **Back-pressure**: a pool holds at most ``queue_s`` seconds of work per core
  (``queue_s / cost`` tuples; ``queue_capacity`` tuples when ``queue_s`` is unset);
  the tuples an operator can admit in a step are limited so that no pool
  overflows (the key distribution fixes how admitted tuples spread), which is
  how one overloaded task throttles the whole topology in Storm. An upstream
  operator that cannot emit stalls. Tuples RC holds upstream during its global
  synchronisation count against the queues; those Elasticutor's receiver holds
  for a paused shard do not (they wait in the instance's main process). When a
  shard resumes, its held tuples enter the new task's queue only as room allows
  (oldest first, new tuples of the shard behind them); the rest waits in the
  receiver, counted in the latency and against that queue's bound, so a long
  pause drains at the service rate instead of overfilling one queue.
* **Reconfiguration** (:mod:`streamscale.sim.protocols`): Elasticutor's local
  labeling-tuple protocol per shard, or RC's global synchronisation per operator.
* **Network**: state migrations share the full-duplex NICs fairly at the
  nodes' bandwidth (moves within a node are free, §3.1); tuples an elastic
  instance forwards to its remote tasks are limited by the home node's
  bandwidth and counted as remote transfer (they do not slow migrations).

Sources and sinks use no cores (the generator is not the object of study). A
source with a finite rate keeps the tuples back-pressure holds back and emits
them first when it can; their wait at the source is integrated
(``source_wait_s``) and counted in the end-to-end latency.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol

import numpy as np

from streamscale.errors import ModelError
from streamscale.model import Cluster, Plan, Topology
from streamscale.sim import protocols, service
from streamscale.sim.state import LATENCY_BINS, OpState, SimConfig, shard_targets

__all__ = ["Demand", "SimConfig", "Simulator"]


class Demand(Protocol):
    """What the workload offers: source rates and key distributions over time."""

    def rate(self, source: str, now: float) -> float:
        """Offered tuples/s of ``source`` at ``now`` (``math.inf``: as fast as admitted)."""
        ...

    def weights(
        self, operator: str, instances: int, shards: int, now: float
    ) -> tuple[Hashable, np.ndarray]:
        """A version tag and the share of ``operator``'s input per global shard (sums to 1)."""
        ...


class Simulator:
    """A simulated cluster running ``topology`` under a plan, stepped by :meth:`step`."""

    def __init__(
        self,
        topology: Topology,
        cluster: Cluster,
        demand: Demand,
        plan: Plan,
        *,
        config: SimConfig | None = None,
        seed: int | None = None,
    ) -> None:
        self.topology = topology
        self.cluster = cluster
        self.demand = demand
        self.config = config or SimConfig()
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.steps = 0
        self.node_names = list(cluster.names)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        nn = len(self.node_names)
        self.cores = np.array([n.cores for n in cluster.nodes], dtype=float)
        self.bytes_per_s = np.array([n.bandwidth_mbps * 1e6 / 8 for n in cluster.nodes])
        self.speed = np.ones(nn)
        self.busy = np.zeros(nn)
        self.migrated = np.zeros(nn)
        self.remote = np.zeros(nn)
        self.edge_tuples = {e.name: 0.0 for e in topology.edges}
        self.pending = {s.name: 0.0 for s in topology.sources}
        self.emitted = {s.name: 0.0 for s in topology.sources}
        # tuple-seconds waited at each source, and a histogram of those waits
        self.source_wait_s = {s.name: 0.0 for s in topology.sources}
        self.source_hist = {s.name: np.zeros(LATENCY_BINS.size + 1) for s in topology.sources}
        self.order = [n for n in topology.topological_order()]
        self._outputs = {n: topology.outputs(n) for n in topology.names}
        self._sources = [s.name for s in topology.sources]
        self.ops: dict[str, OpState] = {}
        self._build_ops()
        self.plan = plan
        self._install(plan)

    # -- construction ------------------------------------------------------
    def _build_ops(self) -> None:
        cfg = self.config
        topo = self.topology
        names = [o.name for o in topo.processing]
        for op in topo.processing:
            z = op.shards if op.keyed else 1
            s = op.instances * z
            outs = [
                (names.index(e.dst), e.selectivity) for e in topo.outputs(op.name) if e.dst in names
            ]
            ins = topo.inputs(op.name)
            in_bytes = max((topo.edge_bytes(e) for e in ins), default=op.tuple_bytes)
            st = OpState(
                op=op,
                keyed=op.keyed,
                instances=op.instances,
                per_instance=z,
                cost=op.cost_ms / 1000.0,
                cv=cfg.cost_cv,
                exponential=cfg.service == "exponential",
                out_bytes=op.tuple_bytes,
                in_bytes=in_bytes,
                shard_bytes=np.full(s, op.state_bytes / s if op.keyed else 0.0),
                outputs=outs,
                phases=service.phases(cfg.service == "exponential", cfg.cost_cv),
            )
            if st.cost <= 0:
                raise ModelError(
                    "a simulated operator needs cost_ms > 0", item=f"operator {op.name}"
                )
            st.allocate()
            self.ops[op.name] = st
        self._names = names
        self._upstream_instances = {
            name: sum(topo.operator(e.src).instances for e in topo.inputs(name)) for name in names
        }

    def _install(self, plan: Plan) -> None:
        for st in self.ops.values():
            target, protocol = shard_targets(self.topology, plan, st, self.node_index)
            st.route[:] = target
            st.target[:] = target
            st.dest[:] = target
            st.protocol = protocol
            st.home[:] = st.pools.node[target[:: st.per_instance]]
        self._refresh()

    # -- plan changes --------------------------------------------------------
    def apply(self, plan: Plan, now: float) -> None:
        """Adopt ``plan`` from now on; shards move by their protocol over the next steps."""
        for st in self.ops.values():
            target, protocol = shard_targets(self.topology, plan, st, self.node_index)
            st.target[:] = target
            st.protocol = protocol
        self.plan = plan
        self._refresh()

    def _refresh(self) -> None:
        """Recompute per-node speed (oversubscribed nodes slow down) and remote masks."""
        units = np.zeros(len(self.node_names))
        for st in self.ops.values():
            active = np.zeros(len(st.pools), dtype=bool)
            active[st.route] = True
            active[st.target] = True
            units += np.bincount(
                st.pools.node[active], st.pools.units[active], minlength=units.size
            )
            st.remote_mask = (
                st.pools.node[st.route] != np.repeat(st.home, st.per_instance)
                if st.keyed and st.protocol == "ec"
                else np.zeros(st.shards, dtype=bool)
            )
        self.speed = np.minimum(1.0, self.cores / np.maximum(units, 1e-12))

    # -- one step ------------------------------------------------------------
    def step(self) -> None:
        """Advance the simulated clock by ``dt``."""
        cfg = self.config
        dt = cfg.dt
        for st in self.ops.values():
            self._weights(st)
        adm = {name: self._admissible(self.ops[name]) for name in self._names}
        inflow = dict.fromkeys(self._names, 0.0)
        for src in self._sources:
            allowed = math.inf
            for e in self._outputs[src]:
                if e.dst in adm:
                    allowed = min(allowed, adm[e.dst] / e.selectivity)
            r = self.demand.rate(src, self.now)
            if math.isinf(r):
                want = min(allowed, cfg.max_rate * dt)
                emit = want
            else:
                before = self.pending[src]
                want = r * dt + before
                emit = min(want, allowed)
                self.pending[src] = want - emit
                self._source_wait(src, before, r, emit)
            self.emitted[src] += emit
            for e in self._outputs[src]:
                self.edge_tuples[e.name] += emit * e.selectivity
                if e.dst in inflow:
                    inflow[e.dst] += emit * e.selectivity
        changed = False
        for name in self.order:
            st = self.ops.get(name)
            if st is None:
                continue
            out_cap = math.inf
            for i, sel in st.outputs:
                out_cap = min(out_cap, adm[self._names[i]] / sel)
            done = self._advance(st, inflow[name], out_cap)
            for e in self._outputs[name]:
                self.edge_tuples[e.name] += done * e.selectivity
                if e.dst in inflow:
                    inflow[e.dst] += done * e.selectivity
        self.now = round(self.now + dt, 9)
        self.steps += 1
        protocols.transfer_step(self)
        for st in self.ops.values():
            changed |= protocols.progress(self, st)
        if changed:
            self._refresh()

    def _source_wait(self, src: str, before: float, rate: float, emit: float) -> None:
        """Account the wait of tuples held back at a throttled source (FIFO)."""
        after = self.pending[src]
        if before <= 0 and after <= 0:
            return
        self.source_wait_s[src] += 0.5 * (before + after) * self.config.dt
        if emit > 0 and rate > 0:
            # the oldest tuples leave first: they waited about the backlog's age
            w = 0.5 * (before + after) / rate
            self.source_hist[src][int(np.searchsorted(LATENCY_BINS, w))] += emit

    def _weights(self, st: OpState) -> None:
        version, p = self.demand.weights(st.op.name, st.instances, st.per_instance, self.now)
        if version != st.p_version:
            if p.shape != (st.shards,):
                raise ModelError(f"weights must have {st.shards} entries", item=st.op.name)
            st.p = np.asarray(p, dtype=float)
            st.p_version = version

    def capacity(self, st: OpState) -> float:
        """Tuples a pool of ``st`` may hold per core (back-pressure bound)."""
        q = self.config.queue_s
        return self.config.queue_capacity if q is None else q / st.cost

    def _admissible(self, st: OpState) -> float:
        """Tuples ``st`` can take this step without overflowing a pool (back-pressure)."""
        n = len(st.pools)
        # RC holds tuples in the upstream send buffers (bounded with the queues);
        # Elasticutor's receiver holds a paused shard's tuples outside the task queues.
        # Once a shard runs again, what it still holds waits to enter its bounded
        # task queue, so it counts against that queue (the receiver is blocked on it)
        held = st.q + st.buf if st.rc_active else st.q + np.where(st.phase == 0, st.buf, 0.0)
        queued = np.bincount(st.route, held, minlength=n)
        share = np.bincount(st.route, st.p, minlength=n)
        head = np.maximum(self.capacity(st) * st.pools.units - queued, 0.0)
        m = share > 1e-15
        adm = float(np.min(head[m] / share[m])) if m.any() else math.inf
        rm = st.remote_mask
        if rm.any():
            # forwarding to remote tasks is limited by the home node's bandwidth
            need = np.bincount(
                np.repeat(st.home, st.per_instance)[rm], st.p[rm], minlength=self.speed.size
            )
            per = need * st.in_bytes
            k = per > 0
            if k.any():
                adm = min(adm, float(np.min(self.bytes_per_s[k] * self.config.dt / per[k])))
        return adm

    def _advance(self, st: OpState, inflow: float, out_cap: float) -> float:
        """Arrivals, service and accounting of one operator for one step; returns completions."""
        cfg = self.config
        dt = cfg.dt
        n = len(st.pools)
        a = self.rng.poisson(inflow * st.p) if inflow > 0 else np.zeros(st.shards)
        # a paused shard holds its arrivals; a resumed one still holding tuples
        # queues new ones behind them (per-key FIFO)
        holding = (st.phase != 0) | (st.buf > 0)
        if st.rc_active:
            entered = np.zeros(st.shards)
            st.buf += a
        elif holding.any():
            entered = np.where(holding, 0.0, a)
            st.buf += a - entered
            st.q += entered
        else:
            entered = a
            st.q += a
        st.arrived += a
        if not st.rc_active:
            self._release(st)
        cores = st.pools.units
        spd = self.speed[st.pools.node]
        queued = np.bincount(st.route, st.q, minlength=n)
        into = np.bincount(st.route, entered, minlength=n)
        if st.head.size != n:
            st.head = np.concatenate([st.head, np.zeros(n - st.head.size, dtype=np.int64)])
        rate = spd / st.cost
        res = service.serve(self.rng, queued - into, into, cores, rate, st.phases, dt, st.head)
        done = np.minimum(res.done, queued)
        if res.arrival_wait.size:
            w = res.arrival_wait
            st.hist += np.bincount(np.searchsorted(LATENCY_BINS, w), minlength=st.hist.size)
            st.lat_sum += float(w.sum())
        held = a - entered
        if float(held.sum()) > 0:
            # held at a pause: the rest of the pause, then the queue it will join
            seen = np.maximum(queued - cores, 0.0) / cores + 1.0
            w = (seen * st.cost / spd)[st.route] + protocols.remaining_pause(self, st)
            idx = np.searchsorted(LATENCY_BINS, w)
            st.hist += np.bincount(idx, held, minlength=st.hist.size)
            st.lat_sum += float(np.dot(w, held))
        tot = float(done.sum())
        if tot > out_cap:
            done *= out_cap / tot
            tot = out_cap
        frac = np.divide(done, queued, out=np.zeros(n), where=queued > 0)
        served = st.q * frac[st.route]
        st.q -= served
        np.maximum(st.q, 0.0, out=st.q)
        st.served += served
        st.label_left -= np.where(st.phase == 1, done[st.route], 0.0)
        self.busy += np.bincount(st.pools.node, done * st.cost, minlength=self.busy.size)
        rm = st.remote_mask
        if rm.any():
            moved = (a[rm] * st.in_bytes + served[rm] * st.out_bytes).astype(float)
            self.remote += np.bincount(
                np.repeat(st.home, st.per_instance)[rm], moved, minlength=self.remote.size
            )
        st.emitted += tot
        st.in_system_s += float(res.area.sum()) + float(st.buf.sum()) * dt
        return tot

    def _release(self, st: OpState) -> None:
        """Held tuples of resumed shards enter their task queues as room allows.

        A shard that resumes after a pause (Elasticutor's labeling-tuple move, or
        the end of RC's global synchronisation) may hold more tuples than its new
        task's queue can take. They enter it oldest first, at most up to the
        queue's bound (``capacity`` per core); the rest keeps waiting in the
        instance's receiver (RC: the upstream send buffers), counted in the
        latency and against the queue's bound, so it drains at the service rate.
        They enter at the start of the step, before its service, as carried tuples.
        """
        rel = np.flatnonzero((st.phase == 0) & (st.buf > 0))
        if not rel.size:
            return
        n = len(st.pools)
        queued = np.bincount(st.route, st.q, minlength=n)
        room = np.maximum(self.capacity(st) * st.pools.units - queued, 0.0)
        want = np.bincount(st.route[rel], st.buf[rel], minlength=n)
        frac = np.divide(np.minimum(room, want), want, out=np.zeros(n), where=want > 0)
        moved = st.buf[rel] * frac[st.route[rel]]
        # a remainder below a millionth of a tuple is float dust: it enters too
        moved = np.where(st.buf[rel] - moved < 1e-6, st.buf[rel], moved)
        st.q[rel] += moved
        st.buf[rel] -= moved

    # -- views ---------------------------------------------------------------
    def run_until(self, t: float) -> None:
        """Step until the clock reaches ``t`` (no control decisions)."""
        while self.now < t - 1e-9:
            self.step()

    def in_flight(self) -> float:
        """Tuples inside processing operators (queued or held back)."""
        return sum(st.backlog() for st in self.ops.values())
