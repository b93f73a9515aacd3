"""The planner registry: policy names → adapters over the domain model.

An adapter is a pure function ``(context, plan) → StepResult``: it builds its
algorithm's problem from the topology, cluster, snapshot and current plan in
``context``, runs the algorithm and returns the plan with its part replaced
(allocation, placement or routing) and the figures to report. ``compose``
chains an allocator, a placer and a balancer, as ``streamscale plan`` does.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, PerformanceModel, Plan, Snapshot, Topology
from streamscale.settings import Schema

if TYPE_CHECKING:
    from streamscale.planning.elastic_plan import InstanceLoad

__all__ = [
    "ADAPTERS_PACKAGE",
    "Entry",
    "Family",
    "PlanningContext",
    "StepResult",
    "adapter_modules",
    "check_params",
    "compose",
    "declared",
    "entries",
    "get",
    "register",
]

Family = Literal["allocator", "placer", "balancer"]
FAMILIES: tuple[Family, ...] = ("allocator", "placer", "balancer")

#: The package whose modules register planners: a new module there is found on its own.
ADAPTERS_PACKAGE = "streamscale.planning.adapters"


@dataclass(frozen=True, slots=True)
class PlanningContext:
    """Everything an adapter may read. ``now`` is injected; ``seed`` drives randomness.

    ``loads`` is the demand of each instance (``op[e]``) for this decision,
    computed once by the caller (:func:`streamscale.planning.adapters.elasticutor.with_loads`)
    so that every step of one decision reads the same figures; ``None``: each step
    derives them from the snapshot.
    """

    topology: Topology
    cluster: Cluster
    snapshot: Snapshot | None = None
    models: Mapping[str, PerformanceModel] = field(default_factory=dict)
    rate: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    now: float = 0.0
    loads: Mapping[str, InstanceLoad] | None = None


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step's plan and its figures (JSON-able values keyed by a short name)."""

    plan: Plan
    figures: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


Adapter = Callable[[PlanningContext, Plan], StepResult]


@dataclass(frozen=True, slots=True)
class Entry:
    """A registered planner; ``params`` declares the settings it reads (``None``: undeclared).

    ``promises`` names the properties the planner guarantees beyond a valid plan, which the
    conformance suite then checks (``"cpu_capacity"``: no node's CPU demand above its
    capacity less reserved CPU, or an explicit failure).
    """

    family: Family
    name: str
    description: str
    adapter: Adapter
    params: Schema | None = None
    promises: frozenset[str] = frozenset()


_REGISTRY: dict[tuple[Family, str], Entry] = {}


def register(
    family: Family,
    name: str,
    description: str,
    *,
    params: Schema | None = None,
    promises: Iterable[str] = (),
) -> Callable[[Adapter], Adapter]:
    """Decorator registering ``adapter`` under ``family``/``name`` with a one-line description.

    ``params`` declares the settings the adapter reads from ``context.params`` (name, type,
    default, bounds, description): ``streamscale plan --param`` checks against it and its
    ``--list`` prints it.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")

    def deco(fn: Adapter) -> Adapter:
        key = (family, name)
        if key in _REGISTRY and _REGISTRY[key].adapter is not fn:
            raise ValueError(f"{family} {name!r} registered twice")
        _REGISTRY[key] = Entry(family, name, description, fn, params, frozenset(promises))
        return fn

    return deco


def adapter_modules() -> tuple[str, ...]:
    """Every module of :data:`ADAPTERS_PACKAGE`, discovered (no list is kept by hand)."""
    pkg = importlib.import_module(ADAPTERS_PACKAGE)
    return tuple(
        f"{ADAPTERS_PACKAGE}.{m.name}"
        for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)
        if not m.ispkg
    )


@cache
def declared(module: str) -> frozenset[tuple[str, str]]:
    """The ``(family, name)`` pairs ``module`` registers, read from its source, not imported.

    Importing every planner (OR-Tools, SciPy, METIS) costs about a second, which a
    run-time policy needing one family should not pay; parsing the six modules'
    source costs a few milliseconds. Only ``@register("family", "name", ...)`` with
    literal arguments is seen; a module registering otherwise is imported whenever a
    name is not found (see :func:`get`), so it is never missed.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return frozenset()
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=spec.origin)
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        fn = node.func
        if not (isinstance(fn, ast.Name) and fn.id == "register"):
            continue
        fam, name = node.args[0], node.args[1]
        if isinstance(fam, ast.Constant) and isinstance(name, ast.Constant):
            out.add((str(fam.value), str(name.value)))
    return frozenset(out)


