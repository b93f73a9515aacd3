"""Elastic Allocator: CPU- and bandwidth-aware operator placement (paper 002).

The elastic operator allocation problem (paper 002, §III.B) places the
operators of a query on nodes that already carry load: node ``i`` has a CPU
capacity ``C0_i + CS_i`` of which ``C0_i`` is used by other work, and a link
of ``bw_i`` Mbit/s of which ``B0_i`` is used. Operator ``j`` needs
``e_j·r_j`` CPU (% of one core); a flow between two operators costs its
Mbit/s on the network only when its endpoints sit on different nodes.

Network model (**Choice**; the paper's bandwidth formula is garbled): a star.
Every node has one link to a switch; traffic between two different nodes
loads both endpoints' links, and a link's usage counts what it sends plus what
it receives (as a monitor such as Ganglia reports ``bytes_in + bytes_out``).
Traffic inside a node is free. So there are as many links as nodes.

Feasibility (§IV.C): every node load ``(C0_i + Σ_{j on i} e_j r_j)/(C0_i+CS_i)
≤ D_CPU`` and every link ``(B0_i + traffic_i)/bw_i ≤ D_BW`` — checked where the
placement adds load (a node that other work already keeps above D_CPU does not
make every placement infeasible, only those that add to it).

Objectives (§IV.C): utilisation ``R_utl = Σ used / Σ capacity`` and
deviation ``R_dev = sqrt(Σ_i (R_i − R_avg)²)``, per resource. Both are
reported on *effective* usage (**Choice**, so that an overload shows as it
would on a monitor): an overloaded node or link is shared in proportion to
demand, so the query's operators there get ``capacity / (C0 + demand)`` of
what they need; back-pressure throttles the whole query to the smallest such
share ``λ`` (its sustainable fraction of the input rate), and each node then
uses ``min(C0 + λ·demand, capacity)`` (other work takes what the throttled
query leaves).

Bandwidth utilisation (**Choice**): link usage read as utilisation would make
a placement look better the more of the query's traffic it sends between
nodes, so collocating two operators would lower it. ``bw_utilization`` is
therefore defined on the query's own traffic at its achieved throughput:
``λ · Σ_f r_f / Σ_i bw_i`` — every flow counted once at the rate the
placement sustains, whether it crosses the network or stays inside a node,
over the cluster's link capacity. It differs between placements only through
λ. What the links carry (other work plus the query's inter-node traffic at
λ, ``Σ_i min(B0_i + λ·traffic_i, bw_i) / Σ_i bw_i``, what a monitor shows) is
``link_utilization``; ``bw_deviation`` is the deviation of those link loads.

This module holds the problem, its evaluation, the node clustering and the
two baselines of §V, :func:`random_placement` and :func:`even_placement`
(Storm's even scheduler); GMA itself (§IV.E, Algorithm 1) is in
:mod:`streamscale.planning.placement.gma`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from streamscale.errors import ModelError
from streamscale.settings import Setting

__all__ = [
    "D_BW",
    "D_CPU",
    "LEVELS",
    "AllocatorNode",
    "AllocatorOperator",
    "AllocatorProblem",
    "AllocatorResult",
    "Evaluation",
    "Flow",
    "deviation",
    "evaluate",
    "even_placement",
    "level_of",
    "node_levels",
    "random_placement",
]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
D_BW = Setting(
    "d_bw",
    float,
    0.9,
    "D_BW: most bandwidth share a node may carry (§IV)",
    low=0.0,
    low_open=True,
    high=1.0,
)

#: The setting, declared once (the planner's schema takes it; defaults below read it).
D_CPU = Setting(
    "d_cpu",
    float,
    0.9,
    "D_CPU: most CPU share a node may carry (§IV)",
    low=0.0,
    low_open=True,
    high=1.0,
)

LEVELS: tuple[str, str, str] = ("light", "moderate", "heavy")
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class AllocatorNode:
    """A node: total CPU (% of one core), existing CPU use C0, link Mbit/s, existing use B0.

    ``slots`` is the number of free worker slots (used only by the even scheduler).
    """

    name: str
    cpu_capacity: float
    reserved_cpu: float = 0.0
    bandwidth_mbps: float = 1000.0
    reserved_bandwidth_mbps: float = 0.0
    slots: int = 1


@dataclass(frozen=True, slots=True)
class AllocatorOperator:
    """An operator (one placeable unit) and its CPU demand ``e_j·r_j`` in % of one core."""

    name: str
    cpu: float


@dataclass(frozen=True, slots=True)
class Flow:
    """Traffic between two operators in Mbit/s (direction is irrelevant to the star model)."""

    src: str
    dst: str
    mbps: float


@dataclass(frozen=True, slots=True)
class AllocatorProblem:
    """Paper 002's EOA instance ``<D, F0, Q>`` for one workload (demands already at its rate).

    Parameters
    ----------
    nodes, operators, flows
        The cluster with its existing usage F0, the query Q and its traffic.
    d_cpu, d_bw
        Upper bounds D_CPU and D_BW on every node load and link usage (fractions).
    """

    nodes: tuple[AllocatorNode, ...]
    operators: tuple[AllocatorOperator, ...]
    flows: tuple[Flow, ...] = ()
    d_cpu: float = D_CPU.default
    d_bw: float = D_BW.default
    _index: Mapping[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ModelError("no nodes to place on", item="cluster")
        for n in self.nodes:
            item = f"node {n.name}"
            if not n.cpu_capacity > 0 or not n.bandwidth_mbps > 0:
                raise ModelError("cpu_capacity and bandwidth_mbps must be > 0", item=item)
            if n.reserved_cpu < 0 or n.reserved_bandwidth_mbps < 0 or n.slots < 0:
                raise ModelError("reserved usage and slots must be >= 0", item=item)
        if len({n.name for n in self.nodes}) != len(self.nodes):
            raise ModelError("duplicate node name", item="cluster")
        index: dict[str, int] = {}
        for k, o in enumerate(self.operators):
            if o.name in index:
                raise ModelError("duplicate operator name", item=f"operator {o.name}")
            if o.cpu < 0 or not math.isfinite(o.cpu):
                raise ModelError("cpu demand must be finite and >= 0", item=f"operator {o.name}")
            index[o.name] = k
        for f in self.flows:
            for end in (f.src, f.dst):
                if end not in index:
                    raise ModelError(f"unknown operator {end!r}", item=f"flow {f.src}->{f.dst}")
            if f.mbps < 0 or not math.isfinite(f.mbps):
                raise ModelError("mbps must be finite and >= 0", item=f"flow {f.src}->{f.dst}")
        if not self.d_cpu > 0 or not self.d_bw > 0:
            raise ModelError("d_cpu and d_bw must be > 0", item="constraints")
        object.__setattr__(self, "_index", index)

    def operator_index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise ModelError("no such operator", item=name) from None

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A placement's loads and objectives (paper 002, §IV.A–C).

    ``node_cpu_load``/``node_bw_load`` are planned fractions (may exceed 1);
    ``throughput`` is λ, the fraction of the query's rate the cluster sustains;
    utilisation and deviation are computed on effective usage; ``bw_utilization``
    is the query's traffic at λ over the link capacity, ``link_utilization``
    what the links carry (see module doc).
    """

    node_cpu_load: tuple[float, ...]
    node_bw_load: tuple[float, ...]
    feasible: bool
    throughput: float
    cpu_utilization: float
    bw_utilization: float
    cpu_deviation: float
    bw_deviation: float
    link_utilization: float = 0.0


