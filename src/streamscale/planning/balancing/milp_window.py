"""Sub-MILPs of the windowed key-group MILP (paper 003, §4.3.1): candidates and models.

:func:`streamscale.planning.balancing.milp.solve_milp` documents the
formulation, the reduction and the solver choice; this module builds and
solves one step: constraints (1)–(5) over a window of nodes, with CP-SAT or
with HiGHS (``scipy.optimize.milp``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from streamscale.errors import import_extra
from streamscale.planning.balancing.greedy import Budget, Items
from streamscale.planning.balancing.keygroups import KeyGroupProblem

if TYPE_CHECKING:
    from ortools.sat.python import cp_model


def _cp() -> ModuleType:
    """OR-Tools' CP-SAT (the ``papers`` extra), imported when a model is solved."""
    return import_extra("ortools.sat.python.cp_model")


__all__ = [
    "Step",
    "candidates",
    "item_loads",
    "solve_window",
    "solve_window_highs",
    "window_distance",
]

_SCALE = 100_000
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Step:
    node_of: np.ndarray | None
    status: str
    wall: float
    det: float = 0.0


def item_loads(problem: KeyGroupProblem, items: Items, node_of: np.ndarray) -> np.ndarray:
    loads = np.zeros(problem.n)
    for i, m in enumerate(items.members):
        if node_of[i] >= 0:
            loads[node_of[i]] += items.load[i]
        else:  # a split item still sits on its members' nodes
            np.add.at(loads, problem.assignment[m], problem.load[m])
    return loads


def candidates(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    budget: Budget,
    *,
    full: bool,
    window: int,
    force_out: frozenset[int] = frozenset(),
    no_return: frozenset[int] = frozenset(),
) -> list[list[int]]:
    """Candidate nodes per item, the current node first (see "Reduction").

    Items in ``force_out`` (the last key groups on N_r) must leave their node.
    """
    loads = item_loads(problem, items, node_of)
    dev = loads - problem.capacity * problem.mean_load
    keep = np.flatnonzero(problem.keep)
    over = [int(n) for n in keep[np.argsort(-dev[keep], kind="stable")] if dev[n] > _EPS][:window]
    under = [int(n) for n in keep[np.argsort(dev[keep], kind="stable")] if dev[n] < -_EPS][:window]
    rem = np.flatnonzero(problem.removing & (loads > 0))
    draining = {int(n) for n in rem[np.argsort(-loads[rem], kind="stable")][:window]}
    everywhere = [int(n) for n in keep]
    out: list[list[int]] = []
    for i, cur in enumerate(node_of):
        cur = int(cur)
        if items.pinned[i] >= 0:
            out.append([int(items.pinned[i])])
            continue
        if i in force_out:
            cands = everywhere
        elif cur < 0:
            homes = [
                int(h) for h in np.unique(problem.assignment[items.members[i]]) if problem.keep[h]
            ]
            cands = homes + (everywhere if full else under)
        elif full:
            cands = [cur, *everywhere]
        elif items.current[i] != cur:  # moved already: may stay, go back or go on
            back = [] if i in no_return else [int(items.current[i])]
            cands = [cur, *back, *under]
        elif cur in draining or cur in over:
            cands = [cur, *under]
        elif cur in under:
            cands = [cur, *over]
        else:
            cands = [cur]
        ok = [
            c
            for c in dict.fromkeys(cands)
            if (c == cur and i not in force_out)
            or budget.allows(items.move_count(problem, i, c), items.move_cost(problem, i, c))
        ]
        out.append(ok or list(dict.fromkeys(cands))[:1])
    return out


