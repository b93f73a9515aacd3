"""Registry adapters for Elasticutor's planners (paper 000) and its baselines.

* allocator ``queueing`` — M/M/k Jackson-network allocation per instance (§4.1);
* placer ``elasticutor`` — migration-aware CPU-to-instance assignment (§4.2, Algorithm 1);
* placer ``naive-ec`` — the same cores assigned obliviously (§5 baseline);
* balancer ``shard`` — intra-instance shard balancing (§3.1);
* balancer ``rc`` — resource-centric operator-level repartitioning (§5 baseline),
  in :mod:`streamscale.planning.adapters.elasticutor_rc`.

Settings read from ``context.params`` through :data:`SETTINGS` (declared there, with
their defaults and bounds, and parsed once at the edge): ``latency_target_ms`` (T_max),
``max_cores`` (unset: the cluster's cores), ``theta``, ``phi0_kbps`` (φ̃),
``catch_up_s`` (the arrival rates include ``backlog / catch_up_s``, DS2-style),
``max_utilization`` (while an operator has a backlog, no task is sized above it,
given δ ≤ θ). Keyed
processing operators are planned; the plan's other instances are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Plan, instance_of, operator_of
from streamscale.model.snapshot import batch_headroom
from streamscale.planning.allocation.queueing import QueueingProblem, allocate
from streamscale.planning.allocation.surge import CATCH_UP_FORM
from streamscale.planning.balancing.shard_balance import THETA
from streamscale.planning.elastic_plan import (
    InstanceInfo,
    InstanceLoad,
    assemble,
    fill_assignment,
    instance_loads,
    keyed_instances,
    placement_matrix,
    realize_units,
    route,
    table_delta,
    table_to_tasks,
    trim_cores,
)
from streamscale.planning.placement.core_assignment import (
    AssignmentProblem,
    AssignmentResult,
    assign_cores,
    naive_ec,
)
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema, Setting

__all__ = [
    "CATCH_UP_S",
    "MAX_UTILIZATION",
    "cycle_headroom",
    "elasticutor_step",
    "external_rate",
    "naive_ec_step",
    "others",
    "planning_inputs",
    "queueing_allocation",
    "queueing_step",
    "settings",
    "shard_step",
    "slo_cycle",
    "with_loads",
]


#: The settings the Elasticutor steps read, declared once (policies and ``plan`` use them).
SETTINGS = Schema(
    "elasticutor",
    Setting(
        "latency_target_ms",
        float,
        10.0,
        "latency target T_max of the queueing model (ms): a tuple's mean wait and service "
        "at a task, not an end-to-end SLO (the surge scenario's --latency-target-ms)",
        low=0.0,
        low_open=True,
    ),
    THETA,
    Setting(
        "max_cores",
        int,
        None,
        "cores the policy may use (default: all cores of the cluster)",
        low=1,
    ),
    Setting(
        "max_utilization",
        float,
        0.9,
        "while backlogged, no task is sized above this utilisation",
        low=0.0,
        high=1.0,
        low_open=True,
    ),
    Setting(
        "catch_up_s",
        float,
        30.0,
        "arrival rates include backlog / catch_up_s (s), DS2-style",
        low=0.0,
        low_open=True,
    ),
    CATCH_UP_FORM,
    Setting(
        "latency_slo_s",
        float,
        None,
        "end-to-end latency each tuple should meet (s): micro-batches may stretch to half of "
        "it, so cores are sized for that cycle rather than for the trigger (default: the "
        "trigger's cycle)",
        low=0.0,
        low_open=True,
    ),
    Setting(
        "phi0_kbps",
        float,
        512.0,
        "initial data-intensity threshold of core assignment (KB/s per core)",
        low=0.0,
        low_open=True,
    ),
)


def settings(context: PlanningContext) -> dict[str, Any]:
    """The Elasticutor steps' settings in ``context.params``, read through :data:`SETTINGS`
    (the values were parsed at the edge; unset ones take the declared default, and
    ``max_cores`` unset means the cluster's cores)."""
    out = SETTINGS.read(context.params)
    total = context.cluster.total_cores
    out["max_cores"] = total if out["max_cores"] is None else min(out["max_cores"], total)
    return out


def cycle_headroom(context: PlanningContext) -> float:
    """The share of a batch cycle a core's work may take
    (:func:`~streamscale.model.snapshot.batch_headroom`), for the cycle the batches aim at:
    the trigger's, or half of ``latency_slo_s`` when longer — a tuple waits up to one
    cycle for its batch to start and one for it to end (the admission limit keeps a
    batch's run within the catch-up time, half the target in the surge scenarios). 1
    without a snapshot.

    >>> from streamscale.model import Cluster, Edge, Node, Operator, Snapshot, Topology
    >>> snap = Snapshot.build(time=1.0, batch_overhead_s=0.5, cycle_target_s=2.0)
    >>> ops = [Operator("src", "source", rate=1.0), Operator("out", "sink")]
    >>> topo = Topology.build("t", ops, [Edge("src", "out")])
    >>> ctx = PlanningContext(topo, Cluster((Node("n", 4),)), snapshot=snap)
    >>> cycle_headroom(ctx)
    0.75
    >>> cycle_headroom(replace(ctx, params={"latency_slo_s": 10.0}))  # a 5 s cycle
    0.9
    """
    snap = context.snapshot
    if snap is None:
        return 1.0
    slo = SETTINGS.read(context.params)["latency_slo_s"]
    return batch_headroom(snap.batch_overhead_s, slo_cycle(snap.cycle_target_s, slo))


def slo_cycle(trigger_s: float, latency_slo_s: float | None) -> float:
    """The batch cycle sized for: the trigger's, or half the latency target when longer.

    >>> slo_cycle(2.0, None), slo_cycle(2.0, 10.0), slo_cycle(2.0, 3.0)
    (2.0, 5.0, 2.0)
    """
    return trigger_s if latency_slo_s is None else max(trigger_s, latency_slo_s / 2.0)


def planning_inputs(
    context: PlanningContext,
) -> tuple[tuple[InstanceInfo, ...], Mapping[str, InstanceLoad]]:
    """The instances to plan and their demand: ``context.loads`` when the caller computed
    them for this decision (:func:`with_loads`), else from the snapshot or the topology's
    model."""
    insts = keyed_instances(context.topology, context.cluster)
    if not insts:
        raise StreamscaleError(
            "no keyed operator to plan (set 'key' on an operator)", item=context.topology.name
        )
    if context.loads is not None:
        return insts, context.loads
    return insts, _instance_loads(context, insts)


def _instance_loads(
    context: PlanningContext, insts: tuple[InstanceInfo, ...]
) -> dict[str, InstanceLoad]:
    s = SETTINGS.read(context.params)
    return instance_loads(
        context.topology,
        insts,
        context.snapshot,
        rate=context.rate,
        catch_up_s=s["catch_up_s"],
        catch_up_form=s["catch_up_form"],
    )


def with_loads(context: PlanningContext) -> PlanningContext:
    """``context`` with the instances' demand computed once, for every step of a decision.

    Topologies without keyed operators get an empty mapping (nothing to plan).
    """
    insts = keyed_instances(context.topology, context.cluster)
    return replace(context, loads=_instance_loads(context, insts) if insts else {})


#: default catch-up time (s) of the backlog term in λ (DS2-style, docs/algorithms.md "Beyond the papers")
CATCH_UP_S: float = SETTINGS["catch_up_s"].default
#: default per-core utilisation bound of instances whose operator has a backlog
MAX_UTILIZATION: float = SETTINGS["max_utilization"].default


def external_rate(context: PlanningContext, loads: Mapping[str, InstanceLoad]) -> float:
    """λ_0: the sources' observed output rate (plus their backlog's catch-up rate),
    else their modelled rate."""
    topo, snap = context.topology, context.snapshot
    s = SETTINGS.read(context.params)
    catch_up, latency = s["catch_up_s"], s["catch_up_form"] == "latency"
    total = 0.0
    for src in topo.sources:
        stats = snap.operators.get(src.name) if snap else None
        if stats is not None:
            drain = max(stats.backlog, 0.0) / catch_up
            total += max(stats.output_rate, drain) if latency else stats.output_rate + drain
        elif context.rate is not None or src.rate is not None:
            total += context.rate if context.rate is not None else float(src.rate or 0.0)
    if total > 0:
        return total
    per_op: dict[str, float] = {}
    for inst, ld in loads.items():
        op = operator_of(inst)
        per_op[op] = per_op.get(op, 0.0) + ld.arrival
    return max(per_op.values(), default=0.0)


def queueing_allocation(
    context: PlanningContext,
    names: list[str],
    arrival: list[float],
    service: list[float],
    lam0: float,
    backlogged: list[bool] | None = None,
    queued_s: list[float] | None = None,
) -> tuple[list[int], dict[str, Any]]:
    """Run §4.1's greedy; an unstable result is trimmed to the cores available.

    On a micro-batch runtime (the snapshot's ``cycle_target_s``), every entry gets at
    least ``⌈λ/μ / h⌉`` cores for the batch headroom ``h``
    (:func:`~streamscale.model.snapshot.batch_headroom`): one core loaded above ``h``
    stretches every batch past its cycle. Entries flagged ``backlogged`` (their
    operator has a backlog) get at least
    ``⌈θ · λ/μ / max_utilization⌉`` cores: under back-pressure the observed λ is
    capped by the bottleneck, and the latency model, which averages over all
    instances and pools each instance's cores, happily leaves a task at ρ → 1
    (balancing only guarantees δ ≤ θ, so the hottest task runs at θ·ρ), where
    it throttles the sources for everyone (DS2-style utilisation band,
    docs/algorithms.md "Beyond the papers"). When the cores do not suffice, they are
    trimmed from instances that are not throttled first: ``queued_s`` is each
    entry's queued work in core-seconds (:func:`trim_cores`).
    """
    s = settings(context)
    t_max = s["latency_target_ms"]
    u_max = s["max_utilization"] / s["theta"]
    max_cores = s["max_cores"]
    problem = QueueingProblem(tuple(arrival), tuple(service), lam0, t_max / 1000.0, max_cores)
    res = allocate(problem)
    k = list(res.cores)
    need = [a / s if math.isfinite(s) else 0.0 for a, s in zip(arrival, service, strict=True)]
    floored = cycle_floored = 0
    for j, flag in enumerate(backlogged or ()):
        low = math.ceil(need[j] / u_max - 1e-9) if flag else 0
        if low > k[j]:
            floored += low - k[j]
            k[j] = low
    # a micro-batch lasts its fixed cost plus its busiest core's work: a unit loaded above
    # the cycle's headroom stretches every batch, so an instance gets the cores that keep
    # each of its units within it (its shards are then spread over them)
    headroom = cycle_headroom(context)
    if headroom < 1.0:
        for j in range(len(k)):
            low = math.ceil(need[j] / headroom - 1e-9)
            if low > k[j]:
                cycle_floored += low - k[j]
                k[j] = low
    floored += cycle_floored
    if not res.stable or floored:
        k = trim_cores(k, need, max_cores, queued_s)
    figures: dict[str, Any] = {
        "status": res.status,
        "expected_latency_ms": res.latency * 1000.0 if res.stable else math.inf,
        "latency_target_ms": t_max,
        "cores_total": int(sum(k)),
        "cores_available": max_cores,
        "shortfall": res.shortfall,
        "utilization_floor_cores": floored,
        "batch_headroom": round(headroom, 3),
        "cycle_floor_cores": cycle_floored,
        "cores": dict(zip(names, k, strict=True)),
    }
    return k, figures


@register(
    "allocator",
    "queueing",
    "Elasticutor M/M/k queueing model: fewest cores meeting T_max",
    params=SETTINGS,
)
def queueing_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Cores per instance from the Jackson-network model (paper 000, §4.1).

    Examples
    --------
    Two instances of ``agg`` receive 150 t/s each and one core serves μ = 100 t/s; two
    4-core nodes; T_max = 20 ms. With two cores each an instance is an M/M/2 queue (a = 1.5)
    with E[T] = 22.9 ms; a third core for one of them gives 11.6 ms, and E[T] = (22.9 +
    11.6)/2 = 17.2 ms ≤ 20: five cores.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4,
    ...                                      state_bytes=800)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0}, seed=0)
    >>> r = queueing_step(ctx, Plan())
    >>> f = r.figures
    >>> dict(r.plan.allocation.cores), f["status"], round(f["expected_latency_ms"], 1)
    ({'agg[0]': 3, 'agg[1]': 2}, 'met', 17.2)
    """
    insts, loads = planning_inputs(context)
    names = [info.instance for info in insts]
    k, figures = queueing_allocation(
        context,
        names,
        [loads[n].arrival for n in names],
        [loads[n].service for n in names],
        external_rate(context, loads),
        [loads[n].backlog_rate > 0 for n in names],
        [loads[n].queued / loads[n].service for n in names],
    )
    cores = {**others(plan.allocation.cores, insts), **dict(zip(names, k, strict=True))}
    new = Plan(Allocation(cores, plan.allocation.slots), plan.placement, plan.routing)
    notes = ()
    if figures["status"] != "met":
        notes = (f"queueing: latency target not met ({figures['status']})",)
    return StepResult(new, figures, notes)


def others(mapping: Mapping[str, Any], insts: tuple[InstanceInfo, ...]) -> dict[str, Any]:
    """Entries of ``mapping`` that belong to no planned instance (kept untouched)."""
    mine = {info.instance for info in insts} | {info.operator for info in insts}
    return {
        k: v
        for k, v in mapping.items()
        if instance_of(k) not in mine and operator_of(k) not in mine
    }


def _targets(plan: Plan, insts: tuple[InstanceInfo, ...], x0: np.ndarray) -> list[int]:
    have = x0.sum(axis=0)
    return [
        int(plan.allocation.cores.get(info.instance, max(int(have[j]), 1)))
        for j, info in enumerate(insts)
    ]


def _assignment_problem(
    context: PlanningContext, plan: Plan
) -> tuple[tuple[InstanceInfo, ...], Mapping[str, InstanceLoad], AssignmentProblem]:
    insts, loads = planning_inputs(context)
    nodes = list(context.cluster.names)
    x0 = placement_matrix(plan, insts, nodes)
    problem = AssignmentProblem(
        capacity=tuple(n.cores for n in context.cluster.nodes),
        current=x0,
        target=tuple(_targets(plan, insts, x0)),
        state=tuple(float(loads[info.instance].state) for info in insts),
        home=tuple(nodes.index(info.home) for info in insts),
        data_rate=tuple(loads[info.instance].bytes_rate for info in insts),
    )
    return insts, loads, problem


def _place(
    context: PlanningContext,
    plan: Plan,
    insts: tuple[InstanceInfo, ...],
    loads: Mapping[str, InstanceLoad],
    res: AssignmentResult,
) -> StepResult:
    nodes = list(context.cluster.names)
    placement, renames = realize_units(plan, insts, res.x, nodes)
    cores = {info.instance: int(res.x[:, j].sum()) for j, info in enumerate(insts)}
    # orphaned shards only (θ = ∞): balancing proper is the balancer's step
    tables, _ = route(plan, insts, loads, cores, renames, theta=math.inf)
    new = assemble(
        {**others(plan.allocation.cores, insts), **cores},
        {**others(plan.placement.nodes, insts), **placement},
        {**others(plan.routing.tables, insts), **tables},
    )
    per_node: dict[str, dict[str, int]] = {node: {} for node in nodes}
    for i, j in zip(*np.nonzero(res.x), strict=True):
        per_node[nodes[i]][insts[j].instance] = int(res.x[i, j])
    figures = {
        "migration_cost_bytes": res.cost,
        "phi_kbps": res.phi / 1024.0 if math.isfinite(res.phi) else math.inf,
        "attempts": res.attempts,
        "data_intensive": len(res.data_intensive),
        "remote_cores": res.remote_cores,
        "reassigned_cores": res.reassigned,
        "cores_per_node": per_node,
    }
    return StepResult(new, figures)


@register(
    "placer",
    "elasticutor",
    "Elasticutor Algorithm 1: migration-aware, locality-aware cores",
    params=SETTINGS,
)
def elasticutor_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Assign cores to instances minimising state migration (paper 000, §4.2).

    Examples
    --------
    Two instances of ``agg`` receive 150 t/s each and one core serves μ = 100 t/s; two
    4-core nodes; T_max = 20 ms. The queueing allocator's cores (3 and 2) all go to the
    instances' home nodes, so no state moves.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4,
    ...                                      state_bytes=800)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0}, seed=0)
    >>> cores = queueing_step(ctx, Plan()).plan
    >>> r = elasticutor_step(ctx, cores)
    >>> r.figures["cores_per_node"], r.figures["migration_cost_bytes"]
    ({'n1': {'agg[0]': 3}, 'n2': {'agg[1]': 2}}, 0.0)
    """
    insts, loads, problem = _assignment_problem(context, plan)
    res = assign_cores(problem, phi0=SETTINGS.read(context.params)["phi0_kbps"] * 1024.0)
    return _place(context, plan, insts, loads, res)


