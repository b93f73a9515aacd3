"""Control policies: from a snapshot to the plan of every elastic executor.

Each policy implements :class:`streamscale.control.controller.Policy` for the
keyed processing operators of a topology (non-keyed operators are not planned
here). Names, as configs and the CLI use them:

* ``elastic`` — Elasticutor (paper 000): queueing-model allocation (§4.1),
  migration-aware CPU-to-executor assignment (§4.2, Algorithm 1) and
  intra-executor shard balancing (§3.1).
* ``naive-ec`` — the same ``k``, cores assigned without regard to migration cost
  or locality (paper 000, §5 baseline).
* ``static`` — one core per executor, never changes (paper 000, §5 "static").
* ``rc`` — resource-centric: operator-level core counts and repartitioning of
  shards across all of the operator's units (paper 000, §5 "RC"), balanced as
  Elasticutor balances (δ > θ triggers, down to θ).
* ``rc-damped`` — ``rc`` with damping the paper does not describe: repartitions
  down to ``theta_low``, skips small-gain repartitionings, and the simulator
  holds its control loop during a global pause and one window after it.
* ``proportional`` — ``k_e = ⌈load_e / target_utilization⌉`` (DS2-style
  one-step sizing, ALGORITHMS.md "Beyond the papers"), no queueing model.

Parameters (``params`` mapping, all optional):

* ``latency_target_ms`` — T_max for the queueing model (default 10 ms).
* ``theta`` — δ threshold of shard balancing (default 1.2).
* ``theta_low`` — ``rc``/``rc-damped``: once δ exceeds θ (or ``k`` changes), shards
  are repartitioned down to this δ (default θ; ``rc-damped``: ``1 + (θ − 1)/2``,
  hysteresis, since every RC repartitioning pauses the operator).
* ``max_cores`` — cores the policy may use (default: the cluster's cores).
* ``target_utilization`` — per-core utilisation aimed at by ``proportional`` (0.7).
* ``max_utilization`` — ``elastic``, ``naive-ec``, ``rc``: while an operator has
  a backlog, each of its executors gets at least ``⌈θ·λ/μ / max_utilization⌉``
  cores (default 0.9; θ because balancing only bounds the hottest task by θ×
  the mean). Under back-pressure the latency model, averaging over executors,
  would leave a task at ρ → 1, throttling the sources for all.
* ``catch_up_s`` — every sizing rule adds ``backlog / catch_up_s`` to the
  arrival rates (DS2-style catch-up, ALGORITHMS.md "Beyond the papers"), so a
  saturated job grows until its backlog drains within this many seconds (default
  30). The backlog is the operator's own plus the sources' share by visit ratio.
* ``phi0_kbps`` — φ̃ of the core assignment, KB/s per core (default 512).

Policies are pure: they read no clock (``now`` is passed in), do no I/O and keep
only the last snapshot's shard sizes, for :meth:`shard_bytes`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from streamscale.control.controller import Decision, Policy
from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Cluster, Plan, Snapshot, Topology
from streamscale.model.plan import unit_id
from streamscale.planning.adapters.elasticutor import (
    external_rate,
    planning_inputs,
    queueing_allocation,
)
from streamscale.planning.adapters.elasticutor_rc import RC_SETTINGS, rc_plan
from streamscale.planning.elastic_plan import (
    ExecutorInfo,
    ExecutorLoad,
    assemble,
    executors,
    trim_cores,
)
from streamscale.planning.registry import Family, PlanningContext, compose
from streamscale.settings import Schema, Setting

__all__ = [
    "PARAMS",
    "POLICIES",
    "POLICY_SETTINGS",
    "check_params",
    "check_policy",
    "initial_plan",
    "make_policy",
]

POLICIES: dict[str, str] = {
    "elastic": "Elasticutor: queueing-model cores, migration-aware assignment, shard balancing",
    "naive-ec": "elastic executors with the same cores, assigned without migration/locality cost",
    "static": "one core per executor, never changes",
    "rc": "resource-centric: operator-level cores, shards repartitioned across executors",
    "rc-damped": "rc with hysteresis, small-gain holds and no decisions during a global pause",
    "proportional": "cores = ceil(load / target utilization) per executor, no queueing model",
}

#: The policies' settings, declared once (``--param`` parsing, validation and ``--help``).
POLICY_SETTINGS = RC_SETTINGS.merged(
    Schema(
        "proportional",
        Setting(
            "target_utilization",
            float,
            0.7,
            "per-core utilisation aimed at by 'proportional'",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
    ),
    group="policy",
)

#: ``name → (default, description)``, derived from :data:`POLICY_SETTINGS`.
PARAMS: dict[str, tuple[float | None, str]] = {
    s.name: (s.default, s.description) for s in POLICY_SETTINGS.settings
}


def check_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The given policy settings, typed and checked (no defaults filled); no cluster needed."""
    out = POLICY_SETTINGS.parse(params, defaults=False)
    theta = out.get("theta", POLICY_SETTINGS["theta"].default)
    if out.get("theta_low") is not None and out["theta_low"] > theta:
        raise StreamscaleError(f"must be <= theta ({theta:g})", item="theta_low")
    return out


