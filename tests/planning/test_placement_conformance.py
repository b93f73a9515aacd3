"""Conformance suite every placer passes (hypothesis-generated jobs and clusters).

Two levels:

* registry placers that promise ``cpu_capacity`` (``PLACERS``, read from the
  registry: registering is enough): through their adapter, on random
  topologies and clusters — every unit placed exactly once on a known node or
  an explicit failure (:class:`InfeasibleError`, or ``figures["feasible"]``
  False), node CPU capacity (minus reserved CPU) respected, deterministic for
  a seed, unchanged when operator and node names are relabeled;
* group-job allocators of paper 001 (``ALLOCATORS``): the same properties on
  :class:`GroupJob` directly, plus "never above the optimum".

Every registered planner also passes the family-independent checks of
``test_registry_conformance.py``. ``VARIANTS`` adds parameter settings worth
checking on top of each placer's defaults.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from streamscale.errors import InfeasibleError
from streamscale.model import (
    Cluster,
    Edge,
    Node,
    Operator,
    Plan,
    Topology,
    instance_id,
    operator_of,
    parse_instance,
    parse_unit,
    unit_id,
)
from streamscale.planning import PlanningContext, StepResult, entries, get
from streamscale.planning.placement.groups import Group, GroupEdge, GroupJob, TaskAllocation
from streamscale.planning.placement.naive_pairs import naive_pairs
from streamscale.planning.placement.optimal import optimal
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down
from tests.planning.test_optimal import brute_force

# Settings beyond the defaults worth checking, per registered placer.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "tl": [{"order": "storm"}],
    "td": [
        {"singles": "affinity", "relax": False},
        {"literal": True},
        {"literal": True, "no_split": "to-r"},
    ],
    "gma": [{"search": False}, {"objective": "utilization", "d_cpu": 1.0}],
}
# Bounds that keep a solver-backed placer's run short; used where the placer declares them.
FAST = {"time_limit_s": 60.0, "work_limit": 2.0}

# Registry placers under test: (name, params), every placer promising CPU capacity.
PLACERS: list[tuple[str, dict[str, Any]]] = [
    (e.name, p)
    for e in entries("placer")
    if "cpu_capacity" in e.promises
    for p in [
        {k: v for k, v in FAST.items() if e.params is not None and k in e.params},
        *VARIANTS.get(e.name, []),
    ]
]

ALLOCATORS: dict[str, Callable[[GroupJob], TaskAllocation]] = {
    "naive": naive_pairs,
    "tl": task_level,
    "tl-imc": lambda j: task_level(j, priority="imc"),
    "tl-random": lambda j: task_level(j, order="random", seed=4),
    "tl-storm": lambda j: task_level(j, order="storm"),
    "td": top_down,
    "td-imc": lambda j: top_down(j, priority="imc"),
    "td-affinity": lambda j: top_down(j, singles="affinity"),
    "td-max-links": lambda j: top_down(j, split="max-links"),
    "td-literal": lambda j: top_down(j, literal=True),
    "td-literal-to-r": lambda j: top_down(j, literal=True, no_split="to-r"),
    "optimal": lambda j: optimal(j, time_limit_s=60.0, work_limit=2.0).allocation,
}


# -- registry placers ----------------------------------------------------------


@st.composite
def contexts(draw: st.DrawFn) -> PlanningContext:
    middle = draw(st.integers(1, 3))
    names = ["src", *(f"op{i}" for i in range(middle)), "snk"]
    ops = []
    for i, name in enumerate(names):
        kind = "source" if i == 0 else "sink" if i == len(names) - 1 else "operator"
        ops.append(
            Operator(
                name,
                kind=kind,  # type: ignore[arg-type]
                cost_ms=draw(st.floats(0.0, 4.0)),
                instances=draw(st.integers(1, 4)),
                tuple_bytes=draw(st.integers(0, 2000)),
            )
        )
    edges = [Edge(names[i], names[i + 1]) for i in range(len(names) - 1)]
    for i in range(len(names) - 2):
        if draw(st.booleans()):
            edges.append(Edge(names[i], names[i + 2], selectivity=draw(st.floats(0.1, 2.0))))
    nodes = [
        Node(
            f"w{i}",
            cores=draw(st.integers(1, 2)),
            reserved_cpu=draw(st.sampled_from([0.0, 10.0, 30.0])),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    return PlanningContext(
        Topology.build("job", ops, edges),
        Cluster.build(nodes),
        rate=draw(st.floats(10.0, 300.0)),
        seed=draw(st.integers(0, 3)),
    )


def _run(name: str, params: dict[str, Any], ctx: PlanningContext) -> StepResult | None:
    """The step's result, or None for an explicit failure."""
    ctx = PlanningContext(ctx.topology, ctx.cluster, rate=ctx.rate, params=params, seed=ctx.seed)
    try:
        res = get("placer", name).adapter(ctx, Plan())
    except InfeasibleError:
        return None
    if res.figures.get("feasible") is False:
        return None
    return res


