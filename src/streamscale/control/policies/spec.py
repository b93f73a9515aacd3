"""How a live policy is declared: once, by the ``@policy`` decorator on its class.

A declaration names the policy (what ``streamscale run --policy`` and configs
call it), describes it in one line, declares the settings it reads (a
:class:`~streamscale.settings.Schema`, usually the schemas of the registered
planners it composes plus its own) and the registered planners it composes,
and says how the job starts (its initial plan). ``make_policy``,
``initial_plan``, ``check_policy``, the CLI's ``--policy`` help and its
``--param`` checking all read these declarations; nothing else lists policies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, PerformanceModel, Plan, Topology
from streamscale.planning.registry import Family
from streamscale.settings import Frozen, Schema

__all__ = ["PolicySpec", "policy", "spec", "specs"]

#: ``(topology, cluster, params, seed, models) → policy``; ``params`` are parsed settings.
Factory = Callable[
    [Topology, Cluster, Mapping[str, Any], "int | None", "Mapping[str, PerformanceModel] | None"],
    Any,
]
#: ``(topology, cluster, params, models) → the plan a job starts with``.
Initial = Callable[
    [Topology, Cluster, Mapping[str, Any], "Mapping[str, PerformanceModel] | None"], Plan
]


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """One live policy: everything the CLI, configs and runtimes need to know about it."""

    name: str
    description: str
    factory: Factory
    settings: Schema
    steps: tuple[tuple[Family, str], ...]
    initial: Initial

    @property
    def group(self) -> str:
        """The group of this policy's parsed settings (:class:`~streamscale.settings.Frozen`)."""
        return f"policy {self.name}"

    def parse(self, params: Mapping[str, Any] | None) -> Frozen:
        """``params`` typed and checked against this policy's settings, defaults filled.

        The one place a policy's settings are parsed: settings this policy already parsed
        (a :class:`~streamscale.settings.Frozen` of its group) are returned as they are.
        """
        if isinstance(params, Frozen) and params.group == self.group:
            return params
        given = dict(params or {})
        unknown = [k for k in given if k not in self.settings]
        if unknown:
            known = ", ".join(self.settings.names) or "none"
            raise StreamscaleError(
                f"not a setting of policy {self.name} (known: {known})", item=unknown[0]
            )
        out = self.settings.freeze(given, group=self.group)
        low = out.get("theta_low")
        if low is not None and low > out["theta"]:
            raise StreamscaleError(f"must be <= theta ({out['theta']:g})", item="theta_low")
        return out


_SPECS: dict[str, PolicySpec] = {}


def policy(
    name: str,
    description: str,
    *,
    settings: Schema,
    steps: tuple[tuple[Family, str], ...] = (),
    initial: Initial,
) -> Callable[[type], type]:
    """Class decorator declaring a live policy (see the module docstring).

    The class is built as ``cls(topology, cluster, params, seed, models)`` and must
    implement :class:`streamscale.control.controller.Policy`; its ``name`` is set here.
    """

    def deco(cls: type) -> type:
        if name in _SPECS and _SPECS[name].factory is not cls:
            raise ValueError(f"policy {name!r} declared twice")
        cls.name = name  # type: ignore[attr-defined]
        _SPECS[name] = PolicySpec(name, description, cls, settings, steps, initial)
        return cls

    return deco


def specs() -> tuple[PolicySpec, ...]:
    """Every declared policy, in declaration order."""
    return tuple(_SPECS.values())


def spec(name: str) -> PolicySpec:
    """The policy called ``name``; an unknown name is an error listing the known ones."""
    try:
        return _SPECS[name]
    except KeyError:
        raise StreamscaleError(f"unknown policy (known: {', '.join(_SPECS)})", item=name) from None