def solve_window(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    cands: list[list[int]],
    budget: Budget,
    *,
    time_limit: float,
    det_limit: float,
    weights: tuple[float, float, float],
    seed: int,
) -> Step:
    """One exact sub-MILP: constraints (1)–(5) over the window's nodes."""
    total = float(problem.load.sum()) or 1.0
    scale = _SCALE / total
    iload = np.rint(items.load * scale).astype(np.int64)
    target = np.rint(problem.capacity * problem.mean_load * scale).astype(np.int64)
    ub = int(iload.sum() + target.max() + 1)
    cost_scale = _SCALE / budget.max_cost if budget.max_cost else 0.0

    m = _cp().CpModel()
    const = np.zeros(problem.n, dtype=np.int64)
    terms: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in range(problem.n)]
    res_terms: list[list[tuple[np.ndarray, cp_model.IntVar]]] = [[] for _ in range(problem.n)]
    count_expr: list[tuple[int, cp_model.IntVar]] = []
    cost_expr: list[tuple[int, cp_model.IntVar]] = []
    fixed_count, fixed_cost = 0, 0
    var_of: list[list[tuple[int, cp_model.IntVar]]] = []
    window: set[int] = set()
    for i, cs in enumerate(cands):
        if len(cs) == 1:
            const[cs[0]] += iload[i]
            fixed_count += items.move_count(problem, i, cs[0])
            fixed_cost += math.ceil(items.move_cost(problem, i, cs[0]) * cost_scale)
            if items.pinned[i] >= 0 or node_of[i] < 0:
                window.add(cs[0])
            var_of.append([])
            continue
        xs = [(n, m.new_bool_var(f"x{i}_{n}")) for n in cs]
        m.add_exactly_one(v for _, v in xs)
        for n, v in xs:
            window.add(n)
            terms[n].append((int(iload[i]), v))
            cnt = items.move_count(problem, i, n)
            if cnt:
                count_expr.append((cnt, v))
                cost_expr.append((math.ceil(items.move_cost(problem, i, n) * cost_scale), v))
            if problem.resources is not None:
                res_terms[n].append((problem.resources[items.members[i]].sum(axis=0), v))
        var_of.append(xs)
    if budget.max_migrations is not None:
        m.add(sum(c * v for c, v in count_expr) + fixed_count <= budget.max_migrations)
    if budget.max_cost is not None:
        m.add(sum(c * v for c, v in cost_expr) + fixed_cost <= _SCALE)
    delta = m.new_int_var(0, ub, "delta")
    du = m.new_int_var(0, ub, "delta_u")
    dl = m.new_int_var(0, ub, "delta_l")
    for n in sorted(window):
        load_n = int(const[n]) + sum(c * v for c, v in terms[n])
        m.add(load_n <= int(target[n]) + delta - du)  # (3)
        if problem.keep[n]:
            m.add(load_n >= int(target[n]) - delta + dl)  # (4): N_r has no lower bound
    m.add(du <= delta)  # (5)
    m.add(dl <= delta)
    if problem.resources is not None and problem.resource_caps is not None:
        _resource_caps(problem, items, node_of, cands, res_terms, m)
    w1, w2, w3 = weights
    m.minimize(w1 * delta - w2 * du - w3 * dl)
    for i, xs in enumerate(var_of):  # warm start: the current allocation
        if node_of[i] >= 0:
            for n, v in xs:
                m.add_hint(v, n == node_of[i])
    solver = _cp().CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(0.05, time_limit)
    if math.isfinite(det_limit):
        p.max_deterministic_time = max(0.01, det_limit)
    p.num_workers = 1
    p.random_seed = seed
    status = solver.solve(m)
    name, wall = solver.status_name(status), float(solver.wall_time)
    det = float(solver.deterministic_time)
    if status not in (_cp().OPTIMAL, _cp().FEASIBLE):
        return Step(None, name, wall, det)
    new = np.array(
        [
            cs[0] if not xs else next(n for n, v in xs if solver.value(v))
            for cs, xs in zip(cands, var_of, strict=True)
        ],
        dtype=np.int64,
    )
    return Step(new, name, wall, det)


