"""Balancers ``milp``, ``albic``, ``flux``, ``potc`` and ``cola``: key group → node (paper 003).

Every keyed processing operator's shards are ALBIC's key groups. The plan
represents "key group on node" by giving each operator one unit per node,
``f"{op}#{j}"`` placed on the ``j``-th node of the cluster
(``Allocation.cores[op]`` = number of nodes), and routing each executor's
local shard to the unit of the node that holds it — the resource-centric
form of the plan contract, so ``Plan.diff`` counts every key group that
changes node as a remote shard move.

The problem is read from the snapshot: shard loads (cores), state sizes
(migration cost), shard-to-shard traffic and nodes marked for removal; the
current node of each key group from the current plan's routing and placement
(key groups the plan does not place start spread evenly). ALBIC keeps no state
between calls: qualifying pairs that already share a node are its existing
collocation sets.

Params (all optional): ``max_migrations`` (20; ``0`` or negative = no limit),
``max_migration_bytes`` (cost budget), ``time_limit_s`` (2.0),
``deterministic_limit``, ``solver`` (``highs`` | ``cpsat``), ``score_factor``
(1.0), ``max_load_distance_pct`` (5.0), ``merge_factor`` (PoTC, 0.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Placement, Plan, Routing, unit_id
from streamscale.planning.balancing.albic import albic, collocation_candidates
from streamscale.planning.balancing.cola import cola
from streamscale.planning.balancing.flux import flux
from streamscale.planning.balancing.keygroups import (
    BalanceResult,
    KeyGroupProblem,
    keyed_operators,
)
from streamscale.planning.balancing.metrics import collocation_factor, evaluate, load_distance_pct
from streamscale.planning.balancing.milp import solve_milp
from streamscale.planning.balancing.potc import potc
from streamscale.planning.registry import PlanningContext, StepResult, register

__all__ = [
    "albic_step",
    "build_problem",
    "cola_step",
    "flux_step",
    "milp_step",
    "potc_step",
    "to_plan",
]


def build_problem(context: PlanningContext, plan: Plan) -> KeyGroupProblem:
    """The key-group problem of ``context`` (snapshot) and ``plan`` (current allocation)."""
    if context.snapshot is None:
        raise StreamscaleError("needs a snapshot with shard loads (--snapshot)", item="balancer")
    if not keyed_operators(context.topology):
        raise StreamscaleError("no keyed operator to balance", item=context.topology.name)
    return KeyGroupProblem.from_snapshot(context.snapshot, plan, context.topology, context.cluster)


def to_plan(
    context: PlanningContext, plan: Plan, problem: KeyGroupProblem, assignment: np.ndarray
) -> Plan:
    """``plan`` with every keyed operator's units, placement and routing set from ``assignment``."""
    ops = keyed_operators(context.topology)
    cores = {
        k: v
        for k, v in plan.allocation.cores.items()
        if not any(k == op or k.startswith(op + "[") for op in ops)
    }
    placement = {
        u: n
        for u, n in plan.placement.nodes.items()
        if not any(u.startswith(op + "#") or u.startswith(op + "[") for op in ops)
    }
    tables = {
        k: v
        for k, v in plan.routing.tables.items()
        if not any(k.startswith(op + "[") for op in ops)
    }
    for op_name in ops:
        op = context.topology.operator(op_name)
        cores[op_name] = problem.n
        for j, node in enumerate(problem.nodes):
            placement[unit_id(op_name, j)] = node
        for e in range(op.instances):
            idx = [problem.group_index[f"{op_name}/{e * op.shards + s}"] for s in range(op.shards)]
            tables[f"{op_name}[{e}]"] = tuple(unit_id(op_name, int(assignment[i])) for i in idx)
    return Plan(Allocation(cores, plan.allocation.slots), Placement(placement), Routing(tables))


def _budget(params: dict[str, Any]) -> tuple[int | None, float | None]:
    try:
        mm = int(params.get("max_migrations", 20))
        mc = params.get("max_migration_bytes")
        cost = float(mc) if mc is not None else None
    except (TypeError, ValueError) as exc:
        raise StreamscaleError(
            f"not a number: {exc}", item="max_migrations/max_migration_bytes"
        ) from None
    return (mm if mm > 0 else None), cost


def _float(params: dict[str, Any], key: str, default: float) -> float:
    try:
        return float(params.get(key, default))
    except (TypeError, ValueError):
        raise StreamscaleError(f"not a number: {params.get(key)!r}", item=key) from None


