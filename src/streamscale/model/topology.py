"""Topologies: operators, edges, validation and rate propagation.

Rate propagation follows Shukla & Simmhan (paper 004, §4): sources emit the
requested rate Ω, every other operator receives ω_j = Σ_{i→j} ω_i·σ_ij,
computed in topological order; several sources are allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any, Literal

from streamscale.errors import ModelError

__all__ = ["Edge", "Grouping", "Operator", "OperatorKind", "Topology"]

OperatorKind = Literal["source", "operator", "sink"]
Grouping = Literal["shuffle", "key", "all", "global"]
_KINDS: tuple[str, ...] = ("source", "operator", "sink")
_GROUPINGS: tuple[str, ...] = ("shuffle", "key", "all", "global")


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator (a vertex of the dataflow).

    Parameters
    ----------
    name
        Unique name within the topology.
    kind
        ``source``, ``operator`` or ``sink``.
    task
        Name of the task implementation or of its performance model (paper 004).
    key
        Key field for keyed (stateful) operators; ``None`` for stateless ones.
    cost_ms
        Mean CPU time per input tuple, in milliseconds of one core.
    state_bytes
        Total state held by the operator (spread over its shards).
    tuple_bytes
        Size of one output tuple in bytes.
    instances
        Parallelism: instances (Elasticutor's elastic executors), tasks (paper 001), threads (004).
    shards
        Shards (key groups) per instance for keyed operators.
    rate
        Source rate in tuples/s (sources only; ``None`` takes the run's rate).
    function
        Import path ``package.module:function`` of the user code (Spark jobs).
    """

    name: str
    kind: OperatorKind = "operator"
    task: str | None = None
    key: str | None = None
    cost_ms: float = 0.0
    state_bytes: int = 0
    tuple_bytes: int = 128
    instances: int = 1
    shards: int = 256
    rate: float | None = None
    function: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def keyed(self) -> bool:
        return self.key is not None


@dataclass(frozen=True, slots=True)
class Edge:
    """A stream from ``src`` to ``dst``.

    ``selectivity`` σ is output tuples of ``src`` per input tuple that reach
    ``dst``; ``tuple_bytes`` (when set) overrides the producer's tuple size.
    """

    src: str
    dst: str
    grouping: Grouping = "shuffle"
    selectivity: float = 1.0
    tuple_bytes: int | None = None

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


