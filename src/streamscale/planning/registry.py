"""The planner registry: policy names → adapters over the domain model.

An adapter is a pure function ``(context, plan) → StepResult``: it builds its
algorithm's problem from the topology, cluster, snapshot and current plan in
``context``, runs the algorithm and returns the plan with its part replaced
(allocation, placement or routing) and the figures to report. ``compose``
chains an allocator, a placer and a balancer, as ``streamscale plan`` does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, PerformanceModel, Plan, Snapshot, Topology
from streamscale.settings import Schema

__all__ = [
    "Entry",
    "Family",
    "PlanningContext",
    "StepResult",
    "check_params",
    "compose",
    "entries",
    "get",
    "register",
]

Family = Literal["allocator", "placer", "balancer"]
FAMILIES: tuple[Family, ...] = ("allocator", "placer", "balancer")

# Modules whose import registers adapters; each family adds its module here. Most-used
# first: ``get`` imports them in order only until the name it wants is registered.
_ADAPTER_MODULES: tuple[str, ...] = (
    "streamscale.planning.adapters.elasticutor",
    "streamscale.planning.adapters.elasticutor_rc",
    "streamscale.planning.adapters.elastic_allocator",
    "streamscale.planning.adapters.model_driven",
    "streamscale.planning.adapters.task_allocation",
    "streamscale.planning.adapters.albic",
)


@dataclass(frozen=True, slots=True)
class PlanningContext:
    """Everything an adapter may read. ``now`` is injected; ``seed`` drives randomness."""

    topology: Topology
    cluster: Cluster
    snapshot: Snapshot | None = None
    models: Mapping[str, PerformanceModel] = field(default_factory=dict)
    rate: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step's plan and its figures (JSON-able values keyed by a short name)."""

    plan: Plan
    figures: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


Adapter = Callable[[PlanningContext, Plan], StepResult]


@dataclass(frozen=True, slots=True)
class Entry:
    """A registered planner; ``params`` declares the settings it reads (``None``: undeclared)."""

    family: Family
    name: str
    description: str
    adapter: Adapter
    params: Schema | None = None


_REGISTRY: dict[tuple[Family, str], Entry] = {}


def register(
    family: Family, name: str, description: str, *, params: Schema | None = None
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
        _REGISTRY[key] = Entry(family, name, description, fn, params)
        return fn

    return deco


def _load(until: tuple[Family, str] | None = None) -> None:
    """Import adapter modules in order, stopping once ``until`` is registered.

    Run-time policies need only their own family; importing every planner (OR-Tools,
    SciPy, METIS) would put about a second on a job's first decision.
    """
    for mod in _ADAPTER_MODULES:
        if until is not None and until in _REGISTRY:
            return
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
    """Run the named steps in order; returns the final plan, figures per step and notes."""
    plan = current or Plan()
    figures: dict[str, Mapping[str, Any]] = {}
    notes: list[str] = []
    for family, name in steps:
        res = get(family, name).adapter(context, plan)
        plan = res.plan
        figures[f"{family}:{name}"] = res.figures
        notes.extend(res.notes)
    return plan, figures, tuple(notes)
