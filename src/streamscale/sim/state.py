"""Simulator state: per-operator shard vectors, pools of cores and the plan mapping.

A *pool* is a set of cores sharing one FIFO queue. For a keyed operator every
unit (Elasticutor task / RC task) is its own pool of one core and shards are
routed to pools by the plan's routing tables; a stateless operator has one pool
per instance whose cores serve a shared queue (shuffle grouping to whichever
core is free), which is what makes an M/M/k station. A pool is identified by
``(unit, node)``: a unit that changes node is a new pool, so its shards move
with their state, as in paper 000, §3.2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from streamscale.errors import ModelError
from streamscale.model import Operator, Plan, Topology
from streamscale.model.plan import unit_id

__all__ = ["LATENCY_BINS", "OpState", "Pools", "SimConfig", "instance_name", "shard_targets"]

#: Upper edges (seconds) of the latency histogram bins: 0.1 ms … ~3 h, log-spaced.
LATENCY_BINS: np.ndarray = np.logspace(-4, 4, 321)


def instance_name(operator: str, index: int) -> str:
    """Id of instance ``index`` of ``operator`` (CONTRACTS: ``op[e]``)."""
    return f"{operator}[{index}]"


@dataclass
class Pools:
    """The pools of one operator: key ``(unit, node)`` → index, cores and node of each."""

    keys: list[tuple[str, str]] = field(default_factory=list)
    index: dict[tuple[str, str], int] = field(default_factory=dict)
    units: np.ndarray = field(default_factory=lambda: np.zeros(0))
    node: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def get(self, unit: str, node: int, node_name: str, cores: int = 1) -> int:
        key = (unit, node_name)
        idx = self.index.get(key)
        if idx is None:
            idx = len(self.keys)
            self.keys.append(key)
            self.index[key] = idx
            self.units = np.append(self.units, float(cores))
            self.node = np.append(self.node, node)
        else:
            self.units[idx] = float(cores)
        return idx

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class OpState:
    """Vectors over the shards of one processing operator (global shard index).

    ``q`` holds tuples queued at the shard's current pool, ``buf`` tuples held
    back while the shard (or, under RC, the whole operator) is paused, and after
    it resumes those its task's bounded queue could not take yet; ``route``
    is the pool serving the shard now and ``target`` the pool the plan wants.
    ``phase``: 0 running, 1 draining towards a label, 2 state in transfer,
    3 done and waiting for the rest of the operator (RC only).
    """

    op: Operator
    keyed: bool
    instances: int
    per_instance: int
    cost: float
    cv: float
    exponential: bool
    out_bytes: int
    in_bytes: int
    shard_bytes: np.ndarray
    outputs: list[tuple[int, float]]
    phases: int = 1
    pools: Pools = field(default_factory=Pools)
    head: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # dynamic vectors (length S)
    q: np.ndarray = field(default_factory=lambda: np.zeros(0))
    buf: np.ndarray = field(default_factory=lambda: np.zeros(0))
    route: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    target: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dest: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    phase: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    label_left: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ready_at: np.ndarray = field(default_factory=lambda: np.zeros(0))
    xfer_left: np.ndarray = field(default_factory=lambda: np.zeros(0))
    moved_at: np.ndarray = field(default_factory=lambda: np.zeros(0))
    labelled_at: np.ndarray = field(default_factory=lambda: np.zeros(0))
    remote_mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    home: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    p: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p_version: object = None
    protocol: str = "ec"
    rc_active: bool = False
    # cumulative counters
    arrived: np.ndarray = field(default_factory=lambda: np.zeros(0))
    served: np.ndarray = field(default_factory=lambda: np.zeros(0))
    emitted: float = 0.0
    in_system_s: float = 0.0
    lat_sum: float = 0.0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(LATENCY_BINS.size + 1))
    shard_moves: int = 0
    remote_moves: int = 0
    pause_s: float = 0.0
    sync_s: float = 0.0
    transfer_s: float = 0.0
    completed_moves: int = 0
    rc_started: float = 0.0
    reconfigurations: list[tuple[float, float]] = field(default_factory=list)

    @property
    def shards(self) -> int:
        return self.instances * self.per_instance

    def allocate(self) -> None:
        s = self.shards
        for name in (
            "q",
            "buf",
            "label_left",
            "ready_at",
            "xfer_left",
            "moved_at",
            "labelled_at",
            "arrived",
            "served",
        ):
            setattr(self, name, np.zeros(s))
        for name in ("route", "target", "dest"):
            setattr(self, name, np.zeros(s, dtype=np.int64))
        self.phase = np.zeros(s, dtype=np.int8)
        self.remote_mask = np.zeros(s, dtype=bool)
        self.home = np.zeros(self.instances, dtype=np.int64)
        self.p = np.full(s, 1.0 / s)

    def backlog(self) -> float:
        return float(self.q.sum() + self.buf.sum())


def shard_targets(
    topology: Topology, plan: Plan, st: OpState, node_index: dict[str, int]
) -> tuple[np.ndarray, str]:
    """Pool index wanted for every shard of ``st`` under ``plan``, and the protocol.

    The protocol is ``rc`` when a routing target is not one of the instance's own
    units (operator-level repartitioning), else ``ec`` (CONTRACTS.md).
    """
    name = st.op.name
    z = st.per_instance
    out = np.zeros(st.shards, dtype=np.int64)
    protocol = "ec"
    for e in range(st.instances):
        inst = instance_name(name, e)
        if not st.keyed:
            k = int(plan.allocation.cores.get(inst, 0))
            if k < 1:
                raise ModelError("stateless instance has no cores in the plan", item=inst)
            node = _node_of(plan, unit_id(inst, 0), node_index)
            out[e] = st.pools.get(inst, node_index[node], node, cores=k)
            continue
        table = plan.routing.tables.get(inst)
        if table is None or len(table) != z:
            raise ModelError(f"routing table must have {z} entries", item=inst)
        cache: dict[str, int] = {}
        for s, unit in enumerate(table):
            idx = cache.get(unit)
            if idx is None:
                if not unit.startswith(inst + "#"):
                    protocol = "rc"
                node = _node_of(plan, unit, node_index)
                idx = cache[unit] = st.pools.get(unit, node_index[node], node)
            out[e * z + s] = idx
    return out, protocol


def _node_of(plan: Plan, unit: str, node_index: dict[str, int]) -> str:
    node = plan.placement.nodes.get(unit)
    if node is None:
        raise ModelError("unit has no node in the placement", item=unit)
    if node not in node_index:
        raise ModelError("unit placed on an unknown node", item=f"{unit} -> {node}")
    return node


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Kernel settings.

    Parameters
    ----------
    dt
        Step length in seconds.
    queue_capacity
        Tuples a pool may hold per core before back-pressure stops its senders
        (used when ``queue_s`` is None).
    queue_s
        Seconds of work a pool may hold per core: ``queue_s / cost`` tuples, so a
        fast operator's queue is as long *in time* as a slow one's.
    service
        ``normal`` (per-tuple cost with mean c and coefficient of variation ``cost_cv``,
        paper 000 §5.1, served as Erlang-``round(1/cv²)``) or ``exponential``.
    cost_cv
        Coefficient of variation of the per-tuple cost for ``normal``.
    ec_sync_s
        Fixed control latency of Elasticutor's labeling-tuple handshake (§5.1: ≈2 ms).
    rc_sync_s
        RC's synchronisation cost per upstream instance (pause, clean in-flight
        tuples, update routing); it grows with the upstream instances (§5.1, Fig. 12a).
        The default puts 32 upstream instances at 0.64 s, 2.5 orders of magnitude
        above Elasticutor's 2 ms, as the paper reports (2-3 orders).
    rc_sync_shard_s
        RC's synchronisation cost per moved shard (its routing entry handed over
        in the global protocol). The paper gives no per-shard figure; 0.2 ms (a
        tenth of Elasticutor's whole per-shard handshake) is an assumption. At
        2 ms per shard and upstream instance, the first repartitioning of the
        32-node run (thousands of shards) paused RC for longer than the run.
    max_rate
        Cap on a saturating source (tuples/s) so the step stays finite.
    """

    dt: float = 0.01
    queue_capacity: float = 1000.0
    queue_s: float | None = None
    service: Literal["normal", "exponential"] = "normal"
    cost_cv: float = 0.5
    ec_sync_s: float = 0.002
    rc_sync_s: float = 0.02
    rc_sync_shard_s: float = 0.0002
    max_rate: float = 1e8

    def __post_init__(self) -> None:
        if not self.dt > 0:
            raise ModelError("dt must be > 0", item="sim.dt")
        if not self.queue_capacity > 0:
            raise ModelError("queue_capacity must be > 0", item="sim.queue_capacity")
        if self.queue_s is not None and not self.queue_s > 0:
            raise ModelError("queue_s must be > 0", item="sim.queue_s")
        if self.service not in ("normal", "exponential"):
            raise ModelError("service must be normal or exponential", item="sim.service")
