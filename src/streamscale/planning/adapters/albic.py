"""Balancers ``milp``, ``albic``, ``flux``, ``potc`` and ``cola``: key group → node (paper 003).

Every keyed processing operator's shards are ALBIC's key groups. The plan
represents "key group on node" by giving each operator one unit per node,
``f"{op}#{j}"`` placed on the ``j``-th node of the cluster
(``Allocation.cores[op]`` = number of nodes), and routing each instance's
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
(1.0), ``max_load_distance_pct`` (5.0), ``max_partition_load_pct`` (ALBIC, 25.0),
``merge_factor`` (PoTC, 0.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Placement, Plan, Routing, unit_id
from streamscale.model.ids import group_id, instance_id, operator_of
from streamscale.planning.balancing.flux import flux
from streamscale.planning.balancing.keygroup_settings import (
    BUDGET,
    MAX_PARTITION_LOAD,
    MERGE_FACTOR,
    PAIR_SHARE,
    SCORE_FACTOR,
    SOLVE,
    SOLVER,
    SPREAD,
)
from streamscale.planning.balancing.keygroups import (
    BalanceResult,
    KeyGroupProblem,
    keyed_operators,
)
from streamscale.planning.balancing.metrics import collocation_factor, evaluate, load_distance_pct
from streamscale.planning.balancing.potc import potc
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema

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
    mine = set(ops)
    cores = {k: v for k, v in plan.allocation.cores.items() if operator_of(k) not in mine}
    placement = {u: n for u, n in plan.placement.nodes.items() if operator_of(u) not in mine}
    tables = {k: v for k, v in plan.routing.tables.items() if operator_of(k) not in mine}
    for op_name in ops:
        op = context.topology.operator(op_name)
        cores[op_name] = problem.n
        for j, node in enumerate(problem.nodes):
            placement[unit_id(op_name, j)] = node
        for e in range(op.instances):
            idx = [
                problem.group_index[group_id(op_name, e * op.shards + s)] for s in range(op.shards)
            ]
            tables[instance_id(op_name, e)] = tuple(
                unit_id(op_name, int(assignment[i])) for i in idx
            )
    return Plan(Allocation(cores, plan.allocation.slots), Placement(placement), Routing(tables))


MILP_SETTINGS = Schema("balancer milp", *BUDGET, *SOLVE, SOLVER)
ALBIC_SETTINGS = Schema(
    "balancer albic",
    *BUDGET,
    *SOLVE,
    SPREAD,
    SCORE_FACTOR,
    MAX_PARTITION_LOAD,
    PAIR_SHARE,
)
FLUX_SETTINGS = Schema("balancer flux", *BUDGET)
POTC_SETTINGS = Schema("balancer potc", MERGE_FACTOR)
COLA_SETTINGS = Schema("balancer cola", SPREAD)


def _budget(p: dict[str, Any]) -> tuple[int | None, float | None]:
    mm = p["max_migrations"]
    return (mm if mm > 0 else None), p["max_migration_bytes"]


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


def _milp_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    return {"time_limit_s": p["time_limit_s"], "deterministic_limit": p["deterministic_limit"]}


@register(
    "balancer",
    "milp",
    "ALBIC's MILP: key groups to nodes, min load distance within a migration budget",
    params=MILP_SETTINGS,
)
def milp_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Paper 003, §4.3.1: MILP load balancing with migration budget and scale-in.

    Examples
    --------
    Key groups start spread evenly: ``n1`` holds ``up/0`` (1.0 core) and its partner
    ``down/0`` (0.6), ``n2`` the other pair (0.2 + 0.2); the mean is 1.0, so the load
    distance is 60 %, and all traffic is local. One migration is allowed. Moving ``down/0``
    balances both nodes exactly (and halves the collocation).

    >>> from streamscale.model import (Cluster, Edge, Operator, Plan, ShardStats, Snapshot,
    ...                                Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats("up", 0, load=1.0), ShardStats("up", 1, load=0.2),
    ...             ShardStats("down", 0, load=0.6), ShardStats("down", 1, load=0.2)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap,
    ...                       params={"max_migrations": 1}, seed=0)
    >>> r = milp_step(ctx, Plan())
    >>> f = r.figures
    >>> round(f["load_distance_pct"], 1), f["migrations"], f["collocation_pct"]
    (0.0, 1, 50.0)
    >>> r.plan.routing.tables["down[0]"]  # both key groups of down now on n2
    ('down#1', 'down#1')
    """
    from streamscale.planning.balancing.milp import solve_milp  # HiGHS/OR-Tools: ~0.6 s

    params = MILP_SETTINGS.read(context.params)
    problem = build_problem(context, plan)
    mm, mc = _budget(params)
    solver = params["solver"]
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
    params=ALBIC_SETTINGS,
)
def albic_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Paper 003, §4.3.2: one ALBIC round (collocation sets rebuilt from the current plan).

    Examples
    --------
    Key groups start spread evenly: ``n1`` holds ``up/0`` (1.0 core) and its partner
    ``down/0`` (0.6), ``n2`` the other pair (0.2 + 0.2); the mean is 1.0, so the load
    distance is 60 %, and all traffic is local. One migration is allowed. Both pairs cannot
    stay together within one move and the balance, so ALBIC ends where the MILP does.

    >>> from streamscale.model import (Cluster, Edge, Operator, Plan, ShardStats, Snapshot,
    ...                                Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats("up", 0, load=1.0), ShardStats("up", 1, load=0.2),
    ...             ShardStats("down", 0, load=0.6), ShardStats("down", 1, load=0.2)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap,
    ...                       params={"max_migrations": 1}, seed=0)
    >>> f = albic_step(ctx, Plan()).figures
    >>> round(f["load_distance_pct"], 1), f["migrations"], f["collocation_pct"]
    (0.0, 1, 50.0)
    """
    from streamscale.planning.balancing.albic import albic, collocation_candidates  # ~0.9 s

    params = ALBIC_SETTINGS.read(context.params)
    problem = build_problem(context, plan)
    mm, mc = _budget(params)
    sf = params["score_factor"]
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
        max_load_distance_pct=params["max_load_distance_pct"],
        max_partition_load_pct=params["max_partition_load_pct"],
        new_pairs=None if params["pair_share"] > 0 else 1,
        pair_share=params["pair_share"],
        seed=context.seed,
        **_milp_kwargs(params),
    )
    return _step(context, plan, problem, res)


@register(
    "balancer",
    "flux",
    "Flux baseline: largest suitable key group from most to least loaded node",
    params=FLUX_SETTINGS,
)
def flux_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Flux (Shah et al. 2003) as the baseline of paper 003, §5.

    Examples
    --------
    Key groups start spread evenly: ``n1`` holds ``up/0`` (1.0 core) and its partner
    ``down/0`` (0.6), ``n2`` the other pair (0.2 + 0.2); the mean is 1.0, so the load
    distance is 60 %, and all traffic is local. One migration is allowed. Flux moves the
    largest suitable key group, ``up/0``, and leaves 0.6 and 1.4 (40 %) where moving
    ``down/0`` would have balanced.

    >>> from streamscale.model import (Cluster, Edge, Operator, Plan, ShardStats, Snapshot,
    ...                                Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats("up", 0, load=1.0), ShardStats("up", 1, load=0.2),
    ...             ShardStats("down", 0, load=0.6), ShardStats("down", 1, load=0.2)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap,
    ...                       params={"max_migrations": 1}, seed=0)
    >>> f = flux_step(ctx, Plan()).figures
    >>> round(f["load_distance_pct"], 1), f["migrations"]
    (40.0, 1)
    """
    problem = build_problem(context, plan)
    mm, mc = _budget(FLUX_SETTINGS.read(context.params))
    return _step(context, plan, problem, flux(problem, max_migrations=mm, max_cost=mc))


