"""The group job model of task allocation and its objective, the IMC gain φ(X).

Paper 001, §2: a job is a DAG of *groups*; group v has |v| interchangeable
tasks sharing its processing cost pc_v (% of one core), and an edge (v_i, v_j)
carries an inter-module communication imc (MB/s) spread evenly over the
|v_i|·|v_j| task links (Eq. 1). Nodes have a capacity μ_n (% of one core).

Because tasks of a group are interchangeable, an allocation is fully described
by how many tasks of each group sit on each node; :class:`TaskAllocation`
stores exactly that and expands it to unit ids on request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

from streamscale.errors import ModelError
from streamscale.model import Cluster, Snapshot, Topology, unit_id
from streamscale.settings import Setting

__all__ = [
    "EPS",
    "UTILIZATION",
    "Group",
    "GroupEdge",
    "GroupJob",
    "TaskAllocation",
    "imc_gain",
    "modelled_rates",
]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
UTILIZATION = Setting(
    "utilization",
    float,
    1.0,
    "share of each node's spare capacity the job may use (§2.2)",
    low=0.0,
    low_open=True,
)

EPS = 1e-9
"""Slack on capacity comparisons, so float sums of task costs equal to μ still fit.

Allocators let a node's load reach μ + EPS·max(1, μ); checks allow twice that,
so float rounding between the two never turns a fit into a miss.
"""


@dataclass(frozen=True, slots=True)
class Group:
    """A group of ``tasks`` interchangeable tasks with total processing cost ``cost`` (%)."""

    name: str
    tasks: int
    cost: float


@dataclass(frozen=True, slots=True)
class GroupEdge:
    """Every task of ``src`` talks to every task of ``dst``; ``imc`` is the total in MB/s."""

    src: str
    dst: str
    imc: float


@dataclass(frozen=True, slots=True)
class GroupJob:
    """A validated task-allocation problem (paper 001, §2.1–2.2).

    Parameters
    ----------
    groups
        The groups, in a fixed order that algorithms use to break ties (so
        results never depend on names).
    edges
        Group pairs that communicate.
    nodes
        Node names, in a fixed order (ties between equal nodes go to the first).
    capacities
        μ_n per node, % of one core, aligned with ``nodes``.
    """

    groups: tuple[Group, ...]
    edges: tuple[GroupEdge, ...]
    nodes: tuple[str, ...]
    capacities: tuple[float, ...]
    # Index-based views the algorithms run on, filled by __post_init__.
    task_cost: tuple[float, ...] = field(init=False, repr=False, compare=False)
    tasks: tuple[int, ...] = field(init=False, repr=False, compare=False)
    ends: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    link_imc: tuple[float, ...] = field(init=False, repr=False, compare=False)
    units: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._validate()
        index = {g.name: i for i, g in enumerate(self.groups)}
        object.__setattr__(self, "task_cost", tuple(g.cost / g.tasks for g in self.groups))
        object.__setattr__(self, "tasks", tuple(g.tasks for g in self.groups))
        object.__setattr__(
            self,
            "units",
            tuple(tuple(unit_id(g.name, i) for i in range(g.tasks)) for g in self.groups),
        )
        object.__setattr__(self, "ends", tuple((index[e.src], index[e.dst]) for e in self.edges))
        object.__setattr__(
            self,
            "link_imc",
            tuple(
                e.imc / (self.tasks[a] * self.tasks[b])
                for e, (a, b) in zip(self.edges, self.ends, strict=True)
            ),
        )

    def _validate(self) -> None:
        names: set[str] = set()
        for g in self.groups:
            item = f"group {g.name or '?'}"
            if not g.name:
                raise ModelError("group has no name", item="group")
            if g.name in names:
                raise ModelError("duplicate group name", item=item)
            names.add(g.name)
            if g.tasks < 1:
                raise ModelError("tasks must be >= 1", item=item)
            if not (g.cost >= 0 and math.isfinite(g.cost)):
                raise ModelError(f"cost must be finite and >= 0, got {g.cost}", item=item)
        pairs: set[frozenset[str]] = set()
        for e in self.edges:
            item = f"edge {e.src}->{e.dst}"
            for end in (e.src, e.dst):
                if end not in names:
                    raise ModelError(f"unknown group {end!r}", item=item)
            if e.src == e.dst:
                raise ModelError("an edge must join two different groups", item=item)
            key = frozenset((e.src, e.dst))
            if key in pairs:
                raise ModelError("duplicate group pair", item=item)
            pairs.add(key)
            if not (e.imc >= 0 and math.isfinite(e.imc)):
                raise ModelError(f"imc must be finite and >= 0, got {e.imc}", item=item)
        if not self.nodes:
            raise ModelError("no nodes to allocate to", item="cluster")
        if len(set(self.nodes)) != len(self.nodes):
            raise ModelError("duplicate node name", item="cluster")
        if len(self.capacities) != len(self.nodes):
            raise ModelError("one capacity per node is required", item="cluster")
        for n, c in zip(self.nodes, self.capacities, strict=True):
            if not (c >= 0 and math.isfinite(c)):
                raise ModelError(f"capacity must be finite and >= 0, got {c}", item=f"node {n}")

    # -- construction ------------------------------------------------------
    @classmethod
    def build(
        cls,
        groups: Sequence[tuple[str, int, float]] | Sequence[Group],
        edges: Sequence[tuple[str, str, float]] | Sequence[GroupEdge],
        capacities: Mapping[str, float],
    ) -> GroupJob:
        """Build from plain tuples ``(name, tasks, cost)``, ``(src, dst, imc)`` and ``{node: μ}``.

        Examples
        --------
        >>> job = GroupJob.build([("A", 2, 60.0), ("B", 1, 40.0)], [("A", "B", 8.0)], {"n0": 100.0})
        >>> job.task_cost, job.total_cost, job.significance(0)  # s = 8 / (60 + 40)
        ((30.0, 40.0), 100.0, 0.08)
        >>> GroupJob.build([("A", 2, 60.0)], [("A", "C", 8.0)], {"n0": 100.0})
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: edge A->C: unknown group 'C'
        """
        gs = tuple(
            g if isinstance(g, Group) else Group(g[0], int(g[1]), float(g[2])) for g in groups
        )
        es = tuple(
            e if isinstance(e, GroupEdge) else GroupEdge(e[0], e[1], float(e[2])) for e in edges
        )
        return cls(gs, es, tuple(capacities), tuple(float(c) for c in capacities.values()))

    @classmethod
    def from_topology(
        cls,
        topology: Topology,
        cluster: Cluster,
        *,
        rate: float | Mapping[str, float] | None = None,
        snapshot: Snapshot | None = None,
        tasks: Mapping[str, int] | None = None,
        utilization: float = UTILIZATION.default,
        alpha: float | None = None,
    ) -> GroupJob:
        """The group job of a topology on a cluster (paper 001, §2).

        Every operator is a group of ``tasks[op]`` (default: its ``instances``)
        tasks. Its cost is the observed load in ``snapshot`` (Σ shard loads, or
        input rate × ``cost_ms``) when present, else ``cost_ms`` × the rate
        propagated from ``rate``. An edge's IMC is tuples/s × tuple bytes.

        Parameters
        ----------
        utilization
            Fraction of each node's spare capacity (capacity − reserved CPU)
            the job may use; 1 packs nodes to the full (§2.2, "minimise IMC").
        alpha
            When given, balance instead: μ_n = α·Σpc/|N| capped by the node's
            spare capacity (§2.2, tolerance α > 1).
        """
        if not utilization > 0:
            raise ModelError(f"utilization must be > 0, got {utilization}", item="utilization")
        if alpha is not None and not alpha > 0:
            raise ModelError(f"alpha must be > 0, got {alpha}", item="alpha")
        if not cluster.nodes:
            raise ModelError("cluster has no nodes to allocate to", item="cluster")
        need_rates = (
            snapshot is None
            or any(op.name not in snapshot.operators for op in topology.operators)
            or any(e.name not in snapshot.edges for e in topology.edges)
        )
        omega, edge_rates = modelled_rates(topology, rate, snapshot) if need_rates else ({}, {})
        groups: list[Group] = []
        for op in topology.operators:
            n = int((tasks or {}).get(op.name, op.instances))
            groups.append(Group(op.name, n, _operator_cost(op.name, op.cost_ms, omega, snapshot)))
        edges: list[GroupEdge] = []
        for e in topology.edges:
            tps = (
                snapshot.edges[e.name]
                if snapshot is not None and e.name in snapshot.edges
                else edge_rates[e.name]
            )
            edges.append(GroupEdge(e.src, e.dst, tps * topology.edge_bytes(e) / 1e6))
        spare = [max(0.0, n.capacity - n.reserved_cpu) * utilization for n in cluster.nodes]
        if alpha is not None:
            share = alpha * sum(g.cost for g in groups) / len(cluster.nodes)
            spare = [min(s, share) for s in spare]
        return cls(tuple(groups), tuple(edges), cluster.names, tuple(spare))

    # -- derived -----------------------------------------------------------
    @property
    def total_tasks(self) -> int:
        return sum(self.tasks)

    @property
    def total_cost(self) -> float:
        return sum(g.cost for g in self.groups)

    def significance(self, edge: int) -> float:
        """Relative significance s = imc / (pc_i + pc_j) of a group pair (paper 001, Eq. 2)."""
        a, b = self.ends[edge]
        denom = self.groups[a].cost + self.groups[b].cost
        imc = self.edges[edge].imc
        return imc / denom if denom > 0 else (math.inf if imc > 0 else 0.0)

    def renamed(self, groups: Mapping[str, str], nodes: Mapping[str, str]) -> GroupJob:
        """The same job with groups and nodes renamed (order kept)."""
        return GroupJob(
            tuple(Group(groups[g.name], g.tasks, g.cost) for g in self.groups),
            tuple(GroupEdge(groups[e.src], groups[e.dst], e.imc) for e in self.edges),
            tuple(nodes[n] for n in self.nodes),
            self.capacities,
        )

    def with_capacities(self, capacities: Sequence[float]) -> GroupJob:
        return GroupJob(self.groups, self.edges, self.nodes, tuple(capacities))

    def scaled(self, factor: float) -> GroupJob:
        """Costs and IMC scaled by ``factor`` (both grow linearly with the input rate, §7.4)."""
        return GroupJob(
            tuple(Group(g.name, g.tasks, g.cost * factor) for g in self.groups),
            tuple(GroupEdge(e.src, e.dst, e.imc * factor) for e in self.edges),
            self.nodes,
            self.capacities,
        )


def modelled_rates(
    topology: Topology, rate: float | Mapping[str, float] | None, snapshot: Snapshot | None
) -> tuple[dict[str, float], dict[str, float]]:
    """Tuples/s per operator and per edge for what a snapshot does not report.

    From ``rate`` (or the sources' own rates); when neither is given, from the sources'
    output rates in ``snapshot`` (a running job's sources rarely declare a rate in the
    topology); else zero everywhere.
    """
    try:
        return topology.rates(rate), topology.edge_rates(rate)
    except ModelError:
        pass
    ops = snapshot.operators if snapshot is not None else {}
    if topology.sources and all(s.name in ops for s in topology.sources):
        seen = {s.name: ops[s.name].output_rate for s in topology.sources}
        return topology.rates(seen), topology.edge_rates(seen)
    return dict.fromkeys(topology.names, 0.0), {e.name: 0.0 for e in topology.edges}


def _operator_cost(
    name: str, cost_ms: float, omega: Mapping[str, float], snapshot: Snapshot | None
) -> float:
    if snapshot is not None and name in snapshot.operators:
        shards = snapshot.shards_of(name)
        if shards:
            return 100.0 * sum(s.load for s in shards)
        return snapshot.operators[name].input_rate * cost_ms / 10.0
    # cost_ms per tuple × tuples/s = ms of CPU per second; /1000 × 100 % = /10.
    return omega[name] * cost_ms / 10.0


def imc_gain(job: GroupJob, counts: Sequence[Sequence[int]]) -> float:
    """φ(X): IMC (MB/s) of the task links whose two ends share a node (paper 001, §2.2)."""
    total = 0.0
    for (a, b), w in zip(job.ends, job.link_imc, strict=True):
        ca, cb = counts[a], counts[b]
        total += w * sum(x * y for x, y in zip(ca, cb, strict=True))
    return total


@dataclass(frozen=True, slots=True)
class TaskAllocation:
    """Result of a task allocator: tasks of each group per node.

    ``counts[g][n]`` is the number of tasks of group ``g`` on node ``n`` (both
    by position in the job); ``unplaced[g]`` the tasks that found no node.
    ``complete`` is False exactly when some task is unplaced — an explicit
    failure, never a silent one.
    """

    job: GroupJob
    counts: tuple[tuple[int, ...], ...]
    unplaced: tuple[int, ...]
    algorithm: str
    proven_optimal: bool = False

    @classmethod
    def of(
        cls,
        job: GroupJob,
        counts: Sequence[Sequence[int]],
        algorithm: str,
        *,
        proven_optimal: bool = False,
    ) -> TaskAllocation:
        cs = tuple(tuple(int(x) for x in row) for row in counts)
        unplaced = tuple(t - sum(row) for t, row in zip(job.tasks, cs, strict=True))
        if any(u < 0 for u in unplaced):
            bad = next(i for i, u in enumerate(unplaced) if u < 0)
            raise ModelError("more tasks placed than the group has", item=job.groups[bad].name)
        return cls(job, cs, unplaced, algorithm, proven_optimal)

    @property
    def complete(self) -> bool:
        return not any(self.unplaced)

    @property
    def gain(self) -> float:
        """φ(X) in MB/s."""
        return imc_gain(self.job, self.counts)

    @property
    def collocated_links(self) -> int:
        """Task links (pairs of communicating tasks) whose ends share a node."""
        return sum(
            sum(x * y for x, y in zip(self.counts[a], self.counts[b], strict=True))
            for a, b in self.job.ends
        )

    @property
    def loads(self) -> tuple[float, ...]:
        """Processing cost placed on each node (%)."""
        job = self.job
        return tuple(
            sum(job.task_cost[g] * self.counts[g][n] for g in range(len(job.groups)))
            for n in range(len(job.nodes))
        )

    def respects_capacities(self) -> bool:
        return all(
            load <= cap + 2 * EPS * max(1.0, cap)
            for load, cap in zip(self.loads, self.job.capacities, strict=True)
        )

    def node_counts(self) -> dict[str, dict[str, int]]:
        """``{group: {node: tasks}}`` with zero entries left out."""
        job = self.job
        return {
            g.name: {job.nodes[n]: x for n, x in enumerate(row) if x}
            for g, row in zip(job.groups, self.counts, strict=True)
        }

    def assignment(self) -> dict[str, str]:
        """Unit id ``f"{group}#{i}"`` → node for every placed task (nodes in job order)."""
        nodes = self.job.nodes
        out: dict[str, str] = {}
        for units, row in zip(self.job.units, self.counts, strict=True):
            i = 0
            for n, x in enumerate(row):
                if x:
                    out.update(zip(units[i : i + x], repeat(nodes[n], x), strict=True))
                    i += x
        return out