@register(
    "placer", "naive-ec", "naive-EC: the same cores per instance, taken at random", params=SETTINGS
)
def naive_ec_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Assign cores obliviously of migration cost and locality (paper 000, §5).

    Examples
    --------
    Two instances of ``agg`` receive 150 t/s each and one core serves μ = 100 t/s; two
    4-core nodes; T_max = 20 ms. The queueing allocator's cores (3 and 2), drawn at random:
    two of the five land away from their instance's home node.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4,
    ...                                      state_bytes=800)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0}, seed=0)
    >>> r = naive_ec_step(ctx, queueing_step(ctx, Plan()).plan)
    >>> r.figures["cores_per_node"], r.figures["remote_cores"]
    ({'n1': {'agg[0]': 2, 'agg[1]': 1}, 'n2': {'agg[0]': 1, 'agg[1]': 1}}, 2)
    """
    insts, loads, problem = _assignment_problem(context, plan)
    return _place(context, plan, insts, loads, naive_ec(problem, seed=context.seed))


@register(
    "balancer",
    "shard",
    "Elasticutor intra-instance shard balancing (delta <= theta)",
    params=SETTINGS,
)
def shard_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Rebalance every instance's shards over its tasks (paper 000, §3.1).

    Units the allocation asks for but the placement lacks are placed home-first.

    Examples
    --------
    Two instances of ``agg`` receive 150 t/s each and one core serves μ = 100 t/s; two
    4-core nodes; T_max = 20 ms. After the queueing allocator (3 and 2 cores) and the
    placer, ``agg[1]``'s four equal shards split 2 + 2 (δ = 1); ``agg[0]``'s cannot do
    better than 2 + 1 + 1 on three tasks (δ = 2/(4/3) = 1.5 > θ).

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4,
    ...                                      state_bytes=800)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0}, seed=0)
    >>> from streamscale.planning.registry import compose
    >>> steps = [("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")]
    >>> plan, figures, notes = compose(ctx, steps=steps)
    >>> plan.routing.tables["agg[1]"]
    ('agg[1]#0', 'agg[1]#1', 'agg[1]#0', 'agg[1]#1')
    >>> figures["balancer:shard"]["delta_after"], figures["balancer:shard"]["above_theta"]
    (1.5, 1)
    """
    insts, loads = planning_inputs(context)
    nodes = list(context.cluster.names)
    x0 = placement_matrix(plan, insts, nodes)
    k = _targets(plan, insts, x0)
    renames = None
    placement = {u: n for u, n in plan.placement.nodes.items()}
    if x0.sum(axis=0).tolist() != k:
        homes = [nodes.index(info.home) for info in insts]
        x = fill_assignment(x0, k, [n.cores for n in context.cluster.nodes], homes)
        mine, renames = realize_units(plan, insts, x, nodes)
        placement = {**others(plan.placement.nodes, insts), **mine}
    cores = {info.instance: k[j] for j, info in enumerate(insts)}
    theta = SETTINGS.read(context.params)["theta"]
    before = []
    known: dict[str, tuple[list[int | None], float | None]] = {}
    for info in insts:
        cur = table_to_tasks(
            plan.routing.tables.get(info.instance), info.instance, info.shards, None
        )
        d = table_delta(loads[info.instance].shard_load, cur, cores[info.instance])
        if d is not None:
            before.append(d)
        known[info.instance] = (cur, d)
    # without renames route reads the same tables against the same cores
    tables, results = route(
        plan, insts, loads, cores, renames, theta=theta, known=known if renames is None else None
    )
    new = assemble(
        {**others(plan.allocation.cores, insts), **cores},
        placement,
        {**others(plan.routing.tables, insts), **tables},
    )
    after = [r.delta_after for r in results.values()]
    figures = {
        "shard_moves": int(sum(len(r.moves) for r in results.values())),
        "rounds": int(sum(r.rounds for r in results.values())),
        "delta_before": max(before) if before else None,
        "delta_after": max(after),
        "delta_after_mean": float(np.mean(after)),
        "theta": theta,
        "above_theta": int(sum(d > theta + 1e-9 for d in after)),
    }
    return StepResult(new, figures)