def check_policy(name: str) -> None:
    """Raise naming ``name`` and the known policies when it is not one of them."""
    if name not in POLICIES:
        raise StreamscaleError(f"unknown policy (known: {', '.join(POLICIES)})", item=name)


def _params(params: Mapping[str, Any] | None, cluster: Cluster) -> dict[str, float]:
    given = check_params(params)
    out: dict[str, float] = {}
    for s in POLICY_SETTINGS.settings:
        v = given.get(s.name, s.default)
        if v is None and s.name == "max_cores":
            v = cluster.total_cores
        if v is not None:
            out[s.name] = float(v)
    return out


class _ElasticBase:
    """Shared state of the policies: topology, cluster, executors and shard sizes."""

    name = ""

    def __init__(
        self,
        topology: Topology,
        cluster: Cluster,
        params: Mapping[str, Any] | None,
        seed: int | None,
    ) -> None:
        self.topology = topology
        self.cluster = cluster
        self.params = _params(params, cluster)
        self.seed = seed
        self.execs: tuple[ExecutorInfo, ...] = executors(topology, cluster)
        self._by_instance = {ex.instance: ex for ex in self.execs}
        self._state: dict[str, np.ndarray] = {}

    def shard_bytes(self, instance: str, shard: int) -> int:
        """State size of local ``shard`` of executor ``instance`` (last snapshot, else model)."""
        sizes = self._state.get(instance)
        if sizes is not None and 0 <= shard < sizes.size:
            return int(sizes[shard])
        ex = self._by_instance.get(instance)
        if ex is None:
            return 0
        op = self.topology.operator(ex.operator)
        return op.state_bytes // max(op.instances * op.shards, 1)

    def _loads(self, snapshot: Snapshot | None) -> dict[str, ExecutorLoad]:
        if not self.execs:
            return {}
        # the adapters' cache: the composed steps reuse these loads
        _, loads = planning_inputs(self._context(snapshot, 0.0))
        self._state = {inst: ld.shard_bytes for inst, ld in loads.items()}
        return loads

    def _context(self, snapshot: Snapshot | None, now: float) -> PlanningContext:
        return PlanningContext(
            self.topology,
            self.cluster,
            snapshot,
            params=self.params,
            seed=self.seed,
            now=now,
        )

    def _compose(
        self, context: PlanningContext, current: Plan, steps: list[tuple[Family, str]]
    ) -> tuple[Plan, dict[str, Any]]:
        plan, figures, notes = compose(context, current, steps=steps)
        flat: dict[str, Any] = {"cores": plan.allocation.total}
        for step, figs in figures.items():
            flat.update({f"{step}.{k}": v for k, v in figs.items() if k != "cores_per_node"})
        if notes:
            flat["notes"] = list(notes)
        return plan, flat


def _scale(current: Plan, plan: Plan) -> str:
    before, after = current.allocation.total, plan.allocation.total
    return "up" if after > before else "down" if after < before else "none"


def _decision(current: Plan, plan: Plan, reason: str, figures: Mapping[str, Any]) -> Decision:
    if plan == current:
        return Decision(None, "no change needed", figures)
    return Decision(plan, reason, figures, _scale(current, plan))  # type: ignore[arg-type]


class StaticPolicy(_ElasticBase):
    """One core per executor on its home node; every shard on that core (paper 000, §5)."""

    name = "static"

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        self._loads(snapshot)
        plan = _static_plan(self.execs)
        return _decision(current, plan, "static plan", {"cores": plan.allocation.total})


class ProportionalPolicy(_ElasticBase):
    """``k_e = ⌈(load_e + backlog share) / target_utilization⌉`` per executor.

    The one-step sizing of production autoscalers (ALGORITHMS.md, "Beyond the
    papers"): the observed busy cores of an executor divided by the target
    utilisation, plus the cores that drain its share of the backlog within
    ``catch_up_s``. Totals above ``max_cores`` are trimmed from the executor that
    stays least utilised. Cores are then assigned by Algorithm 1 (paper 000, §4.2)
    and shards balanced as in §3.1, so only the sizing rule differs from ``elastic``.
    """

    name = "proportional"

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        loads = self._loads(snapshot)
        u = self.params["target_utilization"]
        need = np.zeros(len(self.execs))
        for j, ex in enumerate(self.execs):
            ld = loads[ex.instance]
            backlog_cores = ld.backlog_rate / ld.service if math.isfinite(ld.service) else 0.0
            need[j] = (ld.load + backlog_cores) / u
        k = np.maximum(1, np.ceil(need - 1e-9)).astype(np.int64)
        queued_s = [loads[ex.instance].queued / loads[ex.instance].service for ex in self.execs]
        k = trim_cores(k, need, int(self.params["max_cores"]), queued_s)
        cores = {**current.allocation.cores}
        cores.update({ex.instance: int(k[j]) for j, ex in enumerate(self.execs)})
        sized = Plan(Allocation(cores), current.placement, current.routing)
        plan, figures = self._compose(
            self._context(snapshot, now),
            sized,
            [("placer", "elasticutor"), ("balancer", "shard")],
        )
        figures["demand_cores"] = float(need.sum() * u)
        return _decision(current, plan, f"proportional sizing to {int(sum(k))} cores", figures)


