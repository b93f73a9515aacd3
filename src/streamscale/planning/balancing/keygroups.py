"""The key-group allocation problem of ALBIC (paper 003, §3 and §4.3).

A key group is one shard of a keyed operator; it has a load (of the
bottleneck resource), a migration cost (∝ its state size), an output rate and
a rate to each downstream key group. Nodes have a load (the sum of their key
groups' loads), a capacity weight (heterogeneous nodes, §4.3.1) and may be
marked for removal (the set N_r of §4.3.1).

Every balancer of this family takes a :class:`KeyGroupProblem` and returns a
:class:`BalanceResult`: a new key group → node assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from streamscale.errors import ModelError
from streamscale.model import Cluster, Plan, Snapshot, Topology
from streamscale.model.ids import ShardId, group_id, instance_id

__all__ = ["BalanceResult", "KeyGroupProblem", "group_id", "keyed_operators"]


def keyed_operators(topology: Topology) -> tuple[str, ...]:
    """Keyed processing operators in topological order (those that own key groups)."""
    return tuple(
        n
        for n in topology.topological_order()
        if topology.operator(n).keyed and topology.operator(n).kind == "operator"
    )


def _operator(group: str) -> str:
    sid = ShardId.parse(group)
    return sid.operator if sid is not None else group


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class KeyGroupProblem:
    """Key groups, nodes and the current allocation (paper 003, Table 2).

    Build with :meth:`build` (validated) or :meth:`from_snapshot`.

    Attributes
    ----------
    groups, nodes
        Ids of the key groups (``K``) and nodes (``N``).
    load
        ``L_k``: load of each key group (any unit, e.g. cores), shape ``(K,)``.
    assignment
        ``x_kn`` as a node index per key group, shape ``(K,)``.
    cost
        ``c_k``: migration cost of each key group (∝ state size), shape ``(K,)``.
    capacity
        Capacity weight per node, normalised so the mean over N_keep is 1.
    removing
        ``True`` for nodes in N_r (marked for removal), shape ``(N,)``.
    operators
        Operator of each key group.
    output_rate
        Tuples/s each key group sends downstream, shape ``(K,)``.
    traffic
        ``(E, 3)`` rows ``(src group index, dst group index, rate)``.
    resources, resource_caps
        Optional extra per-resource loads ``(K, R)`` and per-node caps ``(N, R)``.
    """

    groups: tuple[str, ...]
    nodes: tuple[str, ...]
    load: np.ndarray
    assignment: np.ndarray
    cost: np.ndarray
    capacity: np.ndarray
    removing: np.ndarray
    operators: tuple[str, ...]
    output_rate: np.ndarray
    traffic: np.ndarray
    resources: np.ndarray | None = None
    resource_caps: np.ndarray | None = None
    group_index: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        groups: Sequence[str],
        nodes: Sequence[str],
        load: Sequence[float] | np.ndarray,
        assignment: Sequence[int] | np.ndarray,
        *,
        cost: Sequence[float] | np.ndarray | None = None,
        capacity: Sequence[float] | np.ndarray | None = None,
        removing: Iterable[str] = (),
        operators: Sequence[str] | None = None,
        output_rate: Sequence[float] | np.ndarray | None = None,
        traffic: Iterable[tuple[int, int, float]] = (),
        resources: np.ndarray | None = None,
        resource_caps: np.ndarray | None = None,
    ) -> KeyGroupProblem:
        """Validate and build; raises :class:`ModelError` naming the offending item.

        Examples
        --------
        Node ``a`` has twice ``b``'s capacity: weights are normalised to a mean of 1 over the
        nodes kept, and L̄ = Σ L_k / Σ w_n = 6 / 2 = 3 per unit of weight.

        >>> p = KeyGroupProblem.build(["g0", "g1", "g2"], ["a", "b"], [3.0, 1.0, 2.0], [0, 0, 1],
        ...                           capacity=[2.0, 1.0])
        >>> p.node_loads().tolist(), p.mean_load, p.capacity.round(3).tolist()
        ([4.0, 2.0], 3.0, [1.333, 0.667])
        >>> KeyGroupProblem.build(["g0"], ["a"], [1.0], [2])
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: g0: assigned to unknown node index 2
        """
        k, n = len(groups), len(nodes)
        if n == 0:
            raise ModelError("no nodes", item="nodes")
        if len(set(groups)) != k:
            raise ModelError("duplicate key group id", item="groups")
        if len(set(nodes)) != n:
            raise ModelError("duplicate node id", item="nodes")
        ld = np.asarray(load, dtype=float).reshape(-1)
        asg = np.asarray(assignment, dtype=np.int64).reshape(-1)
        cst = np.ones(k) if cost is None else np.asarray(cost, dtype=float).reshape(-1)
        cap = np.ones(n) if capacity is None else np.asarray(capacity, dtype=float).reshape(-1)
        out = np.zeros(k) if output_rate is None else np.asarray(output_rate, float).reshape(-1)
        for name, arr, size in (
            ("load", ld, k),
            ("assignment", asg, k),
            ("cost", cst, k),
            ("output_rate", out, k),
            ("capacity", cap, n),
        ):
            if arr.shape != (size,):
                raise ModelError(f"expected {size} values, got {arr.shape[0]}", item=name)
        for i in range(k):
            if not (ld[i] >= 0 and cst[i] >= 0 and out[i] >= 0):
                raise ModelError("load, cost and output_rate must be >= 0", item=groups[i])
            if not 0 <= asg[i] < n:
                raise ModelError(f"assigned to unknown node index {asg[i]}", item=groups[i])
        for j in range(n):
            if not cap[j] > 0:
                raise ModelError("capacity must be > 0", item=f"node {nodes[j]}")
        node_index = {name: j for j, name in enumerate(nodes)}
        rem = np.zeros(n, dtype=bool)
        for r in removing:
            if r not in node_index:
                raise ModelError("marked for removal but not a node", item=f"node {r}")
            rem[node_index[r]] = True
        if rem.all():
            raise ModelError("every node is marked for removal", item="nodes")
        cap = cap / cap[~rem].mean()
        tr = np.array([(int(a), int(b), float(r)) for a, b, r in traffic], dtype=float)
        tr = tr.reshape(-1, 3)
        if tr.size and ((tr[:, :2] < 0).any() or (tr[:, :2] >= k).any() or (tr[:, 2] < 0).any()):
            raise ModelError(
                "traffic names an unknown key group or a negative rate", item="traffic"
            )
        ops = tuple(operators) if operators is not None else tuple(_operator(g) for g in groups)
        if len(ops) != k:
            raise ModelError(f"expected {k} operators, got {len(ops)}", item="operators")
        if resources is not None:
            resources = np.asarray(resources, float).reshape(k, -1)
            if resource_caps is None:
                raise ModelError("resources given without resource_caps", item="resources")
            resource_caps = np.asarray(resource_caps, float).reshape(n, resources.shape[1])
            resources, resource_caps = _frozen(resources), _frozen(resource_caps)
        return cls(
            tuple(groups),
            tuple(nodes),
            _frozen(ld),
            _frozen(asg),
            _frozen(cst),
            _frozen(cap),
            _frozen(rem),
            ops,
            _frozen(out),
            _frozen(tr),
            resources,
            resource_caps,
            {g: i for i, g in enumerate(groups)},
        )

    # -- derived -----------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.groups)

    @property
    def n(self) -> int:
        return len(self.nodes)

    @property
    def keep(self) -> np.ndarray:
        """Boolean mask of N_keep (nodes not marked for removal)."""
        return ~self.removing

    @property
    def mean_load(self) -> float:
        """L̄ = Σ_k L_k / Σ_{n∈N_keep} w_n (paper 003, §4.3.1; w_n = capacity weight)."""
        return float(self.load.sum() / self.capacity[self.keep].sum())

    def node_loads(self, assignment: np.ndarray | None = None) -> np.ndarray:
        a = self.assignment if assignment is None else assignment
        return np.bincount(a, weights=self.load, minlength=self.n)

    def replace(self, **changes: object) -> KeyGroupProblem:
        """A validated copy with some of :meth:`build`'s arguments changed.

        ``removing`` takes node ids; ``assignment``/``load`` take arrays.
        """
        args: dict[str, object] = {
            "groups": self.groups,
            "nodes": self.nodes,
            "load": self.load,
            "assignment": self.assignment,
            "cost": self.cost,
            "capacity": self.capacity,
            "removing": [self.nodes[j] for j in np.flatnonzero(self.removing)],
            "operators": self.operators,
            "output_rate": self.output_rate,
            "traffic": [(int(a), int(b), float(r)) for a, b, r in self.traffic],
            "resources": self.resources,
            "resource_caps": self.resource_caps,
        }
        args.update(changes)
        return KeyGroupProblem.build(**args)  # type: ignore[arg-type]

    # -- from the domain model ----------------------------------------------
    @classmethod
    def from_snapshot(
        cls,
        snapshot: Snapshot,
        plan: Plan,
        topology: Topology,
        cluster: Cluster,
        *,
        operators: Sequence[str] | None = None,
    ) -> KeyGroupProblem:
        """Key groups of the keyed operators, as observed in ``snapshot``.

        A key group's node is read from the plan (routing table entry → unit →
        placement node); a key group the plan does not place yet starts on
        node ``g mod N`` (key groups spread evenly, as in paper 003, §5.1).
        Loads are ``ShardStats.load`` (cores), migration cost is the state size
        in bytes, node capacity is ``Node.capacity``; nodes whose ``NodeStats``
        say ``marked_for_removal`` form N_r.
        """
        ops = tuple(operators) if operators is not None else keyed_operators(topology)
        nodes = cluster.names
        nidx = {name: j for j, name in enumerate(nodes)}
        stats = {(s.operator, s.shard): s for s in snapshot.shards}
        groups: list[str] = []
        owner: list[str] = []
        load: list[float] = []
        cost: list[float] = []
        out: list[float] = []
        asg: list[int] = []
        for op_name in ops:
            op = topology.operator(op_name)
            for e in range(op.instances):
                table = plan.routing.tables.get(instance_id(op_name, e), ())
                for s in range(op.shards):
                    g = e * op.shards + s
                    st = stats.get((op_name, g))
                    groups.append(group_id(op_name, g))
                    owner.append(op_name)
                    load.append(st.load if st else 0.0)
                    cost.append(float(st.state_bytes) if st else 0.0)
                    out.append(st.output_rate if st else 0.0)
                    node = plan.placement.nodes.get(table[s]) if s < len(table) else None
                    if node is not None and node not in nidx:
                        raise ModelError("plan places a key group on an unknown node", item=node)
                    asg.append(nidx[node] if node is not None else (len(asg) % len(nodes)))
        gi = {g: i for i, g in enumerate(groups)}
        traffic = [
            (gi[group_id(t.src, t.src_shard)], gi[group_id(t.dst, t.dst_shard)], t.rate)
            for t in snapshot.traffic
            if group_id(t.src, t.src_shard) in gi and group_id(t.dst, t.dst_shard) in gi
        ]
        marked = [n for n in snapshot.marked_for_removal if n in nidx]
        return cls.build(
            groups,
            nodes,
            load,
            asg,
            cost=cost,
            capacity=[n.capacity for n in cluster.nodes],
            removing=sorted(marked),
            operators=owner,
            output_rate=out,
            traffic=traffic,
        )


@dataclass(frozen=True, eq=False)
class BalanceResult:
    """A balancer's answer: the new key group → node assignment and its figures.

    ``method`` says what produced it (e.g. ``"milp"``, ``"greedy-fallback"``,
    ``"current"`` when nothing better was found, ``"flux"``); ``solve_s`` is
    the solver time charged against the limit: CP-SAT's own reported wall
    time, or for HiGHS (which reports none) the sum of its step limits, an
    upper bound; 0 for heuristics.
    """

    assignment: np.ndarray
    method: str
    status: str = ""
    solve_s: float = 0.0
    collocated: tuple[tuple[int, ...], ...] = ()
    notes: tuple[str, ...] = ()
    extra: Mapping[str, float] = field(default_factory=dict)