def _check_plan(ctx: PlanningContext, res: StepResult) -> None:
    plan = res.plan
    units = {unit_id(inst, i) for inst, k in plan.allocation.cores.items() for i in range(k)}
    assert set(plan.placement.nodes) == units
    assert set(plan.placement.nodes.values()) <= set(ctx.cluster.names)
    omega = ctx.topology.rates(ctx.rate)
    per_op: dict[str, int] = {}
    for inst, k in plan.allocation.cores.items():
        op = operator_of(inst)
        per_op[op] = per_op.get(op, 0) + k
    load = dict.fromkeys(ctx.cluster.names, 0.0)
    for unit, node in plan.placement.nodes.items():
        op = ctx.topology.operator(operator_of(unit))
        load[node] += omega[op.name] * op.cost_ms / 10.0 / per_op[op.name]
    for n in ctx.cluster.nodes:
        assert load[n.name] <= n.capacity - n.reserved_cpu + 1e-6, (n.name, load)


@pytest.mark.parametrize(("name", "params"), PLACERS, ids=[f"{n}{p or ''}" for n, p in PLACERS])
@given(ctx=contexts())
def test_registry_placer_conforms(name: str, params: dict[str, Any], ctx: PlanningContext) -> None:
    res = _run(name, params, ctx)
    again = _run(name, params, ctx)
    if res is None:
        assert again is None
        return
    _check_plan(ctx, res)
    assert again is not None and again.plan == res.plan
    # Relabel operators and nodes (order kept): the same placement, renamed.
    ops = {op.name: f"x{i}_{op.name[::-1]}" for i, op in enumerate(ctx.topology.operators)}
    nodes = {n.name: f"m{i}" for i, n in enumerate(ctx.cluster.nodes)}
    topo = Topology.build(
        "other",
        [Operator(**{**_fields(op), "name": ops[op.name]}) for op in ctx.topology.operators],
        [
            Edge(ops[e.src], ops[e.dst], e.grouping, e.selectivity, e.tuple_bytes)
            for e in ctx.topology.edges
        ],
    )
    cluster = Cluster.build(
        Node(**{**_fields(n), "name": nodes[n.name]}) for n in ctx.cluster.nodes
    )
    renamed = _run(name, params, PlanningContext(topo, cluster, rate=ctx.rate, seed=ctx.seed))
    assert renamed is not None

    def back(unit: str) -> str:
        u = parse_unit(unit)
        assert u is not None
        iid = parse_instance(u.instance)
        orig = next(k for k, v in ops.items() if v == iid.operator)
        return unit_id(instance_id(orig, iid.index), u.index)

    inverse = {v: k for k, v in nodes.items()}
    assert {back(u): inverse[n] for u, n in renamed.plan.placement.nodes.items()} == dict(
        res.plan.placement.nodes
    )


