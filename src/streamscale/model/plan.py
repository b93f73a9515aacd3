"""Plans: how much (allocation), where (placement) and which keys (routing).

Vocabulary (docs/architecture.md, "Vocabulary"): an *instance* is Elasticutor's elastic
executor, a group's task or a task's thread bundle; a *unit* is one core-sized piece of an
instance (an Elasticutor task, a paper-001 task, a paper-004 thread); a
*target* of routing is a unit (or a node, for ALBIC's key group → node).

* ``Allocation.cores``: units per instance (k_j, tasks per group, threads per task).
* ``Placement.nodes``: unit → node (or slot ``vm/slot``).
* ``Routing.tables``: instance → tuple indexed by shard, giving the target unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from streamscale.model.ids import instance_of, unit_id

__all__ = [
    "Allocation",
    "CoreMove",
    "Placement",
    "Plan",
    "PlanDiff",
    "Routing",
    "ShardMove",
    "unit_id",
]


@dataclass(frozen=True, slots=True)
class Allocation:
    cores: Mapping[str, int] = field(default_factory=dict)
    slots: int | None = None

    @property
    def total(self) -> int:
        return sum(self.cores.values())


@dataclass(frozen=True, slots=True)
class Placement:
    nodes: Mapping[str, str] = field(default_factory=dict)

    def per_node(self, instance: str | None = None) -> Counter[str]:
        """Units per node (x_ij for one instance, or over all)."""
        return Counter(
            n for u, n in self.nodes.items() if instance is None or instance_of(u) == instance
        )

    def per_instance(self) -> dict[str, Counter[str]]:
        """Units per node of every instance (:meth:`per_node` of each), in one pass."""
        out: dict[str, Counter[str]] = {}
        for u, n in self.nodes.items():
            inst = instance_of(u)
            c = out.get(inst)
            if c is None:
                c = out[inst] = Counter()
            c[n] += 1
        return out


@dataclass(frozen=True, slots=True)
class Routing:
    tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShardMove:
    instance: str
    shard: int
    src: str
    dst: str
    src_node: str | None
    dst_node: str | None
    bytes: int = 0

    @property
    def remote(self) -> bool:
        return self.src_node != self.dst_node


@dataclass(frozen=True, slots=True)
class CoreMove:
    """An instance gains (``delta`` > 0) or loses units on ``node``."""

    instance: str
    node: str
    delta: int


@dataclass(frozen=True, slots=True)
class PlanDiff:
    shard_moves: tuple[ShardMove, ...] = ()
    core_moves: tuple[CoreMove, ...] = ()

    @property
    def migration_bytes(self) -> int:
        """Bytes of state that cross nodes (moves within a node share state, §3 of paper 000)."""
        return sum(m.bytes for m in self.shard_moves if m.remote)

    @property
    def empty(self) -> bool:
        return not self.shard_moves and not self.core_moves


@dataclass(frozen=True, slots=True)
class Plan:
    allocation: Allocation = field(default_factory=Allocation)
    placement: Placement = field(default_factory=Placement)
    routing: Routing = field(default_factory=Routing)

    def diff(self, new: Plan, *, shard_bytes: Callable[[str, int], int] | None = None) -> PlanDiff:
        """Migrations implied by moving from ``self`` to ``new``.

        ``shard_bytes(instance, shard)`` gives a shard's state size; a shard
        whose target unit changes node moves those bytes.

        Examples
        --------
        Shard 1 of ``count[0]`` moves from the unit on ``n1`` to the one on ``n2``: its 1000
        bytes cross nodes.

        >>> old = Plan(Allocation({"count[0]": 2}),
        ...            Placement({"count[0]#0": "n1", "count[0]#1": "n2"}),
        ...            Routing({"count[0]": ("count[0]#0", "count[0]#0", "count[0]#1")}))
        >>> new = Plan(old.allocation, old.placement,
        ...            Routing({"count[0]": ("count[0]#0", "count[0]#1", "count[0]#1")}))
        >>> d = old.diff(new, shard_bytes=lambda instance, shard: 1000)
        >>> [(m.shard, m.src_node, m.dst_node) for m in d.shard_moves], d.migration_bytes
        ([(1, 'n1', 'n2')], 1000)
        """
        moves: list[ShardMove] = []
        for inst, table in new.routing.tables.items():
            old = self.routing.tables.get(inst)
            if old is None:
                continue
            for s, (a, b) in enumerate(zip(old, table, strict=False)):
                if a == b:
                    continue
                an, bn = self.placement.nodes.get(a), new.placement.nodes.get(b)
                size = shard_bytes(inst, s) if shard_bytes else 0
                moves.append(ShardMove(inst, s, a, b, an, bn, size))
        cores: list[CoreMove] = []
        instances = sorted(set(self.allocation.cores) | set(new.allocation.cores))
        # grouped once: per_node(inst) for each instance rescans every unit (quadratic)
        was, now = self.placement.per_instance(), new.placement.per_instance()
        none: Counter[str] = Counter()
        for inst in instances:
            before, after = was.get(inst, none), now.get(inst, none)
            for node in sorted(set(before) | set(after)):
                d = after[node] - before[node]
                if d:
                    cores.append(CoreMove(inst, node, d))
        return PlanDiff(tuple(moves), tuple(cores))