class ElasticPolicy(_ElasticBase):
    """Elasticutor (paper 000, §3–§4): queueing-model cores per executor, Algorithm 1
    core assignment and intra-executor shard balancing, composed from the registry."""

    name = "elastic"
    placer = "elasticutor"

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        self._loads(snapshot)
        plan, figures = self._compose(
            self._context(snapshot, now),
            current,
            [("allocator", "queueing"), ("placer", self.placer), ("balancer", "shard")],
        )
        status = figures.get("allocator:queueing.status", "")
        return _decision(
            current, plan, f"{self.name}: {plan.allocation.total} cores ({status})", figures
        )


class NaiveEcPolicy(ElasticPolicy):
    """Naive-EC (paper 000, §5): Elasticutor's cores, assigned obliviously of migration."""

    name = "naive-ec"
    placer = "naive-ec"


class RcPolicy(_ElasticBase):
    """Resource-centric baseline (paper 000, §5): one M/M/k queue per operator sized by
    the same model, shards repartitioned across all of the operator's units."""

    name = "rc"
    #: the damping the paper does not describe (see :func:`rc_plan`)
    damped = False
    #: the simulator holds the control loop during a global pause and one window after
    holds_during_sync = False

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        loads = self._loads(snapshot)
        context = self._context(snapshot, now)
        ops: dict[str, list[float]] = {}
        for ex in self.execs:
            ld = loads[ex.instance]
            acc = ops.setdefault(ex.operator, [0.0, ld.service, 0.0, 0.0])
            acc[0] += ld.arrival
            acc[2] += ld.backlog_rate
            acc[3] += ld.queued / ld.service
        names = list(ops)
        k, alloc_figs = queueing_allocation(
            context,
            names,
            [ops[n][0] for n in names],
            [ops[n][1] for n in names],
            external_rate(context, loads),
            [ops[n][2] > 0 for n in names],
            [ops[n][3] for n in names],
        )
        res = rc_plan(
            context,
            current,
            dict(zip(names, k, strict=True)),
            self.execs,
            loads,
            damped=self.damped,
        )
        figures: dict[str, Any] = {"cores": res.plan.allocation.total}
        figures.update({f"allocator:queueing.{a}": b for a, b in alloc_figs.items()})
        figures.update({f"balancer:rc.{a}": b for a, b in res.figures.items()})
        return _decision(current, res.plan, f"rc: {sum(k)} cores", figures)


class RcDampedPolicy(RcPolicy):
    """RC with damping the paper does not describe (reported beside ``rc``)."""

    name = "rc-damped"
    damped = True
    holds_during_sync = True


def _static_plan(execs: tuple[ExecutorInfo, ...]) -> Plan:
    cores = {ex.instance: 1 for ex in execs}
    placement = {unit_id(ex.instance, 0): ex.home for ex in execs}
    tables = {ex.instance: (unit_id(ex.instance, 0),) * ex.shards for ex in execs}
    return assemble(cores, placement, tables)


def _rc_initial(execs: tuple[ExecutorInfo, ...]) -> Plan:
    cores: dict[str, int] = {}
    placement: dict[str, str] = {}
    tables: dict[str, tuple[str, ...]] = {}
    for ex in execs:
        cores[ex.operator] = cores.get(ex.operator, 0) + 1
        unit = unit_id(ex.operator, ex.index)
        placement[unit] = ex.home
        tables[ex.instance] = (unit,) * ex.shards
    return assemble(cores, placement, tables)


_CLASSES: dict[str, type[_ElasticBase]] = {
    "elastic": ElasticPolicy,
    "naive-ec": NaiveEcPolicy,
    "static": StaticPolicy,
    "rc": RcPolicy,
    "rc-damped": RcDampedPolicy,
    "proportional": ProportionalPolicy,
}


def make_policy(
    name: str,
    topology: Topology,
    cluster: Cluster,
    *,
    params: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> Policy:
    """The policy called ``name`` (see :data:`POLICIES`) for ``topology`` on ``cluster``."""
    if name not in POLICIES:
        raise StreamscaleError(f"unknown policy (known: {', '.join(POLICIES)})", item=name)
    return _CLASSES[name](topology, cluster, params, seed)


def initial_plan(name: str, topology: Topology, cluster: Cluster) -> Plan:
    """The plan a job starts with under policy ``name``: one core per executor.

    Executors sit on their home nodes with every shard on their single task; for
    ``rc`` and ``rc-damped`` the same cores are operator-level units ``op#e``.
    """
    if name not in POLICIES:
        raise StreamscaleError(f"unknown policy (known: {', '.join(POLICIES)})", item=name)
    execs = executors(topology, cluster)
    return _rc_initial(execs) if name in ("rc", "rc-damped") else _static_plan(execs)
