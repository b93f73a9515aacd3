"""Clusters: nodes (heterogeneous allowed) and a catalog of VM types to acquire."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamscale.errors import ModelError

__all__ = ["Cluster", "Node", "VmType"]


#: Sizes a cluster may declare: far above any real cluster, low enough that planning terminates.
MAX_CORES = 4096
MAX_NODES = 100_000


@dataclass(frozen=True, slots=True)
class Node:
    """A worker host.

    ``cores`` doubles as the slot count (paper 004's VM slots); ``cpu_capacity``
    is in percent of one core (a 4-core node at full speed has 400).
    ``reserved_cpu`` and ``reserved_bandwidth_mbps`` are used by work outside
    streamscale (paper 002's C0 and B0).
    """

    name: str
    cores: int = 1
    cpu_capacity: float | None = None
    memory_gb: float = 4.0
    bandwidth_mbps: float = 1000.0
    rack: str = "r0"
    reserved_cpu: float = 0.0
    reserved_bandwidth_mbps: float = 0.0

    @property
    def capacity(self) -> float:
        """CPU capacity in percent of one core."""
        return self.cpu_capacity if self.cpu_capacity is not None else 100.0 * self.cores


@dataclass(frozen=True, slots=True)
class VmType:
    """A VM size that can be bought (paper 004 §7.1)."""

    name: str
    slots: int
    memory_gb: float
    price_per_hour: float


@dataclass(frozen=True, slots=True)
class Cluster:
    """Nodes that exist now, and VM types that may be acquired."""

    nodes: tuple[Node, ...] = ()
    vm_types: tuple[VmType, ...] = ()

    @classmethod
    def build(cls, nodes: Iterable[Node], vm_types: Iterable[VmType] = ()) -> Cluster:
        """Validate and build; raises :class:`ModelError` naming the offending item.

        Examples
        --------
        >>> c = Cluster.build([Node("a", cores=2), Node("b", cores=4, reserved_cpu=50.0)])
        >>> c.names, c.total_cores, c.node("b").capacity
        (('a', 'b'), 6, 400.0)
        >>> Cluster.build([Node("a", cores=2), Node("a")])
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: node a: duplicate node name
        """
        c = cls(tuple(nodes), tuple(vm_types))
        c.validate()
        return c

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ModelError("no such node", item=name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def total_cores(self) -> int:
        return sum(n.cores for n in self.nodes)

    def validate(self) -> None:
        if not self.nodes and not self.vm_types:
            raise ModelError("cluster has neither nodes nor vm_types", item="cluster")
        if len(self.nodes) > MAX_NODES:
            raise ModelError(f"more than {MAX_NODES} nodes", item="cluster")
        seen: set[str] = set()
        for n in self.nodes:
            item = f"node {n.name or '?'}"
            if not n.name:
                raise ModelError("node has no name", item="node")
            if n.name in seen:
                raise ModelError("duplicate node name", item=item)
            seen.add(n.name)
            if not 1 <= n.cores <= MAX_CORES:
                raise ModelError(f"cores must be in [1, {MAX_CORES}]", item=item)
            if n.cpu_capacity is not None and not n.cpu_capacity > 0:
                raise ModelError("cpu_capacity must be > 0", item=item)
            if not n.memory_gb > 0:
                raise ModelError("memory_gb must be > 0", item=item)
            if not n.bandwidth_mbps > 0:
                raise ModelError("bandwidth_mbps must be > 0", item=item)
            if n.reserved_cpu < 0 or n.reserved_bandwidth_mbps < 0:
                raise ModelError("reserved usage must be >= 0", item=item)
        vseen: set[str] = set()
        for v in self.vm_types:
            item = f"vm_type {v.name or '?'}"
            if not v.name:
                raise ModelError("vm type has no name", item="vm_type")
            if v.name in vseen:
                raise ModelError("duplicate vm type name", item=item)
            vseen.add(v.name)
            if not 1 <= v.slots <= MAX_CORES:
                raise ModelError(f"slots must be in [1, {MAX_CORES}]", item=item)
            if not v.memory_gb > 0:
                raise ModelError("memory_gb must be > 0", item=item)
            if v.price_per_hour < 0:
                raise ModelError("price_per_hour must be >= 0", item=item)

    @classmethod
    def uniform(cls, n: int, *, cores: int = 8, prefix: str = "n", **node: object) -> Cluster:
        """``n`` identical nodes named ``n1 … nN`` (examples, tests, simulator).

        Examples
        --------
        >>> c = Cluster.uniform(3, cores=4)
        >>> c.names, c.total_cores
        (('n1', 'n2', 'n3'), 12)
        """
        return cls.build(Node(name=f"{prefix}{i + 1}", cores=cores, **node) for i in range(n))  # type: ignore[arg-type]
