"""Placers ``naive``, ``tl``, ``tl-imc``, ``td`` and ``optimal`` (paper 001) over the domain model.

Every instance of the plan is a group of paper 001 and its units are the
group's tasks. Instances come from the plan's allocation when it has one
(``op`` or ``op[e]`` with ``k`` units ``…#0 … #k-1``), else each operator is
one group of ``instances`` tasks ``f"{op}#{i}"``. An operator's processing
cost and its edges' IMC come from :meth:`GroupJob.from_topology` (snapshot
when present, else ``cost_ms`` × the rate propagated from ``context.rate``);
an operator split into executors ``op[e]`` shares them evenly, and every
executor pair of two connected operators shares the edge's IMC evenly.

Params (all optional): ``utilization`` (1.0: share of each node's spare
capacity — capacity minus ``reserved_cpu`` — the job may use), ``alpha``
(balance: μ_n = α·Σpc/|N|), ``relax`` (True: when tasks are too coarse to
fit, retry with the GCD task granularity of §5, which changes task counts),
``singles`` (td: ``least-loaded`` | ``affinity``), ``order`` (tl, tl-imc,
naive: ``diagonal`` | ``random``), ``time_limit_s`` (optimal, 10), ``work_limit``
(optimal: CP-SAT deterministic time limit).
A placement that still leaves a task without a node raises
:class:`InfeasibleError` naming the group.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from streamscale.errors import InfeasibleError, ModelError
from streamscale.model import Allocation, Placement, Plan
from streamscale.planning.placement.groups import Group, GroupEdge, GroupJob, TaskAllocation
from streamscale.planning.placement.naive_pairs import naive_pairs
from streamscale.planning.placement.optimal import optimal
from streamscale.planning.placement.relaxations import gcd_granularity
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down
from streamscale.planning.registry import PlanningContext, StepResult, register

__all__ = ["allocation_figures", "build_job"]

_INSTANCE = re.compile(r"^(?P<op>.+?)(\[\d+\])?$")


def build_job(context: PlanningContext, plan: Plan) -> GroupJob:
    """The group job of ``context`` (see the module docstring for every rule)."""
    topo, params = context.topology, context.params
    per_op: dict[str, list[tuple[str, int]]] = {op.name: [] for op in topo.operators}
    if plan.allocation.cores:
        for inst, k in plan.allocation.cores.items():
            m = _INSTANCE.match(inst)
            op = m.group("op") if m else inst
            if op not in per_op:
                raise ModelError("allocation names an unknown operator", item=f"instance {inst}")
            if k < 1:
                raise ModelError("an instance needs at least one unit", item=f"instance {inst}")
            per_op[op].append((inst, int(k)))
    else:
        for op in topo.operators:
            per_op[op.name].append((op.name, op.instances))
    base = GroupJob.from_topology(
        topo,
        context.cluster,
        rate=context.rate,
        snapshot=context.snapshot,
        utilization=float(params.get("utilization", 1.0)),
        alpha=None if params.get("alpha") is None else float(params["alpha"]),
    )
    groups = [
        Group(inst, k, g.cost / len(per_op[g.name]))
        for g in base.groups
        for inst, k in per_op[g.name]
    ]
    edges = [
        GroupEdge(a, b, e.imc / (len(per_op[e.src]) * len(per_op[e.dst])))
        for e in base.edges
        for a, _ in per_op[e.src]
        for b, _ in per_op[e.dst]
    ]
    return GroupJob(tuple(groups), tuple(edges), base.nodes, base.capacities)


def allocation_figures(alloc: TaskAllocation) -> dict[str, Any]:
    """JSON-able figures: IMC gain, collocated links, per-node load, completeness."""
    job = alloc.job
    loads = alloc.loads
    return {
        "imc_gain_mbps": alloc.gain,
        "collocated_links": alloc.collocated_links,
        "total_imc_mbps": sum(e.imc for e in job.edges),
        "node_load": dict(zip(job.nodes, loads, strict=True)),
        "nodes_used": sum(1 for x in loads if x > 0),
        "tasks": dict(zip((g.name for g in job.groups), job.tasks, strict=True)),
        "complete": alloc.complete,
        "proven_optimal": alloc.proven_optimal,
    }


def _run(
    name: str,
    context: PlanningContext,
    plan: Plan,
    algorithm: Callable[[GroupJob], TaskAllocation],
) -> StepResult:
    job = build_job(context, plan)
    alloc = algorithm(job)
    notes: tuple[str, ...] = ()
    if not alloc.complete and context.params.get("relax", True):
        finer = gcd_granularity(job)
        if finer.tasks != job.tasks:
            retry = algorithm(finer)
            if retry.complete:
                alloc = retry
                notes = (f"{name}: tasks too coarse to fit; task counts set by the cost GCD (§5)",)
    if not alloc.complete:
        g = next(i for i, u in enumerate(alloc.unplaced) if u)
        raise InfeasibleError(
            f"{alloc.unplaced[g]} of {alloc.job.tasks[g]} tasks fit on no node",
            item=f"group {alloc.job.groups[g].name}",
        )
    cores = {g.name: g.tasks for g in alloc.job.groups}
    allocation = (
        replace(plan.allocation, cores={**plan.allocation.cores, **cores})
        if plan.allocation.cores
        else Allocation(cores=cores)
    )
    mine = {f"{g}#" for g in cores}
    kept = {u: n for u, n in plan.placement.nodes.items() if u[: u.rfind("#") + 1] not in mine}
    placement = Placement(nodes={**kept, **alloc.assignment()})
    figures = {"algorithm": name, **allocation_figures(alloc)}
    return StepResult(replace(plan, allocation=allocation, placement=placement), figures, notes)


@register("placer", "naive", "paper 001 §3.1: task pairs by IMC onto nodes by capacity")
def naive_placer(context: PlanningContext, plan: Plan) -> StepResult:
    order = context.params.get("order", "diagonal")
    return _run("naive", context, plan, lambda j: naive_pairs(j, order=order, seed=context.seed))


@register("placer", "tl", "paper 001 §3.2: task-level, pairs by relative significance")
def tl_placer(context: PlanningContext, plan: Plan) -> StepResult:
    order = context.params.get("order", "diagonal")
    return _run("tl", context, plan, lambda j: task_level(j, order=order, seed=context.seed))


@register("placer", "tl-imc", "paper 001 §3.2: task-level, pairs by IMC")
def tl_imc_placer(context: PlanningContext, plan: Plan) -> StepResult:
    order = context.params.get("order", "diagonal")
    return _run(
        "tl-imc",
        context,
        plan,
        lambda j: task_level(j, priority="imc", order=order, seed=context.seed),
    )


@register("placer", "td", "paper 001 §4: top-down group-aware allocation (TD)")
def td_placer(context: PlanningContext, plan: Plan) -> StepResult:
    singles = context.params.get("singles", "least-loaded")
    return _run("td", context, plan, lambda j: top_down(j, singles=singles))


@register("placer", "optimal", "paper 001 §7.3: maximum IMC gain with CP-SAT (small jobs)")
def optimal_placer(context: PlanningContext, plan: Plan) -> StepResult:
    limit = float(context.params.get("time_limit_s", 10.0))
    work = context.params.get("work_limit")
    return _run(
        "optimal",
        context,
        plan,
        lambda j: (
            optimal(
                j,
                time_limit_s=limit,
                work_limit=None if work is None else float(work),
                seed=context.seed,
            ).allocation
        ),
    )
