"""Is GMA ever infeasible where a feasible placement exists? (paper 002, §IV.C–E)

Random instances, tight by construction (the query needs 50–110 % of what
the cluster has free under D_CPU), are decided by an oracle independent of
GMA: exhaustive enumeration for tiny ones, CP-SAT for medium and large ones. CP-SAT runs
on integers rounded in the permissive direction (demands down, limits up), so
"infeasible" from it is a proof; a placement it finds is re-checked exactly and
counts as undecided if it fails the check. Random and Even are decided on the
same instances for contrast.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
    Flow,
    evaluate,
    even_placement,
    random_placement,
)
from streamscale.planning.placement.gma import gma

__all__ = [
    "check_feasibility",
    "cp_sat_feasible",
    "exhaustive_feasible",
    "exhaustive_optimum",
    "headline",
    "objective_gap",
    "random_instance",
]

_SCALE = 1000


def random_instance(rng: np.random.Generator, nodes: int, operators: int) -> AllocatorProblem:
    """A random tight instance: heterogeneous nodes with existing load, a random flow graph."""
    ns: list[AllocatorNode] = []
    for i in range(nodes):
        cap = float(rng.choice([100.0, 200.0, 400.0]))
        ns.append(
            AllocatorNode(
                f"n{i}",
                cap,
                reserved_cpu=float(rng.uniform(0.0, 0.7) * cap),
                bandwidth_mbps=100.0,
                reserved_bandwidth_mbps=float(rng.uniform(0.0, 0.6) * 100.0),
            )
        )
    free = sum(max(0.0, 0.9 * n.cpu_capacity - n.reserved_cpu) for n in ns)
    weights = rng.uniform(0.2, 1.0, operators)
    total = free * rng.uniform(0.5, 1.1)
    ops = tuple(
        AllocatorOperator(f"o{k}", float(total * w / weights.sum())) for k, w in enumerate(weights)
    )
    flows: list[Flow] = []
    for k in range(1, operators):
        for parent in rng.choice(k, size=min(k, int(rng.integers(1, 3))), replace=False):
            flows.append(Flow(f"o{int(parent)}", f"o{k}", float(rng.uniform(2.0, 25.0))))
    return AllocatorProblem(tuple(ns), ops, tuple(flows))


def exhaustive_feasible(problem: AllocatorProblem) -> bool:
    """Try every assignment (vectorised over all n^m of them)."""
    n, m = len(problem.nodes), len(problem.operators)
    grid = np.array(list(itertools.product(range(n), repeat=m)), dtype=np.int64).reshape(-1, m)
    demand = np.array([o.cpu for o in problem.operators])
    ok = np.ones(len(grid), dtype=bool)
    index = {o.name: k for k, o in enumerate(problem.operators)}
    for i, node in enumerate(problem.nodes):
        on = grid == i
        cpu = on.astype(float) @ demand
        cpu_ok = (cpu <= 0) | (node.reserved_cpu + cpu <= problem.d_cpu * node.cpu_capacity + 1e-9)
        bw = np.zeros(len(grid))
        for f in problem.flows:
            bw += f.mbps * (on[:, index[f.src]] != on[:, index[f.dst]])
        lim = problem.d_bw * node.bandwidth_mbps + 1e-9
        ok &= cpu_ok & ((bw <= 0) | (node.reserved_bandwidth_mbps + bw <= lim))
    return bool(ok.any())


def cp_sat_feasible(problem: AllocatorProblem, *, time_limit_s: float = 10.0) -> bool | None:
    """True (verified placement), False (proof of infeasibility) or None (undecided)."""
    model = cp_model.CpModel()
    n, m = len(problem.nodes), len(problem.operators)
    x = [[model.new_bool_var(f"x{j}_{i}") for i in range(n)] for j in range(m)]
    for j in range(m):
        model.add_exactly_one(x[j])
    index = {o.name: k for k, o in enumerate(problem.operators)}
    for i, node in enumerate(problem.nodes):
        d = [math.floor(o.cpu * _SCALE) for o in problem.operators]
        room = math.ceil((problem.d_cpu * node.cpu_capacity - node.reserved_cpu) * _SCALE)
        model.add(sum(d[j] * x[j][i] for j in range(m) if d[j] > 0) <= max(room, 0))
        terms = []
        for f in problem.flows:
            a, b = index[f.src], index[f.dst]
            w = math.floor(f.mbps * _SCALE)
            if a == b or w <= 0:
                continue
            y = model.new_bool_var(f"y{a}_{b}_{i}")
            model.add(y >= x[a][i] - x[b][i])
            model.add(y >= x[b][i] - x[a][i])
            terms.append(w * y)
        if terms:
            lim = problem.d_bw * node.bandwidth_mbps - node.reserved_bandwidth_mbps
            model.add(sum(terms) <= max(math.ceil(lim * _SCALE), 0))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return False
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    names = problem.node_names
    assignment = {
        o.name: names[next(i for i in range(n) if solver.value(x[j][i]))]
        for j, o in enumerate(problem.operators)
    }
    return True if evaluate(problem, assignment).feasible else None


def check_feasibility(
    *, tiny: int, medium: int, seed: int, time_limit_s: float = 10.0, large: int = 0
) -> dict[str, Any]:
    """Decide ``tiny`` (2–3 nodes, 2–6 operators), ``medium`` (4–6 nodes, 8–12) and
    ``large`` (10 nodes, 20 operators) instances."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for kind, count in (("tiny", tiny), ("medium", medium), ("large", large)):
        if kind == "large" and not count:
            continue
        tally = dict.fromkeys(
            (
                "instances",
                "feasible",
                "infeasible",
                "undecided",
                "gma_feasible",
                "gma_missed",
                "greedy_feasible",
                "random_feasible",
                "even_feasible",
                "gma_max_operations",
            ),
            0,
        )
        for _ in range(count):
            if kind == "tiny":
                p = random_instance(rng, int(rng.integers(2, 4)), int(rng.integers(2, 7)))
                verdict: bool | None = exhaustive_feasible(p)
            elif kind == "medium":
                p = random_instance(rng, int(rng.integers(4, 7)), int(rng.integers(8, 13)))
                verdict = cp_sat_feasible(p, time_limit_s=time_limit_s)
            else:
                p = random_instance(rng, 10, 20)
                verdict = cp_sat_feasible(p, time_limit_s=time_limit_s)
            res = gma(p)
            tally["instances"] += 1
            tally["gma_max_operations"] = max(tally["gma_max_operations"], res.operations)
            if verdict is None:
                tally["undecided"] += 1
                continue
            tally["feasible" if verdict else "infeasible"] += 1
            if verdict:
                tally["gma_feasible"] += int(res.feasible)
                tally["gma_missed"] += int(not res.feasible)
                tally["greedy_feasible"] += int(gma(p, search=False).feasible)
                tally["random_feasible"] += int(random_placement(p, seed=seed).feasible)
                tally["even_feasible"] += int(even_placement(p).feasible)
        out[kind] = tally
    return out


