"""Elasticutor's policies and baselines (paper 000) over the keyed operators' instances.

* ``elastic`` — queueing-model allocation (§4.1), migration-aware CPU-to-instance
  assignment (§4.2, Algorithm 1) and intra-instance shard balancing (§3.1).
* ``naive-ec`` — the same ``k``, cores assigned without regard to migration cost
  or locality (§5 baseline).
* ``static`` — one core per instance, never changes (§5 "static").
* ``rc`` — resource-centric: operator-level core counts and repartitioning of
  shards across all of the operator's units (§5 "RC"), balanced as Elasticutor
  balances (δ > θ triggers, down to θ).
* ``rc-damped`` — ``rc`` with damping the paper does not describe: repartitions
  down to ``theta_low``, skips small-gain repartitionings, and the simulator
  holds its control loop during a global pause and one window after it.
* ``proportional`` — ``k_e = ⌈load_e / target_utilization⌉`` (DS2-style one-step
  sizing, docs/algorithms.md "Beyond the papers"), no queueing model.

Their settings (:data:`ELASTIC_SETTINGS`) are the Elasticutor steps' (``latency_target_ms``,
``theta``, ``max_cores``, ``max_utilization``, ``catch_up_s``, ``phi0_kbps``), RC's
``theta_low`` and ``target_utilization``; see each setting's description.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from streamscale.control.controller import Decision
from streamscale.control.policies.base import PolicyBase, decision, static_plan
from streamscale.control.policies.spec import policy
from streamscale.control.sharing import (
    SCALE_IN_MARGIN,
    held_cores,
    shared_slots,
    unit_demand,
    with_slots,
)
from streamscale.errors import StreamscaleError
from streamscale.model import (
    Allocation,
    Cluster,
    PerformanceModel,
    Plan,
    Snapshot,
    Topology,
    unit_id,
)
from streamscale.planning.adapters.elasticutor import (
    cycle_headroom,
    external_rate,
    queueing_allocation,
)
from streamscale.planning.adapters.elasticutor_rc import RC_SETTINGS, rc_plan
from streamscale.planning.elastic_plan import assemble, keyed_instances, trim_cores
from streamscale.planning.registry import PlanningContext
from streamscale.settings import Frozen, Schema, Setting

__all__ = ["CORE_GROUP", "ELASTIC_SETTINGS", "SHARE_CORES", "TARGET_UTILIZATION"]

#: Per-core utilisation a sizing rule aims at (one declaration, shared by the policies using it).
TARGET_UTILIZATION = Setting(
    "target_utilization",
    float,
    0.7,
    "per-core utilisation aimed at by 'proportional' (cores) and 'albic' (nodes)",
    low=0.0,
    high=1.0,
    low_open=True,
)

#: Units share cores where their load fits (:mod:`streamscale.control.sharing`).
SHARE_CORES = Setting(
    "share_cores",
    bool,
    None,
    "units whose load fits share cores and the plan holds only the packed cores (default: "
    "on where executors are requested, off on a fixed cluster)",
)

#: Cores bought together, which shared units are packed onto (:mod:`streamscale.control.sharing`).
CORE_GROUP = Setting(
    "core_group",
    int,
    None,
    "cores bought together (an executor's): with share_cores, units are packed onto whole "
    "groups, whose tasks share its cores (default: the executors' cores where executors "
    "are requested, else 1)",
    low=1,
)

#: The Elasticutor policies' settings, declared once.
ELASTIC_SETTINGS = RC_SETTINGS.merged(
    Schema("proportional", TARGET_UTILIZATION, SHARE_CORES, CORE_GROUP, SCALE_IN_MARGIN),
    group="policy",
)


def _offered_floor(
    snapshot: Snapshot | None, by_op: Mapping[str, list[float]]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each operator's unit demands scaled up to the work its input rate offers,
    ``λ / μ``, where they add up to less; and the operators scaled, with that work in
    cores.

    The units' demands come from the shards' processed load (paper 000, §3), which lags
    what arrives while a batch cannot take it all: after a surge's backlog drained,
    a 2.5 s batch processed 560 of the 750 tuples offered, its shards' load said 4.5
    cores of the ~9 offered, and the plan packed the units onto 8 cores with 12 held,
    so the backlog grew again through the rest of the surge. The input rate (taken
    tuples plus the backlog's growth, at least the rate the watch reads at the source)
    does not lag. The shards' proportions stay, so skew still decides the packing.

    >>> from streamscale.model import OperatorStats, Snapshot
    >>> snap = Snapshot.build(time=1.0, operators={"calc": OperatorStats(300.0, 300.0, 50.0)})
    >>> _offered_floor(snap, {"calc": [1.0, 1.0, 2.0]})  # 4 cores processed, 6 offered
    ({'calc': [1.5, 1.5, 3.0]}, {'calc': 6.0})
    """
    out = {op: list(ds) for op, ds in by_op.items()}
    scaled: dict[str, float] = {}
    for op, ds in out.items():
        st = snapshot.operators.get(op) if snapshot is not None else None
        if st is None or not st.service_rate or not st.input_rate > 0:
            continue
        offered, total = st.input_rate / st.service_rate, sum(ds)
        if total > 0 and offered > total:
            out[op] = [d * offered / total for d in ds]
            scaled[op] = round(offered, 3)
    return out, scaled


