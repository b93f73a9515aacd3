"""Live control policies: from a snapshot to the plan of the job, each composed from
registered planners (:mod:`streamscale.planning.registry`).

A policy is declared once, with :func:`~streamscale.control.policies.spec.policy`
on its class, in any module of this package: the modules are discovered, and
:data:`POLICIES`, :data:`POLICY_SETTINGS`, :func:`make_policy`,
:func:`initial_plan` and :func:`check_policy` all derive from the declarations.

Policies (see each module for what it does at each decision):

* :mod:`.elasticutor` — ``elastic``, ``naive-ec``, ``static``, ``rc``,
  ``rc-damped``, ``proportional`` (paper 000 and baselines);
* :mod:`.albic` — ``albic`` (paper 003);
* :mod:`.task_allocation` — ``td``, ``tl`` (paper 001);
* :mod:`.gma` — ``gma`` (paper 002);
* :mod:`.model_driven` — ``model-driven`` (paper 004).

Policies are pure: they read no clock (``now`` is passed in), do no I/O and keep
only the last snapshot's shard sizes, for ``shard_bytes``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from streamscale.control.controller import Policy
from streamscale.control.policies.spec import PolicySpec, policy, spec, specs
from streamscale.model import Cluster, PerformanceModel, Plan, Topology
from streamscale.settings import Schema, Setting

__all__ = [
    "PARAMS",
    "POLICIES",
    "POLICY_SETTINGS",
    "PolicySpec",
    "check_policy",
    "initial_plan",
    "make_policy",
    "policy",
    "spec",
    "specs",
]

_SKIP = frozenset({"base", "spec"})
for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.name not in _SKIP:
        importlib.import_module(f"{__name__}.{_m.name}")


def _union(schemas: list[Schema]) -> Schema:
    """Every policy's settings in one schema; a name two policies declare differently is a bug."""
    seen: dict[str, Setting] = {}
    for sch in schemas:
        for s in sch.settings:
            if s.name in seen and seen[s.name] != s:
                raise ValueError(f"setting {s.name!r} is declared differently by two policies")
            seen.setdefault(s.name, s)
    return Schema("policy", *seen.values())


#: ``name → description`` of every live policy, from the declarations.
POLICIES: dict[str, str] = {s.name: s.description for s in specs()}

#: Every policy's settings (``--param`` parsing and ``--help``); each policy checks its own.
POLICY_SETTINGS: Schema = _union([s.settings for s in specs()])

#: ``name → (default, description)``, derived from :data:`POLICY_SETTINGS`.
PARAMS: dict[str, tuple[Any, str]] = {
    s.name: (s.default, s.description) for s in POLICY_SETTINGS.settings
}


def check_policy(name: str) -> None:
    """Raise naming ``name`` and the known policies when it is not one of them."""
    spec(name)


def make_policy(
    name: str,
    topology: Topology,
    cluster: Cluster,
    *,
    params: Mapping[str, Any] | None = None,
    seed: int | None = None,
    models: Mapping[str, PerformanceModel] | None = None,
) -> Policy:
    """The policy called ``name`` (see :data:`POLICIES`) for ``topology`` on ``cluster``.

    ``models`` are performance models for ``model-driven`` (else its ``models`` setting
    names a file, else they are derived from the topology). ``params`` are parsed by the
    policy's declaration (:meth:`PolicySpec.parse`) unless the edge already did
    (:func:`streamscale.runtime.run_config.parse_params`).
    """
    s = spec(name)
    return s.factory(topology, cluster, s.parse(params), seed, models)  # type: ignore[no-any-return]


def initial_plan(
    name: str,
    topology: Topology,
    cluster: Cluster,
    *,
    params: Mapping[str, Any] | None = None,
    models: Mapping[str, PerformanceModel] | None = None,
) -> Plan:
    """The plan a job starts with under policy ``name`` (see each policy's declaration)."""
    s = spec(name)
    return s.initial(topology, cluster, s.parse(params), models)