def _load(until: tuple[Family, str] | None = None) -> None:
    """Import the adapter module that registers ``until`` (``None``: every module).

    The module is found by :func:`declared`; when no module declares ``until``
    literally, every module is imported.
    """
    if until is not None and until in _REGISTRY:
        return
    mods = adapter_modules()
    if until is not None:
        owners = [m for m in mods if until in declared(m)]
        for mod in owners:
            importlib.import_module(mod)
        if until in _REGISTRY:
            return
    for mod in mods:
        importlib.import_module(mod)


def entries(family: Family | None = None) -> list[Entry]:
    """Registered entries, sorted by family then name."""
    _load()
    return sorted(
        (e for e in _REGISTRY.values() if family is None or e.family == family),
        key=lambda e: (FAMILIES.index(e.family), e.name),
    )


def get(family: Family, name: str) -> Entry:
    _load(until=(family, name))
    try:
        return _REGISTRY[(family, name)]
    except KeyError:
        known = ", ".join(e.name for e in entries(family)) or "none"
        raise StreamscaleError(f"unknown {family} (known: {known})", item=name) from None


def check_params(steps: Iterable[tuple[Family, str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` typed and checked against the settings the chosen planners declare.

    A name no chosen planner declares is an error listing the known ones, unless a chosen
    planner has not declared its settings (then it passes through unchecked).
    """
    chosen = [get(f, n) for f, n in steps]
    schemas = [e.params for e in chosen if e.params is not None]
    open_ended = len(schemas) < len(chosen)
    out: dict[str, Any] = {}
    for key, raw in params.items():
        owners = [s for s in schemas if key in s]
        if owners:
            out[key] = owners[0][key].coerce(raw)
            for other in owners[1:]:
                other[key].coerce(raw)
        elif open_ended:
            out[key] = raw
        else:
            known = ", ".join(sorted({n for s in schemas for n in s.names})) or "none"
            names = ", ".join(f"{e.family} {e.name}" for e in chosen)
            raise StreamscaleError(f"not a setting of {names} (known: {known})", item=key)
    return out


def compose(
    context: PlanningContext,
    current: Plan | None = None,
    *,
    steps: Iterable[tuple[Family, str]],
) -> tuple[Plan, dict[str, Mapping[str, Any]], tuple[str, ...]]:
    """Run the named steps in order; returns the final plan, figures per step and notes.

    Examples
    --------
    Elasticutor's chain on two instances of 150 t/s each (μ = 100 t/s per core, T_max =
    20 ms): the queueing model asks for 3 + 2 cores, the placer puts them on the instances'
    home nodes, the balancer routes the shards (see the steps' own examples).

    >>> from streamscale.model import Cluster, Edge, Operator, Topology
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0})
    >>> steps = [("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")]
    >>> plan, figures, notes = compose(ctx, steps=steps)
    >>> dict(plan.allocation.cores), plan.placement.per_node()
    ({'agg[0]': 3, 'agg[1]': 2}, Counter({'n1': 3, 'n2': 2}))
    >>> list(figures), notes
    (['allocator:queueing', 'placer:elasticutor', 'balancer:shard'], ())
    >>> compose(ctx, steps=[("allocator", "queuing")])
    Traceback (most recent call last):
    ...
    streamscale.errors.StreamscaleError: queuing: unknown allocator (known: ...)
    """
    plan = current or Plan()
    figures: dict[str, Mapping[str, Any]] = {}
    notes: list[str] = []
    for family, name in steps:
        res = get(family, name).adapter(context, plan)
        plan = res.plan
        figures[f"{family}:{name}"] = res.figures
        notes.extend(res.notes)
    return plan, figures, tuple(notes)