def _elastic_initial(
    topology: Topology,
    cluster: Cluster,
    params: Mapping[str, Any],
    models: Mapping[str, PerformanceModel] | None = None,
) -> Plan:
    return static_plan(keyed_instances(topology, cluster))


def _rc_initial(
    topology: Topology,
    cluster: Cluster,
    params: Mapping[str, Any],
    models: Mapping[str, PerformanceModel] | None = None,
) -> Plan:
    """The same cores as :func:`_elastic_initial`, as operator-level units ``op#e``."""
    cores: dict[str, int] = {}
    placement: dict[str, str] = {}
    tables: dict[str, tuple[str, ...]] = {}
    for info in keyed_instances(topology, cluster):
        cores[info.operator] = cores.get(info.operator, 0) + 1
        unit = unit_id(info.operator, info.index)
        placement[unit] = info.home
        tables[info.instance] = (unit,) * info.shards
    return assemble(cores, placement, tables)


class QueueingSized(PolicyBase):
    """A policy whose settings are the Elasticutor sizing's (``max_cores`` defaults to
    the cluster's cores); shared by every policy that sizes with the queueing model."""

    mid_batch = True
    core_each = False  # whether every instance's cores are assigned one by one (>= 1 each)

    def __init__(
        self,
        topology: Topology,
        cluster: Cluster,
        params: Mapping[str, Any],
        seed: int | None,
        models: Mapping[str, PerformanceModel] | None = None,
    ) -> None:
        if params.get("max_cores") is None:  # derived: the cluster's cores
            derived = {"max_cores": cluster.total_cores}
            params = (
                params.derive(**derived) if isinstance(params, Frozen) else {**params, **derived}
            )
        super().__init__(topology, cluster, params, seed, models)
        # an instance holds at least one core (paper 000, §4.1): with more of
        # them than the cluster's cores every assignment is infeasible, and a run would
        # keep its first plan with a control error at every batch
        if self.core_each and len(self.insts) > cluster.total_cores:
            raise StreamscaleError(
                f"{len(self.insts)} instances need a core each, the cluster has "
                f"{cluster.total_cores}: fewer instances per keyed operator, or more cores",
                item=f"policy {self.name}",
            )

    def shared(
        self, context: PlanningContext, current: Plan, plan: Plan, figures: dict[str, Any]
    ) -> Plan:
        """``plan`` holding only the cores its units' work needs when ``share_cores`` is on
        (:mod:`streamscale.control.sharing`): each instance's λ/μ (the backlog's catch-up
        included) split over its units by shard load, packed at ``max_utilization`` or
        the share of a batch cycle its fixed cost leaves, whichever is less
        (:func:`~streamscale.planning.adapters.elasticutor.cycle_headroom`), onto groups
        of ``core_group`` cores (an executor's)."""
        if not self.params.get("share_cores"):
            return plan
        if not self._measured(context.snapshot):  # a batch that processed nothing: hold
            return with_slots(plan, held_cores(current.allocation))
        loads = self.loads(context)
        by_op: dict[str, list[float]] = {}
        for info in self.insts:
            ld = loads.get(info.instance)
            if ld is None:
                continue
            work = ld.arrival / ld.service if 0 < ld.service < math.inf else ld.load
            by_op.setdefault(info.operator, []).extend(
                unit_demand(plan, info.instance, work, ld.shard_load).values()
            )
        by_op, offered = _offered_floor(context.snapshot, by_op)
        if offered:
            figures["offered_work_cores"] = offered
        demand = [d for ds in by_op.values() for d in ds]
        if not sum(demand) > 0:  # no work to size on: hold what is held
            return with_slots(plan, held_cores(current.allocation))
        headroom = cycle_headroom(context)
        capacity = min(self.params["max_utilization"], headroom)
        group = self.params.get("core_group") or 1
        slots = shared_slots(
            demand,
            capacity=capacity,
            current=current.allocation.slots,
            scale_in_margin=self.params["scale_in_margin"],
            group=group,
        )
        figures["batch_headroom"] = round(headroom, 3)
        figures["held_cores"] = slots
        figures["work_cores"] = round(sum(demand), 3)
        return with_slots(plan, slots)

    def _measured(self, snapshot: Snapshot | None) -> bool:
        """Whether a keyed operator measured its service rate (it processed tuples): a
        query's first batch often admits none while the source already offers, and the
        work planned from the backlog alone (0.07 cores in a surge run) released three of
        four executors before the first batches of tuples ran on cold ones."""
        if snapshot is None:
            return True
        ops = {info.operator for info in self.insts}
        return any(
            (st := snapshot.operators.get(op)) is not None and st.service_rate is not None
            for op in ops
        )


