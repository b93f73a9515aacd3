"""Placers ``naive``, ``tl``, ``tl-imc``, ``td`` and ``optimal`` (paper 001) over the domain model.

Every instance of the plan is a group of paper 001 and its units are the
group's tasks. Instances come from the plan's allocation when it has one
(``op`` or ``op[e]`` with ``k`` units ``…#0 … #k-1``), else each operator is
one group of ``instances`` tasks ``f"{op}#{i}"``. An operator's processing
cost and its edges' IMC come from :meth:`GroupJob.from_topology` (snapshot
when present, else ``cost_ms`` × the rate propagated from ``context.rate``);
an operator split into instances ``op[e]`` shares them evenly, and every
instance pair of two connected operators shares the edge's IMC evenly — unless
the snapshot reports shard-to-shard ``traffic`` for that edge: then each
instance pair gets the traffic between its shards (× the edge's tuple bytes), so
the diagonal traffic of two operators sharing a key links ``a[e]`` to ``b[e]``
only.

With ``task_cost="core"`` every task costs one whole core (a Spark task holds
an executor core while it runs), so a node holds at most as many tasks as it
has spare cores; the default ``load`` is the paper's share of the measured load.

When the snapshot has shard loads and the plan's routing tables say which
unit serves each shard, tasks of one instance may cost unequal amounts; such
instances are split into subgroups of near-equal task cost first (§5), and
the allocation is mapped back to the original units.

Params (all optional): ``utilization`` (1.0: share of each node's spare
capacity — capacity minus ``reserved_cpu`` — the job may use), ``alpha``
(balance: μ_n = α·Σpc/|N|), ``relax`` (True: when tasks are too coarse to
fit — naive, TL and TD already backtrack (§2.2), so only when no complete
allocation of the given tasks was found — retry with the GCD task
granularity of §5, which changes task counts),
``skew`` (True: split skewed instances as above), ``skew_margin`` (0.2:
relative cost spread within a subgroup), ``singles`` (td: ``least-loaded`` | ``affinity``), ``literal`` (td: False; True runs Algorithm 5 as written), ``no_split`` (td:
``partial`` | ``to-r``, what a node that takes no balanced split gets), ``order`` (tl, tl-imc,
naive: ``diagonal`` | ``storm`` — task-id order, the literal reading — | ``random``), ``time_limit_s`` (optimal, 10), ``work_limit``
(optimal: CP-SAT deterministic time limit).
A placement that still leaves a task without a node raises
:class:`InfeasibleError` naming the group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from streamscale.errors import InfeasibleError, ModelError
from streamscale.model import Allocation, Placement, Plan, instance_id, instance_of, parse_instance
from streamscale.planning.placement.groups import (
    UTILIZATION,
    Group,
    GroupEdge,
    GroupJob,
    TaskAllocation,
)
from streamscale.planning.placement.naive_pairs import REFINE, naive_pairs
from streamscale.planning.placement.optimal import TIME_LIMIT
from streamscale.planning.placement.relaxations import gcd_granularity, split_skewed
from streamscale.planning.placement.task_level import ORDER, task_level
from streamscale.planning.placement.top_down import LITERAL, NO_SPLIT, SINGLES, top_down
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema, Setting

__all__ = ["allocation_figures", "build_job", "task_costs"]


JOB = (
    UTILIZATION,
    Setting(
        "alpha",
        float,
        None,
        "balance instead: node share α·Σcost/|N| (§2.2; unset: pack)",
        low=0.0,
        low_open=True,
    ),
    Setting("skew", bool, True, "split skewed groups into near-uniform subgroups (§5)"),
    Setting("skew_margin", float, 0.2, "relative cost spread a group may keep unsplit", low=0.0),
    Setting(
        "relax", bool, True, "retry with task counts set by the cost GCD when tasks do not fit"
    ),
    Setting(
        "task_cost",
        str,
        "load",
        "a task's cost: its share of the measured load (§2), or one whole core",
        choices=("load", "core"),
    ),
)
JOB_SETTINGS = Schema("task allocation", *JOB)
PAIRS_SETTINGS = Schema("placer tl", *JOB, ORDER)
NAIVE_SETTINGS = Schema(
    "placer naive",
    *JOB,
    ORDER,
    REFINE,
)
TD_SETTINGS = Schema(
    "placer td",
    *JOB,
    SINGLES,
    LITERAL,
    NO_SPLIT,
)
OPTIMAL_SETTINGS = Schema(
    "placer optimal",
    *JOB,
    TIME_LIMIT,
    Setting(
        "work_limit",
        float,
        None,
        "CP-SAT deterministic work limit (unset: none) for repeatable plans",
        low=0.0,
        low_open=True,
    ),
)


def build_job(context: PlanningContext, plan: Plan) -> GroupJob:
    """The group job of ``context`` (see the module docstring for every rule)."""
    topo = context.topology
    params = JOB_SETTINGS.read(context.params)
    per_op: dict[str, list[tuple[str, int]]] = {op.name: [] for op in topo.operators}
    if plan.allocation.cores:
        for inst, k in plan.allocation.cores.items():
            op = parse_instance(inst).operator
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
        utilization=params["utilization"],
        alpha=params["alpha"],
    )
    whole = params["task_cost"] == "core"
    groups = [
        Group(inst, k, 100.0 * k if whole else g.cost / len(per_op[g.name]))
        for g in base.groups
        for inst, k in per_op[g.name]
    ]
    measured = _instance_traffic(context, per_op)
    edges: list[GroupEdge] = []
    for e in base.edges:
        pairs = measured.get((e.src, e.dst))
        if pairs is not None:
            edge = next(x for x in topo.outputs(e.src) if x.dst == e.dst)
            scale = topo.edge_bytes(edge) / 1e6
            edges.extend(GroupEdge(a, b, r * scale) for (a, b), r in sorted(pairs.items()))
            continue
        edges.extend(
            GroupEdge(a, b, e.imc / (len(per_op[e.src]) * len(per_op[e.dst])))
            for a, _ in per_op[e.src]
            for b, _ in per_op[e.dst]
        )
    return GroupJob(tuple(groups), tuple(edges), base.nodes, base.capacities)


def _instance_traffic(
    context: PlanningContext, per_op: dict[str, list[tuple[str, int]]]
) -> dict[tuple[str, str], dict[tuple[str, str], float]]:
    """Tuples/s between instances, per operator pair, from the snapshot's traffic.

    Only operator pairs whose two sides are split into instances ``op[e]`` are read;
    a shard ``g`` of an operator with ``Z`` shards per instance belongs to ``op[g // Z]``.
    """
    snap = context.snapshot
    if snap is None or not snap.traffic:
        return {}
    topo = context.topology
    out: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    for t in snap.traffic:
        if t.src not in per_op or t.dst not in per_op:
            continue
        names_src = {i for i, _ in per_op[t.src]}
        names_dst = {i for i, _ in per_op[t.dst]}
        a = instance_id(t.src, t.src_shard // topo.operator(t.src).shards)
        b = instance_id(t.dst, t.dst_shard // topo.operator(t.dst).shards)
        if a not in names_src or b not in names_dst:
            continue
        pair = out.setdefault((t.src, t.dst), {})
        pair[(a, b)] = pair.get((a, b), 0.0) + t.rate
    return out


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


def task_costs(context: PlanningContext, plan: Plan, job: GroupJob) -> dict[str, list[float]]:
    """Each task's share of its group's cost, from shard loads and the plan's routing.

    A routing table ``op[e]`` sends local shard ``s`` (global ``e·Z + s``) to a
    unit; a unit's load is that of the shards it serves. Groups whose units
    are not all covered, or carry no load, are left out (taken as uniform).
    """
    snap = context.snapshot
    if snap is None or not snap.shards or not plan.routing.tables:
        return {}
    loads = {(s.operator, s.shard): s.load for s in snap.shards}
    unit_load: dict[str, float] = {}
    for key, table in plan.routing.tables.items():
        iid = parse_instance(key)
        if iid.index is None:
            continue
        op, e = iid.operator, iid.index
        for s, unit in enumerate(table):
            load = loads.get((op, e * len(table) + s))
            if load is not None:
                unit_load[unit] = unit_load.get(unit, 0.0) + load
    out: dict[str, list[float]] = {}
    for g, units in zip(job.groups, job.units, strict=True):
        vals = [unit_load.get(u) for u in units]
        total = sum(v for v in vals if v is not None)
        if all(v is not None for v in vals) and total > 0:
            out[g.name] = [g.cost * v / total for v in vals if v is not None]
    return out


def _run(
    name: str,
    context: PlanningContext,
    plan: Plan,
    algorithm: Callable[[GroupJob], TaskAllocation],
) -> StepResult:
    params = JOB_SETTINGS.read(context.params)
    job = build_job(context, plan)
    notes: list[str] = []
    alloc: TaskAllocation | None = None
    assignment: dict[str, str] | None = None
    # whole-core tasks cost the same whatever their load: nothing to split
    skew = params["skew"] and params["task_cost"] == "load"
    costs = task_costs(context, plan, job) if skew else {}
    split = split_skewed(job, costs, margin=params["skew_margin"])
    if len(split.job.groups) > len(job.groups):
        # Units keep their identity here, so the GCD re-cut cannot apply, and
        # the uniform model would misjudge node loads: a miss is a failure.
        alloc = algorithm(split.job)
        notes.append(f"{name}: skewed groups split into near-uniform subgroups (§5)")
        if alloc.complete:
            assignment = split.assignment(alloc)
    else:
        alloc = algorithm(job)
        if not alloc.complete and params["relax"]:
            finer = gcd_granularity(job)
            if finer.tasks != job.tasks:
                retry = algorithm(finer)
                if retry.complete:
                    alloc = retry
                    notes.append(
                        f"{name}: tasks too coarse to fit; task counts set by the cost GCD (§5)"
                    )
        if alloc.complete:
            assignment = alloc.assignment()
    assert alloc is not None
    if assignment is None:
        g = next(i for i, u in enumerate(alloc.unplaced) if u)
        raise InfeasibleError(
            f"{alloc.unplaced[g]} of {alloc.job.tasks[g]} tasks fit on no node",
            item=f"group {alloc.job.groups[g].name}",
        )
    cores = {instance_of(u): 0 for u in assignment}
    for u in assignment:
        cores[instance_of(u)] += 1
    allocation = (
        replace(plan.allocation, cores={**plan.allocation.cores, **cores})
        if plan.allocation.cores
        else Allocation(cores=cores)
    )
    kept = {u: n for u, n in plan.placement.nodes.items() if instance_of(u) not in cores}
    placement = Placement(nodes={**kept, **assignment})
    figures = {"algorithm": name, **allocation_figures(alloc)}
    return StepResult(
        replace(plan, allocation=allocation, placement=placement), figures, tuple(notes)
    )


def _order(context: PlanningContext) -> Any:
    return PAIRS_SETTINGS.read(context.params)["order"]


@register(
    "placer",
    "naive",
    "paper 001 §3.1: task pairs by IMC onto nodes by capacity",
    params=NAIVE_SETTINGS,
    promises=("cpu_capacity",),
)
def naive_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """The naive algorithm (paper 001, §3.1).

    Examples
    --------
    At 200 t/s the topology is the job of
    :func:`~streamscale.planning.placement.top_down.top_down`'s example (two tasks of 30 %
    for ``a`` and for ``b``, one of 40 % for ``c``, 8 and 6 MB/s between them, and a free
    source) on two 1-core nodes; the best IMC gain is 7 of 14 MB/s. Naive fills ``n1`` with
    the ``b``–``c`` pairs first and reaches 6.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source", tuple_bytes=0),
    ...                             Operator("a", cost_ms=3.0, instances=2, tuple_bytes=40_000),
    ...                             Operator("b", cost_ms=3.0, instances=2, tuple_bytes=30_000),
    ...                             Operator("c", "sink", cost_ms=2.0)],
    ...                       [Edge("src", "a"), Edge("a", "b"), Edge("b", "c")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=1), rate=200.0, seed=0)
    >>> naive_placer(ctx, Plan()).figures["imc_gain_mbps"]
    6.0
    """
    p = NAIVE_SETTINGS.read(context.params)
    return _run(
        "naive",
        context,
        plan,
        lambda j: naive_pairs(j, order=p["order"], refine=p["refine"], seed=context.seed),
    )


@register(
    "placer",
    "tl",
    "paper 001 §3.2: task-level, pairs by relative significance",
    params=PAIRS_SETTINGS,
    promises=("cpu_capacity",),
)
def tl_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """taskLevel, pairs by relative significance (paper 001, §3.2).

    Examples
    --------
    At 200 t/s the topology is the job of
    :func:`~streamscale.planning.placement.top_down.top_down`'s example (two tasks of 30 %
    for ``a`` and for ``b``, one of 40 % for ``c``, 8 and 6 MB/s between them, and a free
    source) on two 1-core nodes; the best IMC gain is 7 of 14 MB/s.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source", tuple_bytes=0),
    ...                             Operator("a", cost_ms=3.0, instances=2, tuple_bytes=40_000),
    ...                             Operator("b", cost_ms=3.0, instances=2, tuple_bytes=30_000),
    ...                             Operator("c", "sink", cost_ms=2.0)],
    ...                       [Edge("src", "a"), Edge("a", "b"), Edge("b", "c")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=1), rate=200.0, seed=0)
    >>> tl_placer(ctx, Plan()).figures["imc_gain_mbps"]
    7.0
    """
    order = _order(context)
    return _run("tl", context, plan, lambda j: task_level(j, order=order, seed=context.seed))


@register(
    "placer",
    "tl-imc",
    "paper 001 §3.2: task-level, pairs by IMC",
    params=PAIRS_SETTINGS,
    promises=("cpu_capacity",),
)
def tl_imc_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """taskLevel, pairs by task-link IMC (TL-IMC, paper 001, §3.2 and §7).

    Examples
    --------
    At 200 t/s the topology is the job of
    :func:`~streamscale.planning.placement.top_down.top_down`'s example (two tasks of 30 %
    for ``a`` and for ``b``, one of 40 % for ``c``, 8 and 6 MB/s between them, and a free
    source) on two 1-core nodes; the best IMC gain is 7 of 14 MB/s. TL-IMC takes the
    ``b``–``c`` links first (3 MB/s each against 2) and reaches 6.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source", tuple_bytes=0),
    ...                             Operator("a", cost_ms=3.0, instances=2, tuple_bytes=40_000),
    ...                             Operator("b", cost_ms=3.0, instances=2, tuple_bytes=30_000),
    ...                             Operator("c", "sink", cost_ms=2.0)],
    ...                       [Edge("src", "a"), Edge("a", "b"), Edge("b", "c")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=1), rate=200.0, seed=0)
    >>> tl_imc_placer(ctx, Plan()).plan.placement.per_instance()["b"]
    Counter({'n1': 2})
    >>> tl_imc_placer(ctx, Plan()).figures["imc_gain_mbps"]
    6.0
    """
    order = _order(context)
    return _run(
        "tl-imc",
        context,
        plan,
        lambda j: task_level(j, priority="imc", order=order, seed=context.seed),
    )


@register(
    "placer",
    "td",
    "paper 001 §4: top-down group-aware allocation (TD)",
    params=TD_SETTINGS,
    promises=("cpu_capacity",),
)
def td_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """topDown (paper 001, §4) on the plan's instances; settings from ``context.params``.

    Examples
    --------
    At 200 t/s the topology is the job of
    :func:`~streamscale.planning.placement.top_down.top_down`'s example (two tasks of 30 %
    for ``a`` and for ``b``, one of 40 % for ``c``, 8 and 6 MB/s between them, and a free
    source) on two 1-core nodes; the best IMC gain is 7 of 14 MB/s.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source", tuple_bytes=0),
    ...                             Operator("a", cost_ms=3.0, instances=2, tuple_bytes=40_000),
    ...                             Operator("b", cost_ms=3.0, instances=2, tuple_bytes=30_000),
    ...                             Operator("c", "sink", cost_ms=2.0)],
    ...                       [Edge("src", "a"), Edge("a", "b"), Edge("b", "c")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=1), rate=200.0, seed=0)
    >>> r = td_placer(ctx, Plan())
    >>> dict(r.plan.placement.nodes)
    {'src#0': 'n1', 'a#0': 'n1', 'a#1': 'n2', 'b#0': 'n1', 'b#1': 'n2', 'c#0': 'n1'}
    >>> r.figures["imc_gain_mbps"], r.figures["total_imc_mbps"], r.figures["node_load"]
    (7.0, 14.0, {'n1': 100.0, 'n2': 60.0})
    """
    p = TD_SETTINGS.read(context.params)
    singles, literal, no_split = p["singles"], p["literal"], p["no_split"]
    return _run(
        "td",
        context,
        plan,
        lambda j: top_down(j, singles=singles, literal=literal, no_split=no_split),
    )


@register(
    "placer",
    "optimal",
    "paper 001 §7.3: maximum IMC gain with CP-SAT (small jobs)",
    params=OPTIMAL_SETTINGS,
    promises=("cpu_capacity",),
)
def optimal_placer(context: PlanningContext, plan: Plan) -> StepResult:
    # CP-SAT's import costs about 0.35 s: paid only when this placer runs
    """The allocation of maximum IMC gain (paper 001, §7.3), by CP-SAT.

    Examples
    --------
    At 200 t/s the topology is the job of
    :func:`~streamscale.planning.placement.top_down.top_down`'s example (two tasks of 30 %
    for ``a`` and for ``b``, one of 40 % for ``c``, 8 and 6 MB/s between them, and a free
    source) on two 1-core nodes; the best IMC gain is 7 of 14 MB/s. Several allocations
    reach it: only the gain is shown.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source", tuple_bytes=0),
    ...                             Operator("a", cost_ms=3.0, instances=2, tuple_bytes=40_000),
    ...                             Operator("b", cost_ms=3.0, instances=2, tuple_bytes=30_000),
    ...                             Operator("c", "sink", cost_ms=2.0)],
    ...                       [Edge("src", "a"), Edge("a", "b"), Edge("b", "c")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=1), rate=200.0, seed=0)
    >>> r = optimal_placer(ctx, Plan())
    >>> r.figures["imc_gain_mbps"], r.figures["proven_optimal"]
    (7.0, True)
    """
    from streamscale.planning.placement.optimal import optimal

    p = OPTIMAL_SETTINGS.read(context.params)
    limit, work = p["time_limit_s"], p["work_limit"]
    return _run(
        "optimal",
        context,
        plan,
        lambda j: (
            optimal(
                j,
                time_limit_s=limit,
                work_limit=work,
                seed=context.seed,
            ).allocation
        ),
    )