def _step(
    context: PlanningContext, plan: Plan, problem: KeyGroupProblem, res: BalanceResult
) -> StepResult:
    m = evaluate(problem, res.assignment)
    figures: dict[str, Any] = {
        "key_groups": problem.k,
        "nodes": problem.n,
        "nodes_marked_for_removal": int(problem.removing.sum()),
        "load_distance_pct_before": load_distance_pct(problem),
        "load_distance_pct": m.load_distance_pct,
        "collocation_pct_before": collocation_factor(problem),
        "collocation_pct": m.collocation_pct,
        "migrations": m.migrations,
        "migration_bytes": m.migration_cost,
        "method": res.method,
        "solver_status": res.status,
        "solve_s": res.solve_s,
    }
    figures.update({k: float(v) for k, v in res.extra.items()})
    return StepResult(to_plan(context, plan, problem, res.assignment), figures, res.notes)


def _milp_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    dl = params.get("deterministic_limit")
    return {
        "time_limit_s": _float(params, "time_limit_s", 2.0),
        "deterministic_limit": float(dl) if dl is not None else None,
    }


@register(
    "balancer",
    "milp",
    "ALBIC's MILP: key groups to nodes, min load distance within a migration budget",
)
def milp_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Paper 003, §4.3.1: MILP load balancing with migration budget and scale-in."""
    params = dict(context.params)
    problem = build_problem(context, plan)
    mm, mc = _budget(params)
    solver = str(params.get("solver", "highs"))
    if solver not in ("cpsat", "highs"):
        raise StreamscaleError(f"must be cpsat or highs, got {solver!r}", item="solver")
    res = solve_milp(
        problem,
        max_migrations=mm,
        max_cost=mc,
        seed=context.seed,
        solver=solver,
        **_milp_kwargs(params),
    )
    return _step(context, plan, problem, res)


@register(
    "balancer",
    "albic",
    "ALBIC: MILP balancing plus incremental collocation of communicating key groups",
)
def albic_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Paper 003, §4.3.2: one ALBIC round (collocation sets rebuilt from the current plan)."""
    params = dict(context.params)
    problem = build_problem(context, plan)
    mm, mc = _budget(params)
    sf = _float(params, "score_factor", 1.0)
    existing = [
        [a, b]
        for _, a, b in collocation_candidates(problem, score_factor=sf)
        if problem.assignment[a] == problem.assignment[b]
    ]
    res = albic(
        problem,
        collocated=existing,
        max_migrations=mm,
        max_cost=mc,
        score_factor=sf,
        max_load_distance_pct=_float(params, "max_load_distance_pct", 5.0),
        seed=context.seed,
        **_milp_kwargs(params),
    )
    return _step(context, plan, problem, res)


@register(
    "balancer", "flux", "Flux baseline: largest suitable key group from most to least loaded node"
)
def flux_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Flux (Shah et al. 2003) as the baseline of paper 003, §5."""
    params = dict(context.params)
    problem = build_problem(context, plan)
    mm, mc = _budget(params)
    return _step(context, plan, problem, flux(problem, max_migrations=mm, max_cost=mc))


@register(
    "balancer", "potc", "Power of two choices: keys split over two nodes, periodic merge overhead"
)
def potc_step(context: PlanningContext, plan: Plan) -> StepResult:
    """PoTC (paper 003, §2, §5.2): the plan keeps each key group's primary node."""
    problem = build_problem(context, plan)
    res = potc(
        problem, merge_factor=_float(dict(context.params), "merge_factor", 0.1), seed=context.seed
    )
    step = _step(context, plan, problem, res)
    figures = dict(step.figures)
    figures["load_distance_pct"] = res.extra["load_distance_pct"]  # PoTC's own split loads
    return StepResult(step.plan, figures, step.notes)


@register(
    "balancer", "cola", "COLA baseline: recursive METIS partitioning from scratch (many migrations)"
)
def cola_step(context: PlanningContext, plan: Plan) -> StepResult:
    """COLA (Khandekar et al. 2009) as the collocation baseline of paper 003, §5.3."""
    params = dict(context.params)
    problem = build_problem(context, plan)
    res = cola(
        problem,
        max_load_distance_pct=_float(params, "max_load_distance_pct", 5.0),
        seed=context.seed,
    )
    return _step(context, plan, problem, res)