@policy(
    "elastic",
    "Elasticutor: queueing-model cores, migration-aware assignment, shard balancing",
    settings=ELASTIC_SETTINGS,
    steps=(("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")),
    initial=_elastic_initial,
)
class ElasticPolicy(QueueingSized):
    """Elasticutor (paper 000, §3–§4): queueing-model cores per instance, Algorithm 1
    core assignment and intra-instance shard balancing, composed from the registry."""

    placer = "elasticutor"

    core_each = True

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        plan, figures = self.compose(
            context,
            current,
            [("allocator", "queueing"), ("placer", self.placer), ("balancer", "shard")],
        )
        plan = self.shared(context, current, plan, figures)
        status = figures.get("allocator:queueing.status", "")
        return decision(
            current, plan, f"{self.name}: {held_cores(plan.allocation)} cores ({status})", figures
        )


@policy(
    "naive-ec",
    "instances with the same cores, assigned without migration/locality cost",
    settings=ELASTIC_SETTINGS,
    steps=(("allocator", "queueing"), ("placer", "naive-ec"), ("balancer", "shard")),
    initial=_elastic_initial,
)
class NaiveEcPolicy(ElasticPolicy):
    """Naive-EC (paper 000, §5): Elasticutor's cores, assigned obliviously of migration."""

    placer = "naive-ec"


@policy(
    "static",
    "one core per instance, never changes",
    settings=ELASTIC_SETTINGS,
    initial=_elastic_initial,
)
class StaticPolicy(QueueingSized):
    """One core per instance on its home node; every shard on that core (paper 000, §5)."""

    mid_batch = False

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        self.context(snapshot, now)
        plan = static_plan(self.insts)
        return decision(current, plan, "static plan", {"cores": plan.allocation.total})


@policy(
    "rc",
    "resource-centric: operator-level cores, shards repartitioned across instances",
    settings=ELASTIC_SETTINGS,
    steps=(("allocator", "queueing"), ("balancer", "rc")),
    initial=_rc_initial,
)
class RcPolicy(QueueingSized):
    """Resource-centric baseline (paper 000, §5): one M/M/k queue per operator sized by
    the same model, shards repartitioned across all of the operator's units."""

    #: the damping the paper does not describe (see :func:`rc_plan`)
    damped = False
    #: the simulator holds the control loop during a global pause and one window after
    holds_during_sync = False

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        loads = self.loads(context)
        ops: dict[str, list[float]] = {}
        for info in self.insts:
            ld = loads[info.instance]
            acc = ops.setdefault(info.operator, [0.0, ld.service, 0.0, 0.0])
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
            self.insts,
            loads,
            damped=self.damped,
        )
        figures: dict[str, Any] = {"cores": res.plan.allocation.total}
        figures.update({f"allocator:queueing.{a}": b for a, b in alloc_figs.items()})
        figures.update({f"balancer:rc.{a}": b for a, b in res.figures.items()})
        return decision(current, res.plan, f"rc: {sum(k)} cores", figures)


@policy(
    "rc-damped",
    "rc with hysteresis, small-gain holds and no decisions during a global pause",
    settings=ELASTIC_SETTINGS,
    steps=(("allocator", "queueing"), ("balancer", "rc")),
    initial=_rc_initial,
)
class RcDampedPolicy(RcPolicy):
    """RC with damping the paper does not describe (reported beside ``rc``)."""

    damped = True
    holds_during_sync = True


@policy(
    "proportional",
    "cores = ceil(load / target utilization) per instance, no queueing model",
    settings=ELASTIC_SETTINGS,
    steps=(("placer", "elasticutor"), ("balancer", "shard")),
    initial=_elastic_initial,
)
class ProportionalPolicy(QueueingSized):
    """``k_e = ⌈(load_e + backlog share) / target_utilization⌉`` per instance.

    The one-step sizing of production autoscalers (docs/algorithms.md, "Beyond the
    papers"): the observed busy cores of an instance divided by the target
    utilisation, plus the cores that drain its share of the backlog within
    ``catch_up_s``. Totals above ``max_cores`` are trimmed from the instance that
    stays least utilised. Cores are then assigned by Algorithm 1 (paper 000, §4.2)
    and shards balanced as in §3.1, so only the sizing rule differs from ``elastic``.
    """

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        loads = self.loads(context)
        u = self.params["target_utilization"]
        need = np.zeros(len(self.insts))
        for j, info in enumerate(self.insts):
            ld = loads[info.instance]
            backlog_cores = ld.backlog_rate / ld.service if math.isfinite(ld.service) else 0.0
            need[j] = (ld.load + backlog_cores) / u
        k = np.maximum(1, np.ceil(need - 1e-9)).astype(np.int64)
        queued_s = [
            loads[info.instance].queued / loads[info.instance].service for info in self.insts
        ]
        k = trim_cores(k, need, self.params["max_cores"], queued_s)
        cores = {**current.allocation.cores}
        cores.update({info.instance: int(k[j]) for j, info in enumerate(self.insts)})
        sized = Plan(Allocation(cores), current.placement, current.routing)
        plan, figures = self.compose(
            context, sized, [("placer", "elasticutor"), ("balancer", "shard")]
        )
        figures["demand_cores"] = float(need.sum() * u)
        plan = self.shared(context, current, plan, figures)
        held = held_cores(plan.allocation)
        return decision(current, plan, f"proportional sizing to {held} cores", figures)