def solve_window_highs(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    cands: list[list[int]],
    budget: Budget,
    *,
    time_limit: float,
    weights: tuple[float, float, float],
    cutoff: float,
    node_limit: int | None = None,
) -> Step:
    """The same sub-MILP solved by HiGHS (``scipy.optimize.milp``).

    scipy passes no MIP start, so the warm start enters as the cutoff
    δ ≤ δ(current): the current allocation is feasible and nothing worse is.
    """
    target = problem.capacity * problem.mean_load
    const = np.zeros(problem.n)
    cols: list[tuple[int, int]] = []  # (item, node)
    fixed_count, fixed_cost = 0.0, 0.0
    window: set[int] = set()
    for i, cs in enumerate(cands):
        if len(cs) == 1:
            const[cs[0]] += items.load[i]
            fixed_count += items.move_count(problem, i, cs[0])
            fixed_cost += items.move_cost(problem, i, cs[0])
            if items.pinned[i] >= 0 or node_of[i] < 0:
                window.add(cs[0])
        else:
            cols.extend((i, n) for n in cs)
            window.update(cs)
    nx = len(cols)
    d, du, dl = nx, nx + 1, nx + 2
    rows: list[int] = []
    cix: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for c, v in entries:
            rows.append(r)
            cix.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    by_item: dict[int, list[int]] = {}
    by_node: dict[int, list[int]] = {}
    for c, (i, n) in enumerate(cols):
        by_item.setdefault(i, []).append(c)
        by_node.setdefault(n, []).append(c)
    for cs in by_item.values():
        row([(c, 1.0) for c in cs], 1.0, 1.0)  # (1)
    if budget.max_migrations is not None:
        cnt = [(c, float(items.move_count(problem, i, n))) for c, (i, n) in enumerate(cols)]
        row([e for e in cnt if e[1]], -np.inf, budget.max_migrations - fixed_count)  # (2)
    if budget.max_cost is not None:
        cst = [(c, items.move_cost(problem, i, n)) for c, (i, n) in enumerate(cols)]
        row([e for e in cst if e[1]], -np.inf, budget.max_cost - fixed_cost)
    for n in sorted(window):
        terms = [(c, float(items.load[cols[c][0]])) for c in by_node.get(n, [])]
        row([*terms, (d, -1.0), (du, 1.0)], -np.inf, target[n] - const[n])  # (3)
        if problem.keep[n]:
            row([*terms, (d, 1.0), (dl, -1.0)], target[n] - const[n], np.inf)  # (4)
    row([(du, 1.0), (d, -1.0)], -np.inf, 0.0)  # (5)
    row([(dl, 1.0), (d, -1.0)], -np.inf, 0.0)
    if problem.resources is not None and problem.resource_caps is not None:
        now = np.zeros_like(problem.resource_caps)
        np.add.at(now, problem.assignment, problem.resources)
        fixed = np.zeros_like(problem.resource_caps)
        for i, cs in enumerate(cands):
            if len(cs) == 1:
                fixed[cs[0]] += problem.resources[items.members[i]].sum(axis=0)
        for n, cs in by_node.items():
            for r in range(problem.resources.shape[1]):
                cap = max(problem.resource_caps[n, r], now[n, r])
                ent = [
                    (c, float(problem.resources[items.members[cols[c][0]], r].sum())) for c in cs
                ]
                row(ent, -np.inf, cap - fixed[n, r] + _EPS)
    a = sparse.csr_matrix((vals, (rows, cix)), shape=(len(lo), nx + 3))
    w1, w2, w3 = weights
    cost = np.zeros(nx + 3)
    cost[[d, du, dl]] = (w1, -w2, -w3)
    upper = np.r_[np.ones(nx), cutoff + _EPS * max(1.0, cutoff), np.inf, np.inf]
    res = milp(
        cost,
        constraints=LinearConstraint(a, np.array(lo), np.array(hi)),
        integrality=np.r_[np.ones(nx), np.zeros(3)],
        bounds=Bounds(np.zeros(nx + 3), upper),
        options={
            "time_limit": max(0.01, time_limit),
            "disp": False,
            **({"node_limit": int(node_limit)} if node_limit else {}),
        },
    )
    wall = 0.0  # scipy reports no solve time; the caller charges the step limit
    if res.x is None:
        return Step(None, str(res.message).split(".")[0], wall)
    new = np.array(node_of, copy=True)
    for c in np.flatnonzero(res.x[:nx] > 0.5):
        i, n = cols[c]
        new[i] = n
    for i, cs in enumerate(cands):
        if len(cs) == 1:
            new[i] = cs[0]
    return Step(new, "OPTIMAL" if res.status == 0 else "FEASIBLE", wall)


def _resource_caps(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    cands: list[list[int]],
    res_terms: list[list[tuple[np.ndarray, cp_model.IntVar]]],
    m: cp_model.CpModel,
) -> None:
    """Per-resource caps (§4.3.1, multi-dimensional load). A node already above a cap
    may not get worse, so the current allocation stays feasible."""
    assert problem.resources is not None and problem.resource_caps is not None
    now = np.zeros_like(problem.resource_caps)
    np.add.at(now, problem.assignment, problem.resources)
    fixed = np.zeros_like(problem.resource_caps)
    for i, cs in enumerate(cands):
        if len(cs) == 1:
            fixed[cs[0]] += problem.resources[items.members[i]].sum(axis=0)
    rs = _SCALE / max(float(problem.resource_caps.max()), 1e-12)
    for n in range(problem.n):
        if not res_terms[n]:
            continue
        for r in range(problem.resources.shape[1]):
            cap = max(problem.resource_caps[n, r], now[n, r])
            expr = sum(math.ceil(vec[r] * rs) * v for vec, v in res_terms[n])
            m.add(expr + math.ceil(fixed[n, r] * rs) <= math.floor(cap * rs) + len(res_terms[n]))


def window_distance(problem: KeyGroupProblem, loads: np.ndarray, nodes: set[int]) -> float:
    dev = loads - problem.capacity * problem.mean_load
    worst = 0.0
    for n in nodes:
        worst = max(worst, dev[n] if not problem.keep[n] else abs(dev[n]))
    return worst