@dataclass(frozen=True, slots=True)
class Topology:
    """A validated dataflow DAG. Build with :meth:`Topology.build` to validate."""

    name: str
    operators: tuple[Operator, ...]
    edges: tuple[Edge, ...]

    @classmethod
    def build(cls, name: str, operators: Iterable[Operator], edges: Iterable[Edge]) -> Topology:
        """Validate and build; raises :class:`ModelError` naming the offending item.

        Examples
        --------
        A word count: every line splits into 5 words, and ``count`` emits one tuple per 10
        words; rates propagate as ω_j = Σ ω_i σ_ij (paper 004, §4).

        >>> ops = [Operator("src", "source", rate=100.0), Operator("split"),
        ...        Operator("count", key="word"), Operator("out", "sink")]
        >>> edges = [Edge("src", "split"), Edge("split", "count", "key", selectivity=5.0),
        ...          Edge("count", "out", selectivity=0.1)]
        >>> topo = Topology.build("wc", ops, edges)
        >>> topo.rates()
        {'src': 100.0, 'split': 100.0, 'count': 500.0, 'out': 50.0}
        >>> topo.rates(40.0)["count"]
        200.0

        A mistake is refused naming the item:

        >>> Topology.build("bad", [*ops[:1], Operator("x"), ops[-1]], [Edge("src", "out")])
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: operator x: unreachable: no input edge
        """
        topo = cls(name=name, operators=tuple(operators), edges=tuple(edges))
        topo.validate()
        return topo

    # -- lookups -----------------------------------------------------------
    def operator(self, name: str) -> Operator:
        for op in self.operators:
            if op.name == name:
                return op
        raise ModelError("no such operator", item=name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators)

    @property
    def sources(self) -> tuple[Operator, ...]:
        return tuple(op for op in self.operators if op.kind == "source")

    @property
    def sinks(self) -> tuple[Operator, ...]:
        return tuple(op for op in self.operators if op.kind == "sink")

    @property
    def processing(self) -> tuple[Operator, ...]:
        """Operators that are neither sources nor sinks."""
        return tuple(op for op in self.operators if op.kind == "operator")

    def inputs(self, name: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.dst == name)

    def outputs(self, name: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.src == name)

    def edge_bytes(self, edge: Edge) -> int:
        return (
            edge.tuple_bytes
            if edge.tuple_bytes is not None
            else self.operator(edge.src).tuple_bytes
        )

    # -- validation --------------------------------------------------------
    def validate(self) -> None:
        if not self.name:
            raise ModelError("topology has no name", item="name")
        seen: set[str] = set()
        for op in self.operators:
            _check_operator(op)
            if op.name in seen:
                raise ModelError("duplicate operator name", item=f"operator {op.name}")
            seen.add(op.name)
        if not self.sources:
            raise ModelError("topology has no source operator", item=self.name)
        if not self.sinks:
            raise ModelError("topology has no sink operator", item=self.name)
        pairs: set[tuple[str, str]] = set()
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in seen:
                    raise ModelError(f"unknown operator {end!r}", item=f"edge {e.name}")
            if e.grouping not in _GROUPINGS:
                raise ModelError(
                    f"grouping {e.grouping!r} is not one of {', '.join(_GROUPINGS)}",
                    item=f"edge {e.name}",
                )
            if not e.selectivity > 0:
                raise ModelError("selectivity must be > 0", item=f"edge {e.name}")
            if e.tuple_bytes is not None and e.tuple_bytes < 0:
                raise ModelError("tuple_bytes must be >= 0", item=f"edge {e.name}")
            if (e.src, e.dst) in pairs:
                raise ModelError("duplicate edge", item=f"edge {e.name}")
            pairs.add((e.src, e.dst))
            if self.operator(e.dst).kind == "source":
                raise ModelError("a source cannot have inputs", item=f"edge {e.name}")
            if self.operator(e.src).kind == "sink":
                raise ModelError("a sink cannot have outputs", item=f"edge {e.name}")
        self.topological_order()  # raises on a cycle
        for op in self.operators:
            if op.kind != "source" and not self.inputs(op.name):
                raise ModelError("unreachable: no input edge", item=f"operator {op.name}")
            if op.kind != "sink" and not self.outputs(op.name):
                raise ModelError("dead end: no output edge", item=f"operator {op.name}")

    def topological_order(self) -> tuple[str, ...]:
        """Kahn's algorithm; ties broken by declaration order so the result is stable."""
        indeg = {op.name: 0 for op in self.operators}
        for e in self.edges:
            indeg[e.dst] += 1
        order: list[str] = []
        ready = [op.name for op in self.operators if indeg[op.name] == 0]
        while ready:
            n = ready.pop(0)
            order.append(n)
            for e in self.outputs(n):
                indeg[e.dst] -= 1
                if indeg[e.dst] == 0:
                    ready.append(e.dst)
        if len(order) != len(self.operators):
            stuck = sorted(n for n, d in indeg.items() if d > 0)
            raise ModelError("cycle through " + ", ".join(stuck), item=f"operator {stuck[0]}")
        return tuple(order)

    # -- rates -------------------------------------------------------------
    def rates(self, rate: float | Mapping[str, float] | None = None) -> dict[str, float]:
        """Input rate ω_j of every operator (tuples/s); for sources, their output rate.

        Parameters
        ----------
        rate
            One rate Ω for every source, or a rate per source name. Sources
            fall back to their own ``rate`` field.
        """
        omega: dict[str, float] = {}
        for name in self.topological_order():
            op = self.operator(name)
            if op.kind == "source":
                r = rate.get(name, op.rate) if isinstance(rate, Mapping) else rate
                r = op.rate if r is None else r
                if r is None:
                    raise ModelError("no rate given for source", item=f"operator {name}")
                if not r > 0:
                    raise ModelError(f"rate must be > 0, got {r}", item=f"operator {name}")
                omega[name] = float(r)
            else:
                omega[name] = sum(omega[e.src] * e.selectivity for e in self.inputs(name))
        return omega

    def edge_rates(self, rate: float | Mapping[str, float] | None = None) -> dict[str, float]:
        """Tuples/s carried by each edge, keyed by ``edge.name``."""
        omega = self.rates(rate)
        return {e.name: omega[e.src] * e.selectivity for e in self.edges}

    def replace(self, name: str, **changes: Any) -> Topology:
        """A copy with one operator's fields changed (re-validated)."""
        ops = [_replace(op, **changes) if op.name == name else op for op in self.operators]
        if name not in self.names:
            raise ModelError("no such operator", item=name)
        return Topology.build(self.name, ops, self.edges)


#: Sizes a model may declare: far above any real job, low enough that planning terminates.
MAX_INSTANCES = 10_000
MAX_SHARDS = 100_000
MAX_TOTAL_SHARDS = 4_000_000
MAX_BYTES = 1 << 50


def _check_operator(op: Operator) -> None:
    item = f"operator {op.name or '?'}"
    if not op.name:
        raise ModelError("operator has no name", item="operator")
    if op.kind not in _KINDS:
        raise ModelError(f"kind {op.kind!r} is not one of {', '.join(_KINDS)}", item=item)
    if op.cost_ms < 0:
        raise ModelError("cost_ms must be >= 0", item=item)
    if op.state_bytes < 0:
        raise ModelError("state_bytes must be >= 0", item=item)
    if op.tuple_bytes < 0:
        raise ModelError("tuple_bytes must be >= 0", item=item)
    if not 1 <= op.instances <= MAX_INSTANCES:
        raise ModelError(f"instances must be in [1, {MAX_INSTANCES}]", item=item)
    if not 1 <= op.shards <= MAX_SHARDS:
        raise ModelError(f"shards must be in [1, {MAX_SHARDS}]", item=item)
    if op.instances * op.shards > MAX_TOTAL_SHARDS:
        raise ModelError(f"instances × shards must be <= {MAX_TOTAL_SHARDS}", item=item)
    if op.state_bytes > MAX_BYTES or op.tuple_bytes > MAX_BYTES:
        raise ModelError(f"byte sizes must be <= {MAX_BYTES} (1 PiB)", item=item)
    if op.rate is not None and not op.rate > 0:
        raise ModelError("rate must be > 0", item=item)