def _fields(obj: object) -> dict[str, Any]:
    return {f: getattr(obj, f) for f in obj.__dataclass_fields__}  # type: ignore[attr-defined]


# -- group-job allocators --------------------------------------------------------


@st.composite
def jobs(draw: st.DrawFn) -> GroupJob:
    ng = draw(st.integers(1, 5))
    groups = [
        Group(f"g{i}", draw(st.integers(1, 6)), draw(st.floats(0.0, 120.0))) for i in range(ng)
    ]
    edges = [
        GroupEdge(f"g{i}", f"g{j}", draw(st.floats(0.0, 50.0)))
        for i in range(ng)
        for j in range(i + 1, ng)
        if draw(st.integers(0, 2)) == 0
    ]
    nn = draw(st.integers(1, 4))
    caps = [draw(st.sampled_from([0.0, 40.0, 60.0, 100.0, 150.0])) for _ in range(nn)]
    return GroupJob(tuple(groups), tuple(edges), tuple(f"n{i}" for i in range(nn)), tuple(caps))


@pytest.mark.parametrize("name", list(ALLOCATORS))
@given(job=jobs())
def test_allocator_conforms(name: str, job: GroupJob) -> None:
    alloc = ALLOCATORS[name](job)
    assert len(alloc.counts) == len(job.groups)
    for row, placed_not, tasks in zip(alloc.counts, alloc.unplaced, job.tasks, strict=True):
        assert len(row) == len(job.nodes) and min(row) >= 0
        assert sum(row) + placed_not == tasks and placed_not >= 0
    assert alloc.respects_capacities()
    assert alloc.complete == (sum(alloc.unplaced) == 0)
    assert len(alloc.assignment()) == sum(map(sum, alloc.counts))
    assert ALLOCATORS[name](job).counts == alloc.counts
    renamed = job.renamed(
        {g.name: f"q{g.name[::-1]}" for g in job.groups},
        {n: f"z{i}" for i, n in enumerate(job.nodes)},
    )
    assert ALLOCATORS[name](renamed).counts == alloc.counts


@given(job=jobs())
@example(
    job=GroupJob.build(
        [("g0", 1, 0.0), ("g1", 1, 0.0), ("g2", 1, 0.0), ("g3", 1, 1.0), ("g4", 1, 0.0)],
        [("g0", "g3", 0.0), ("g1", "g3", 0.0), ("g2", "g3", 6.103515625e-05), ("g2", "g4", 0.0)],
        {"n0": 40.0, "n1": 0.0},
    )
)
def test_optimum_bounds_every_heuristic(job: GroupJob) -> None:
    best = optimal(job, time_limit_s=60.0, work_limit=2.0)
    for name, fn in ALLOCATORS.items():
        alloc = fn(job)
        if alloc.complete and best.proven_optimal:
            # CP-SAT works on IMC scaled to integers: a gain below the scale's resolution
            # (6.1e-05 MB/s on one edge, found by this test) counts as 0 in its optimum, and
            # its proven bound (here 1.2e-04) is what no allocation can exceed
            top = max(best.allocation.gain, best.bound)
            assert alloc.gain <= top + 1e-6 * max(1.0, alloc.gain), name
        if alloc.complete:
            assert best.allocation.complete or best.status == "UNKNOWN"