@register(
    "balancer",
    "potc",
    "Power of two choices: keys split over two nodes, periodic merge overhead",
    params=POTC_SETTINGS,
)
def potc_step(context: PlanningContext, plan: Plan) -> StepResult:
    """PoTC (paper 003, §2, §5.2): the plan keeps each key group's primary node.

    Examples
    --------
    Key groups start spread evenly: ``n1`` holds ``up/0`` (1.0 core) and its partner
    ``down/0`` (0.6), ``n2`` the other pair (0.2 + 0.2); the mean is 1.0, so the load
    distance is 60 %, and all traffic is local. One migration is allowed. PoTC moves no
    state: each key group's load splits over both nodes, plus a merge overhead, which leaves
    the distance under 1 %.

    >>> from streamscale.model import (Cluster, Edge, Operator, Plan, ShardStats, Snapshot,
    ...                                Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats("up", 0, load=1.0), ShardStats("up", 1, load=0.2),
    ...             ShardStats("down", 0, load=0.6), ShardStats("down", 1, load=0.2)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap,
    ...                       params={"max_migrations": 1}, seed=0)
    >>> f = potc_step(ctx, Plan()).figures
    >>> f["migrations"], round(f["load_distance_pct"], 2), round(f["merge_overhead"], 3)
    (0, 0.5, 0.101)
    """
    problem = build_problem(context, plan)
    res = potc(
        problem, merge_factor=POTC_SETTINGS.read(context.params)["merge_factor"], seed=context.seed
    )
    step = _step(context, plan, problem, res)
    figures = dict(step.figures)
    figures["load_distance_pct"] = res.extra["load_distance_pct"]  # PoTC's own split loads
    return StepResult(step.plan, figures, step.notes)


