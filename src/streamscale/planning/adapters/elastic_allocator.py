"""Placers ``gma``, ``random`` and ``even``: the Elastic Allocator (paper 002) over the domain model.

Every unit of the plan is one placeable operator of paper 002. Units come from
the plan's allocation when it has one (instance ``op`` or ``op[e]`` with
``k`` units ``…#0 … #k-1``), else each operator gets ``instances`` units
``f"{op}#{i}"``. An operator's CPU demand (% of one core) is its observed load
in the snapshot (Σ shard loads, or input rate × ``cost_ms``) when present, else
``cost_ms`` × the rate propagated from ``context.rate``. It is split over the
operator's units by the shard loads the plan's routing sends to each (when the
snapshot has shard loads and the routing covers them), else evenly. An edge
carries tuples/s × tuple bytes × 8 / 10⁶ Mbit/s: each producer unit sends in
proportion to its share; a key grouping delivers in proportion to the
consumers' shares, a shuffle evenly, ``all`` the full stream to every
consumer and ``global`` everything to the first unit.

Existing usage F0 is each node's ``reserved_cpu`` and
``reserved_bandwidth_mbps``; with ``params["usage"] = "observed"`` the
snapshot's node figures (``cpu``, ``bandwidth_mbps``) replace them — use that
only when the snapshot measures other work, not this job.

Params (all optional): ``d_cpu`` (0.9), ``d_bw`` (0.9), ``objective``
(``deviation`` | ``utilization``, gma), ``max_operations`` (100000, gma),
``search`` (gma: False runs Algorithm 1 literally, one greedy descent),
``workers`` (even: slots to use, default all), ``usage`` (``declared`` |
``observed``), ``strict`` (raise :class:`InfeasibleError` instead of returning
an infeasible best-effort placement).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from streamscale.errors import InfeasibleError, ModelError
from streamscale.model import Allocation, Placement, Plan, Topology, parse_instance, unit_id
from streamscale.planning.placement.elastic_allocator import (
    D_BW,
    D_CPU,
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
    AllocatorResult,
    Flow,
    even_placement,
    random_placement,
)
from streamscale.planning.placement.gma import MAX_OPERATIONS, OBJECTIVE, SEARCH, gma
from streamscale.planning.placement.groups import modelled_rates
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema, Setting

__all__ = ["build_problem", "even_placer", "figures", "gma_placer", "random_placer"]


def _units(topology: Topology, plan: Plan) -> tuple[dict[str, list[str]], Allocation]:
    """Units per operator, and the allocation they come from."""
    cores = dict(plan.allocation.cores)
    if not cores:
        cores = {op.name: op.instances for op in topology.operators}
    per_op: dict[str, list[str]] = {op.name: [] for op in topology.operators}
    for inst, k in cores.items():
        op = parse_instance(inst).operator
        if op not in per_op:
            raise ModelError("allocation names an unknown operator", item=f"instance {inst}")
        per_op[op].extend(unit_id(inst, t) for t in range(k))
    alloc = plan.allocation if plan.allocation.cores else Allocation(cores=cores)
    return per_op, alloc


def _unit_shares(
    op: str, shards_per_instance: int, units: list[str], context: PlanningContext, plan: Plan
) -> dict[str, float]:
    """Each unit's share of its operator's work: by the shard loads routed to it, else even.

    Routing tables of ``op[e]`` map local shard ``s`` to a unit; its global
    shard index is ``e·Z + s``. When the routed loads do not account for the
    whole operator (no snapshot, no routing, stale tables), shares are even.
    """
    even = {u: 1.0 / len(units) for u in units}
    snap = context.snapshot
    loads = {s.shard: s.load for s in snap.shards_of(op)} if snap is not None else {}
    total = sum(loads.values())
    if not loads or total <= 0:
        return even
    got = dict.fromkeys(units, 0.0)
    for inst, table in plan.routing.tables.items():
        iid = parse_instance(inst)
        if iid.operator != op:
            continue
        e = iid.index or 0
        for s, unit in enumerate(table):
            if unit in got:
                got[unit] += loads.get(e * shards_per_instance + s, 0.0)
    if abs(sum(got.values()) - total) > 1e-9 * max(1.0, total):
        return even
    return {u: v / total for u, v in got.items()}


PROBLEM = (
    Setting(
        "usage",
        str,
        "declared",
        "nodes' CPU and bandwidth already in use: declared in the cluster file or observed",
        choices=("declared", "observed"),
    ),
    D_CPU,
    D_BW,
    Setting("strict", bool, False, "fail when no placement within D_CPU and D_BW is found"),
)
PROBLEM_SETTINGS = Schema("placement problem", *PROBLEM)
GMA_SETTINGS = Schema(
    "placer gma",
    *PROBLEM,
    OBJECTIVE,
    MAX_OPERATIONS,
    SEARCH,
)
RANDOM_SETTINGS = Schema("placer random", *PROBLEM)
EVEN_SETTINGS = Schema(
    "placer even",
    *PROBLEM,
    Setting("workers", int, None, "Storm workers to spread over (default: every slot)", low=1),
)


def build_problem(context: PlanningContext, plan: Plan) -> tuple[AllocatorProblem, Allocation]:
    """Paper 002's problem for ``context`` (see the module docstring for every rule)."""
    topo, snap = context.topology, context.snapshot
    params = PROBLEM_SETTINGS.read(context.params)
    per_op, alloc = _units(topo, plan)
    observed = snap is not None and all(o.name in snap.operators for o in topo.operators)
    need = not observed or snap is None or any(e.name not in snap.edges for e in topo.edges)
    omega, edge_rates = modelled_rates(topo, context.rate, snap) if need else ({}, {})
    ops: list[AllocatorOperator] = []
    weights: dict[str, dict[str, float]] = {}
    for op in topo.operators:
        units = per_op[op.name]
        if not units:
            continue
        if snap is not None and op.name in snap.operators:
            shards = snap.shards_of(op.name)
            total = (
                100.0 * sum(s.load for s in shards)
                if shards
                else snap.operators[op.name].input_rate * op.cost_ms / 10.0
            )
        else:
            total = omega[op.name] * op.cost_ms / 10.0
        weights[op.name] = _unit_shares(op.name, op.shards, units, context, plan)
        ops.extend(AllocatorOperator(u, total * weights[op.name][u]) for u in units)
    flows: list[Flow] = []
    for e in topo.edges:
        src, dst = per_op[e.src], per_op[e.dst]
        if not src or not dst:
            continue
        tps = (
            snap.edges[e.name] if snap is not None and e.name in snap.edges else edge_rates[e.name]
        )
        mbps = tps * topo.edge_bytes(e) * 8 / 1e6
        ws = weights[e.src]
        # Only a key grouping sends each consumer what its shards hold; shuffle spreads evenly.
        wd = weights[e.dst] if e.grouping == "key" else {d: 1 / len(dst) for d in dst}
        if e.grouping == "global":
            flows.extend(Flow(s, dst[0], mbps * ws[s]) for s in src)
        elif e.grouping == "all":
            flows.extend(Flow(s, d, mbps * ws[s]) for s in src for d in dst)
        else:
            flows.extend(Flow(s, d, mbps * ws[s] * wd[d]) for s in src for d in dst)
    usage = params["usage"]
    nodes: list[AllocatorNode] = []
    for n in context.cluster.nodes:
        c0, b0 = n.reserved_cpu, n.reserved_bandwidth_mbps
        if usage == "observed" and snap is not None and n.name in snap.nodes:
            c0, b0 = snap.nodes[n.name].cpu, snap.nodes[n.name].bandwidth_mbps
        nodes.append(AllocatorNode(n.name, n.capacity, c0, n.bandwidth_mbps, b0, slots=n.cores))
    problem = AllocatorProblem(
        tuple(nodes),
        tuple(ops),
        tuple(flows),
        d_cpu=params["d_cpu"],
        d_bw=params["d_bw"],
    )
    return problem, alloc