def _small_general_jobs(count: int, seed: int) -> list[GroupJob]:
    """Seeded small jobs of any shape: costs unrelated to task counts, mixed node sizes."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        ng = rng.randint(2, 4)
        groups = [(f"g{i}", rng.randint(1, 4), round(rng.uniform(5, 120), 1)) for i in range(ng)]
        edges = [
            (f"g{i}", f"g{j}", round(rng.uniform(1, 30), 1))
            for i in range(ng)
            for j in range(i + 1, ng)
            if rng.random() < 0.6
        ]
        caps = {f"n{k}": float(rng.choice([40, 60, 100, 150])) for k in range(rng.randint(2, 3))}
        out.append(GroupJob.build(groups, edges, caps))
    return out


# name: mean share of the optimum (seed 5, 400 jobs, 224 admit a complete allocation and
# every allocator completes all 224): TD 96.3 %, TD literal 96.3 % (91.1 % when a node
# that takes no balanced split sends the pair to R), TL 96.5 %, TL in task-id order
# 95.6 %, naive 96.4 %. Before the backtracking of §2.2 the single passes completed only
# 203-209 of the 224 (TD 205, TL 206, naive 209).
FLOORS = {
    "td": 0.95,
    "td-literal": 0.95,
    "td-literal-to-r": 0.9,
    "tl": 0.95,
    "tl-storm": 0.9,
    "naive": 0.9,
}


def test_against_brute_force_on_small_general_jobs() -> None:
    # Measured against enumeration of every per-node count matrix: complete exactly on
    # the jobs that admit a complete allocation, capacities held, never above the
    # optimum, near it on average.
    feasible = 0
    ratios: dict[str, list[float]] = {name: [] for name in FLOORS}
    for job in _small_general_jobs(400, 5):
        best = brute_force(job)
        for name in FLOORS:
            alloc = ALLOCATORS[name](job)
            assert alloc.respects_capacities(), name
            assert alloc.complete == (best >= 0), name
            if alloc.complete:
                assert alloc.gain <= best + 1e-6 * max(1.0, best), name
                if best > 0:
                    ratios[name].append(alloc.gain / best)
        feasible += int(best >= 0)
    assert feasible >= 200
    for name, ratio_floor in FLOORS.items():
        assert sum(ratios[name]) / len(ratios[name]) >= ratio_floor, name


@st.composite
def small_jobs(draw: st.DrawFn) -> GroupJob:
    """Jobs small enough to enumerate: 2-4 groups of 1-3 tasks on 2-3 nodes.

    Group costs and node sizes are drawn from values that pack awkwardly (a 66 % group
    of two next to 60 % and 40 % ones on 100 % nodes), so a single pass of naive, TL or
    TD leaves a task unplaced on about one feasible job in 25 (seeded sample of 1000).
    """
    ng = draw(st.integers(2, 4))
    costs = st.sampled_from([20.0, 40.0, 60.0, 66.0, 90.0])
    groups = [Group(f"g{i}", draw(st.integers(1, 3)), draw(costs)) for i in range(ng)]
    edges = [
        GroupEdge(f"g{i}", f"g{j}", draw(st.floats(0.0, 30.0)))
        for i in range(ng)
        for j in range(i + 1, ng)
        if draw(st.booleans())
    ]
    nn = draw(st.integers(2, 3))
    caps = [draw(st.sampled_from([60.0, 100.0, 100.0, 150.0])) for _ in range(nn)]
    return GroupJob(tuple(groups), tuple(edges), tuple(f"n{i}" for i in range(nn)), tuple(caps))


# The heuristics of paper 001 (every variant above but the solver).
HEURISTICS = [name for name in ALLOCATORS if name != "optimal"]


# TD and TL as printed leave C unplaced here (tests/planning/test_backtrack.py).
GAP = GroupJob.build(
    [("A", 2, 66.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    [("A", "B", 8.0), ("B", "C", 6.0)],
    {"n0": 100.0, "n1": 100.0},
)


@settings(max_examples=150)
@example(job=GAP)
@given(job=small_jobs())
def test_heuristics_complete_every_feasible_job_below_the_optimum(job: GroupJob) -> None:
    # A complete allocation exists (enumeration says so): naive, TL and TD must place
    # every task within capacity (§2.2: "Algorithms must guarantee that all pairs will be
    # allocated"), and none may gain more than the enumerated optimum.
    best = brute_force(job)
    assume(best >= 0)
    for name in HEURISTICS:
        alloc = ALLOCATORS[name](job)
        assert alloc.complete, (name, alloc.unplaced)
        assert alloc.respects_capacities(), name
        assert alloc.gain <= best + 1e-6 * max(1.0, best), name