@dataclass(frozen=True, slots=True)
class AllocatorResult:
    """A placement (operator → node), whether it is feasible, and how it was found.

    ``best_effort`` names operators the fallback had to place on a node where
    they break a constraint; ``exhausted`` is True when the budget ran out;
    ``proven_infeasible`` is True when the search finished without a feasible
    placement.
    """

    assignment: Mapping[str, str]
    evaluation: Evaluation
    operations: int = 0
    best_effort: tuple[str, ...] = ()
    exhausted: bool = False
    proven_infeasible: bool = False

    @property
    def feasible(self) -> bool:
        return self.evaluation.feasible


def level_of(load: float, thresholds: tuple[float, float] = (0.4, 0.8)) -> int:
    """Index into :data:`LEVELS`: light below 40 %, moderate below 80 %, heavy above (§IV.D)."""
    return 0 if load < thresholds[0] else 1 if load < thresholds[1] else 2


def deviation(fractions: Sequence[float] | np.ndarray) -> float:
    """``R_dev = sqrt(Σ_i (R_i − R_avg)²)`` (paper 002, §IV.C)."""
    a = np.asarray(fractions, dtype=float)
    return float(np.sqrt(np.sum((a - a.mean()) ** 2))) if a.size else 0.0


def _demands(
    problem: AllocatorProblem, assignment: Mapping[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """CPU (% core) and link traffic (Mbit/s) that the placed operators add per node."""
    pos = {n.name: i for i, n in enumerate(problem.nodes)}
    cpu = np.zeros(len(problem.nodes))
    bw = np.zeros(len(problem.nodes))
    for o in problem.operators:
        node = assignment.get(o.name)
        if node is not None:
            if node not in pos:
                raise ModelError("placed on an unknown node", item=f"operator {o.name}")
            cpu[pos[node]] += o.cpu
    for f in problem.flows:
        a, b = assignment.get(f.src), assignment.get(f.dst)
        if a is not None and b is not None and a != b:
            bw[pos[a]] += f.mbps
            bw[pos[b]] += f.mbps
    return cpu, bw


def node_levels(
    problem: AllocatorProblem,
    assignment: Mapping[str, str] | None = None,
    *,
    thresholds: tuple[float, float] = (0.4, 0.8),
) -> dict[str, str]:
    """GMA phase 1 (paper 002, §IV.E): each node's level from its CPU and link usage.

    **Choice**: a node is as heavy as its more used resource, ``max(cpu, bw)``.
    """
    cpu, bw = _demands(problem, assignment or {})
    out: dict[str, str] = {}
    for i, n in enumerate(problem.nodes):
        load = max(
            (n.reserved_cpu + cpu[i]) / n.cpu_capacity,
            (n.reserved_bandwidth_mbps + bw[i]) / n.bandwidth_mbps,
        )
        out[n.name] = LEVELS[level_of(load, thresholds)]
    return out


def evaluate(problem: AllocatorProblem, assignment: Mapping[str, str]) -> Evaluation:
    """Loads, feasibility, throughput λ and the objectives of (a possibly partial) placement.

    Paper 002, §IV.A–C, with the star network of the module docstring.
    """
    cpu, bw = _demands(problem, assignment)
    cap = np.array([n.cpu_capacity for n in problem.nodes])
    c0 = np.array([n.reserved_cpu for n in problem.nodes])
    link = np.array([n.bandwidth_mbps for n in problem.nodes])
    b0 = np.array([n.reserved_bandwidth_mbps for n in problem.nodes])
    cpu_load = (c0 + cpu) / cap
    bw_load = (b0 + bw) / link
    # A node or link already above its bound through other work only breaks the
    # constraint if the placement adds to it.
    feasible = bool(
        np.all((cpu <= 0) | (cpu_load <= problem.d_cpu + _EPS))
        and np.all((bw <= 0) | (bw_load <= problem.d_bw + _EPS))
    )
    lam = 1.0
    for demand, have, size in ((cpu, c0, cap), (bw, b0, link)):
        need = demand > _EPS
        if np.any(need):
            share = size[need] / (have[need] + demand[need])
            lam = min(lam, float(np.min(share)))
    used_cpu = np.minimum(c0 + lam * cpu, cap)
    used_bw = np.minimum(b0 + lam * bw, link)
    return Evaluation(
        node_cpu_load=tuple(float(x) for x in cpu_load),
        node_bw_load=tuple(float(x) for x in bw_load),
        feasible=feasible,
        throughput=lam,
        cpu_utilization=float(used_cpu.sum() / cap.sum()),
        bw_utilization=float(lam * sum(f.mbps for f in problem.flows) / link.sum()),
        cpu_deviation=deviation(used_cpu / cap),
        bw_deviation=deviation(used_bw / link),
        link_utilization=float(used_bw.sum() / link.sum()),
    )


def random_placement(problem: AllocatorProblem, *, seed: int | None = None) -> AllocatorResult:
    """Baseline *Random* (paper 002, §V): every operator on a uniformly drawn node.

    Blind to load and constraints, hence its fluctuation in Figs. 4–5.

    Examples
    --------
    The problem of :func:`~streamscale.planning.placement.gma.gma`'s example; one seed draws
    the overloading placement, another the best one.

    >>> from streamscale.planning.placement.elastic_allocator import (
    ...     AllocatorNode, AllocatorOperator, AllocatorProblem, Flow)
    >>> p = AllocatorProblem((AllocatorNode("n0", 400.0, reserved_cpu=280.0),
    ...                       AllocatorNode("n1", 400.0, reserved_cpu=40.0)),
    ...                      (AllocatorOperator("a", 120.0), AllocatorOperator("b", 80.0)),
    ...                      (Flow("a", "b", 100.0),))
    >>> [dict(random_placement(p, seed=s).assignment) for s in (0, 1)]
    [{'a': 'n1', 'b': 'n1'}, {'a': 'n0', 'b': 'n1'}]
    """
    rng = np.random.default_rng(seed)
    names = problem.node_names
    picks = rng.integers(0, len(names), size=len(problem.operators))
    assignment = {o.name: names[int(k)] for o, k in zip(problem.operators, picks, strict=True)}
    return AllocatorResult(assignment, evaluate(problem, assignment), len(problem.operators))


def even_placement(problem: AllocatorProblem, *, workers: int | None = None) -> AllocatorResult:
    """Baseline *Even* (paper 002, §V): Storm's even scheduler, blind to load.

    Free slots are grouped by node, nodes with more free slots first (stable),
    and interleaved (Storm's ``sort-slots``); the first ``workers`` slots (all
    by default) receive the operators round-robin in declaration order. A
    cluster with no free slot at all gets one slot per node.

    Examples
    --------
    The problem of :func:`~streamscale.planning.placement.gma.gma`'s example: the even
    scheduler deals ``a`` to ``n0`` and ``b`` to ``n1``, blind to the 70 % already used on
    ``n0``, which it fills to 100 % (> D_CPU = 0.9).

    >>> from streamscale.planning.placement.elastic_allocator import (
    ...     AllocatorNode, AllocatorOperator, AllocatorProblem, Flow)
    >>> p = AllocatorProblem((AllocatorNode("n0", 400.0, reserved_cpu=280.0),
    ...                       AllocatorNode("n1", 400.0, reserved_cpu=40.0)),
    ...                      (AllocatorOperator("a", 120.0), AllocatorOperator("b", 80.0)),
    ...                      (Flow("a", "b", 100.0),))
    >>> r = even_placement(p)
    >>> dict(r.assignment), r.feasible, r.evaluation.node_cpu_load
    ({'a': 'n0', 'b': 'n1'}, False, (1.0, 0.3))
    """
    groups = sorted(
        ([i] * n.slots for i, n in enumerate(problem.nodes) if n.slots > 0),
        key=len,
        reverse=True,
    )
    if not groups:
        groups = [[i] for i in range(len(problem.nodes))]
    depth = max(len(g) for g in groups)
    slots = [g[s] for s in range(depth) for g in groups if s < len(g)]
    if workers is not None:
        if workers < 1:
            raise ModelError("workers must be >= 1", item="even scheduler")
        slots = slots[:workers]
    names = problem.node_names
    assignment = {o.name: names[slots[k % len(slots)]] for k, o in enumerate(problem.operators)}
    return AllocatorResult(assignment, evaluate(problem, assignment), len(problem.operators))