def figures(result: AllocatorResult, problem: AllocatorProblem) -> dict[str, Any]:
    """JSON-able figures of a placement: objectives, feasibility and per-node loads."""
    ev = result.evaluation
    names = problem.node_names
    return {
        "cpu_utilization": ev.cpu_utilization,
        "bw_utilization": ev.bw_utilization,
        "link_utilization": ev.link_utilization,
        "cpu_deviation": ev.cpu_deviation,
        "bw_deviation": ev.bw_deviation,
        "feasible": ev.feasible,
        "throughput": ev.throughput,
        "node_cpu_load": dict(zip(names, ev.node_cpu_load, strict=True)),
        "node_bw_load": dict(zip(names, ev.node_bw_load, strict=True)),
        "operations": result.operations,
    }


def _finish(
    name: str,
    context: PlanningContext,
    plan: Plan,
    problem: AllocatorProblem,
    alloc: Allocation,
    result: AllocatorResult,
) -> StepResult:
    notes: tuple[str, ...] = ()
    if not result.feasible:
        msg = f"placement exceeds D_CPU={problem.d_cpu:g} or D_BW={problem.d_bw:g}"
        if result.proven_infeasible:
            msg += " (no placement within them exists)"
        elif result.exhausted:
            msg += " (none found within the budget)"
        if PROBLEM_SETTINGS.read(context.params)["strict"]:
            raise InfeasibleError(msg, item=f"placer {name}")
        notes = (f"{name}: {msg}; best-effort placement returned",)
    new = replace(plan, allocation=alloc, placement=Placement(nodes=dict(result.assignment)))
    return StepResult(new, figures(result, problem), notes)