def exhaustive_optimum(problem: AllocatorProblem) -> float | None:
    """Least ``R_dev(CPU) + R_dev(bandwidth)`` over every feasible assignment (None: none).

    The deviation objective GMA minimises (paper 002, §IV.C), by enumeration.
    """
    names = problem.node_names
    best: float | None = None
    for combo in itertools.product(range(len(names)), repeat=len(problem.operators)):
        assignment = {o.name: names[i] for o, i in zip(problem.operators, combo, strict=True)}
        ev = evaluate(problem, assignment)
        if ev.feasible:
            v = ev.cpu_deviation + ev.bw_deviation
            best = v if best is None else min(best, v)
    return best


def objective_gap(count: int, seed: int) -> dict[str, Any]:
    """GMA's deviation objective against the exhaustive optimum on tiny instances.

    2–3 nodes and 2–5 operators; per variant (``gma``: the default search,
    ``gma-literal``: Algorithm 1 without it) over instances with a feasible
    placement: how often it is feasible, how often it reaches the optimum
    (relative tolerance 1e-6), and the median and largest relative excess
    over the optimum where it is feasible.
    """
    rng = np.random.default_rng(seed)
    excess: dict[str, list[float]] = {"gma": [], "gma-literal": []}
    feasible = dict.fromkeys(excess, 0)
    instances = with_optimum = 0
    for _ in range(count):
        p = random_instance(rng, int(rng.integers(2, 4)), int(rng.integers(2, 6)))
        instances += 1
        opt = exhaustive_optimum(p)
        if opt is None:
            continue
        with_optimum += 1
        for name, res in (("gma", gma(p)), ("gma-literal", gma(p, search=False))):
            if not res.feasible:
                continue
            feasible[name] += 1
            v = res.evaluation.cpu_deviation + res.evaluation.bw_deviation
            excess[name].append((v - opt) / opt if opt > 0 else float(v > 1e-12))
    out: dict[str, Any] = {"instances": instances, "with_feasible_placement": with_optimum}
    for name, xs in excess.items():
        out[name] = {
            "feasible": feasible[name],
            "at_optimum": sum(1 for x in xs if x <= 1e-6),
            "median_excess_pct": 100.0 * float(np.median(xs)) if xs else None,
            "mean_excess_pct": 100.0 * float(np.mean(xs)) if xs else None,
            "max_excess_pct": 100.0 * max(xs) if xs else None,
        }
    return out


def headline(g: dict[str, Any]) -> list[dict[str, Any]]:
    """Figure, variant (``literal``: Algorithm 1 without the added search), paper, measured.

    The paper reports no optimality or feasibility rate: ``paper`` is its claim
    in words. Fractions are over tiny instances with a feasible placement; the
    excess over the optimum is relative, over the instances where the variant
    found a feasible placement.
    """
    out: list[dict[str, Any]] = []
    for variant, name in (("literal", "gma-literal"), ("tuned", "gma")):
        v = g[name]
        n = g["with_feasible_placement"]
        out += [
            {
                "figure": "002 GMA feasible where a feasible placement exists (tiny instances)",
                "variant": variant,
                "paper": "not reported",
                "measured": f"{v['feasible']}/{n}",
            },
            {
                "figure": "002 GMA at the exhaustive optimum of R_dev(CPU) + R_dev(BW)",
                "variant": variant,
                "paper": "not reported",
                "measured": f"{v['at_optimum']}/{n}",
            },
            {
                "figure": "002 GMA objective over the exhaustive optimum, median (%)",
                "variant": variant,
                "paper": "not reported",
                "measured": _pct(v["median_excess_pct"]),
            },
            {
                "figure": "002 GMA objective over the exhaustive optimum, mean (%)",
                "variant": variant,
                "paper": "not reported",
                "measured": _pct(v.get("mean_excess_pct")),
            },
            {
                "figure": "002 GMA objective over the exhaustive optimum, largest (%)",
                "variant": variant,
                "paper": "not reported",
                "measured": _pct(v["max_excess_pct"]),
            },
        ]
    return out


def _pct(v: float | None) -> float | None:
    return None if v is None else round(v, 1)