@register(
    "balancer",
    "cola",
    "COLA baseline: recursive METIS partitioning from scratch (many migrations)",
    params=COLA_SETTINGS,
)
def cola_step(context: PlanningContext, plan: Plan) -> StepResult:
    """COLA (Khandekar et al. 2009) as the collocation baseline of paper 003, §5.3.

    Examples
    --------
    Key groups start spread evenly: ``n1`` holds ``up/0`` (1.0 core) and its partner
    ``down/0`` (0.6), ``n2`` the other pair (0.2 + 0.2); the mean is 1.0, so the load
    distance is 60 %, and all traffic is local. One migration is allowed. COLA re-partitions
    from scratch (it takes no migration budget); here that also costs one migration.

    >>> from streamscale.model import (Cluster, Edge, Operator, Plan, ShardStats, Snapshot,
    ...                                Topology, Traffic)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("up", key="k", shards=2),
    ...                             Operator("down", key="k", shards=2), Operator("out", "sink")],
    ...                       [Edge("src", "up", "key"), Edge("up", "down", "key"),
    ...                        Edge("down", "out")])
    >>> snap = Snapshot.build(
    ...     shards=[ShardStats("up", 0, load=1.0), ShardStats("up", 1, load=0.2),
    ...             ShardStats("down", 0, load=0.6), ShardStats("down", 1, load=0.2)],
    ...     traffic=[Traffic("up", 0, "down", 0, 50.0), Traffic("up", 1, "down", 1, 50.0)])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), snapshot=snap,
    ...                       params={"max_migrations": 1}, seed=0)
    >>> f = cola_step(ctx, Plan()).figures
    >>> round(f["load_distance_pct"], 1), f["migrations"], f["collocation_pct"]
    (0.0, 1, 50.0)
    """
    from streamscale.planning.balancing.cola import cola  # METIS: paid only when COLA runs

    problem = build_problem(context, plan)
    res = cola(
        problem,
        max_load_distance_pct=COLA_SETTINGS.read(context.params)["max_load_distance_pct"],
        seed=context.seed,
    )
    return _step(context, plan, problem, res)