@register(
    "placer",
    "gma",
    "paper 002: greedy matching under CPU and bandwidth limits (GMA)",
    params=GMA_SETTINGS,
    promises=("cpu_capacity",),
)
def gma_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """GMA (paper 002, §IV.E, Algorithm 1) with an operation budget.

    Examples
    --------
    At 100 t/s this is the problem of
    :func:`~streamscale.planning.placement.gma.gma`'s example: ``a`` needs 100 × 12 ms = 120 %
    of a core, ``b`` 80 %, and they exchange 100 × 125 kB × 8 = 100 Mbit/s; other work keeps
    ``n0`` 70 % and ``n1`` 10 % busy.

    >>> from streamscale.model import Cluster, Edge, Node, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("q", [Operator("a", "source", cost_ms=12.0, tuple_bytes=125_000),
    ...                             Operator("b", "sink", cost_ms=8.0)], [Edge("a", "b")])
    >>> cluster = Cluster.build([Node("n0", cores=4, reserved_cpu=280.0),
    ...                          Node("n1", cores=4, reserved_cpu=40.0)])
    >>> ctx = PlanningContext(topo, cluster, rate=100.0, seed=1)
    >>> r = gma_placer(ctx, Plan())
    >>> dict(r.plan.placement.nodes), r.figures["feasible"], r.figures["node_cpu_load"]
    ({'a#0': 'n1', 'b#0': 'n1'}, True, {'n0': 0.7, 'n1': 0.6})
    """
    problem, alloc = build_problem(context, plan)
    p = GMA_SETTINGS.read(context.params)
    result = gma(
        problem,
        objective=p["objective"],
        max_operations=p["max_operations"],
        search=p["search"],
    )
    out = _finish("gma", context, plan, problem, alloc, result)
    figs = dict(
        out.figures,
        best_effort=len(result.best_effort),
        exhausted=result.exhausted,
        proven_infeasible=result.proven_infeasible,
    )
    return replace(out, figures=figs)


@register(
    "placer",
    "random",
    "paper 002 baseline: every unit on a random node (seeded)",
    params=RANDOM_SETTINGS,
    promises=("cpu_capacity",),
)
def random_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """Random baseline (paper 002, §V).

    Examples
    --------
    At 100 t/s this is the problem of :func:`~streamscale.planning.placement.gma.gma`'s
    example: ``a`` needs 100 × 12 ms = 120 % of a core, ``b`` 80 %, and they exchange 100 ×
    125 kB × 8 = 100 Mbit/s; other work keeps ``n0`` 70 % and ``n1`` 10 % busy. The draw of
    seed 1 overloads ``n0``; with ``strict`` that is an error.

    >>> from streamscale.model import Cluster, Edge, Node, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("q", [Operator("a", "source", cost_ms=12.0, tuple_bytes=125_000),
    ...                             Operator("b", "sink", cost_ms=8.0)], [Edge("a", "b")])
    >>> cluster = Cluster.build([Node("n0", cores=4, reserved_cpu=280.0),
    ...                          Node("n1", cores=4, reserved_cpu=40.0)])
    >>> ctx = PlanningContext(topo, cluster, rate=100.0, seed=1)
    >>> random_placer(ctx, Plan()).figures["node_cpu_load"]
    {'n0': 1.0, 'n1': 0.3}
    >>> from dataclasses import replace
    >>> random_placer(replace(ctx, params={"strict": True}), Plan())
    Traceback (most recent call last):
    ...
    streamscale.errors.InfeasibleError: placer random: placement exceeds D_CPU=0.9 or D_BW=0.9
    """
    problem, alloc = build_problem(context, plan)
    result = random_placement(problem, seed=context.seed)
    return _finish("random", context, plan, problem, alloc, result)


@register(
    "placer",
    "even",
    "paper 002 baseline: Storm's even scheduler, round-robin over slots",
    params=EVEN_SETTINGS,
    promises=("cpu_capacity",),
)
def even_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """Even baseline (paper 002, §V): Storm's even scheduler.

    Examples
    --------
    At 100 t/s this is the problem of
    :func:`~streamscale.planning.placement.gma.gma`'s example: ``a`` needs 100 × 12 ms = 120 %
    of a core, ``b`` 80 %, and they exchange 100 × 125 kB × 8 = 100 Mbit/s; other work keeps
    ``n0`` 70 % and ``n1`` 10 % busy. The even scheduler overloads ``n0`` and says so in a note.

    >>> from streamscale.model import Cluster, Edge, Node, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("q", [Operator("a", "source", cost_ms=12.0, tuple_bytes=125_000),
    ...                             Operator("b", "sink", cost_ms=8.0)], [Edge("a", "b")])
    >>> cluster = Cluster.build([Node("n0", cores=4, reserved_cpu=280.0),
    ...                          Node("n1", cores=4, reserved_cpu=40.0)])
    >>> ctx = PlanningContext(topo, cluster, rate=100.0, seed=1)
    >>> r = even_placer(ctx, Plan())
    >>> dict(r.plan.placement.nodes), r.figures["feasible"], r.figures["node_cpu_load"]["n0"]
    ({'a#0': 'n0', 'b#0': 'n1'}, False, 1.0)
    >>> r.notes
    ('even: placement exceeds D_CPU=0.9 or D_BW=0.9; best-effort placement returned',)
    """
    problem, alloc = build_problem(context, plan)
    workers = EVEN_SETTINGS.read(context.params)["workers"]
    result = even_placement(problem, workers=workers)
    return _finish("even", context, plan, problem, alloc, result)
