"""ALBIC's MILP key-group balancer with a migration budget and scale-in.

Paper 003, §4.3.1 (the formulas are reconstructed in ALGORITHMS.md §003)::

    minimize   w1·δ − w2·δu − w3·δl
    (1) Σ_n x'_kn = 1                               ∀k
    (2) Σ_k Σ_n (1 − x_kn)·x'_kn·c_k ≤ maxMigrCost   (or a count, maxMigrations)
    (3) Σ_k x'_kn·L_k ≤ w_n·L̄ + δ − δu               ∀n
    (4) Σ_k x'_kn·L_k ≥ w_n·L̄ − δ + δl               ∀n ∈ N_keep
    (5) δu ≤ δ,  δl ≤ δ

with ``w_n`` the node capacity weight (heterogeneous nodes) and, optionally,
per-resource caps Σ_k x'_kn·R_kr ≤ cap_nr. Nothing may move into N_r
(Lemma 1 of the paper, imposed here rather than left to the optimum) and N_r
has no lower bound, so with enough budget it drains (Lemma 2).

Solver
------
OR-Tools CP-SAT (loads scaled to integers, one worker), chosen by
measurement on 40 nodes × 800 key groups, maxMigrations = 20, 2 s per round.
On the full 32 000-binary model no solver was usable: CP-SAT found no
solution in 2 s, HiGHS through ``scipy.optimize.milp`` returned allocations
worse than the current one (no MIP start) and highspy spent 23 s in its first
round despite a 2 s limit. On the windowed model below (window = 1 node per
side) both reach < 1 % within three rounds: HiGHS 0.77 % then 0.29 %, CP-SAT
1.29 % then 0.57 %, each round well under 2 s. CP-SAT is the default because
it takes a solution hint (the warm start), a deterministic time limit
(reproducible answers for a seed) and reports its own wall time (a planner
reads no clock); HiGHS stays available as ``solver="highs"``. highspy itself
cannot be loaded in one process with OR-Tools (their bundled HiGHS symbols
clash), which other planners of this package import.

Reduction
---------
With a per-round budget only few key groups move, so the MILP is solved as a
sequence of exact sub-MILPs over windows of nodes (large-neighbourhood
search), each started from the current allocation improved by the greedy
balancer (the warm start; the sub-MILPs may keep, undo or replace its moves
and the budget counts from the current allocation). Items on the ``window`` most overloaded nodes of N_keep and on the
most loaded non-empty nodes of N_r may go to the ``window`` most underloaded
nodes of N_keep, and items on those underloaded nodes may go to the
overloaded ones (swaps). Other nodes keep their items; their deviation is a
constant of the step, so δ is taken over the window, and the load distance
never increases from one step to the next. Steps repeat on the new extremes
until a window cannot be improved, the budget is spent or the solver's
reported time reaches the limit. When items × nodes ≤ ``exact_up_to`` the
whole model (every item to every node of N_keep) is solved in one step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from streamscale.planning.balancing.greedy import Budget, Items, greedy_balance, make_items
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import load_distance

__all__ = ["solve_milp"]

_SCALE = 100_000
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class _Step:
    node_of: np.ndarray | None
    status: str
    wall: float
    det: float = 0.0


def _item_loads(problem: KeyGroupProblem, items: Items, node_of: np.ndarray) -> np.ndarray:
    loads = np.zeros(problem.n)
    for i, m in enumerate(items.members):
        if node_of[i] >= 0:
            loads[node_of[i]] += items.load[i]
        else:  # a split item still sits on its members' nodes
            np.add.at(loads, problem.assignment[m], problem.load[m])
    return loads


def _candidates(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    budget: Budget,
    *,
    full: bool,
    window: int,
) -> list[list[int]]:
    """Candidate nodes per item, the current node first (see "Reduction")."""
    loads = _item_loads(problem, items, node_of)
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
        if cur < 0:
            homes = [
                int(h) for h in np.unique(problem.assignment[items.members[i]]) if problem.keep[h]
            ]
            cands = homes + (everywhere if full else under)
        elif full:
            cands = [cur, *everywhere]
        elif items.current[i] != cur:  # moved by the warm start: may stay, go back or go on
            cands = [cur, int(items.current[i]), *under]
        elif cur in draining or cur in over:
            cands = [cur, *under]
        elif cur in under:
            cands = [cur, *over]
        else:
            cands = [cur]
        ok = [
            c
            for c in dict.fromkeys(cands)
            if c == cur
            or budget.allows(items.move_count(problem, i, c), items.move_cost(problem, i, c))
        ]
        out.append(ok or list(dict.fromkeys(cands))[:1])
    return out


def _solve_window(
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
) -> _Step:
    """One exact sub-MILP: constraints (1)–(5) over the window's nodes."""
    total = float(problem.load.sum()) or 1.0
    scale = _SCALE / total
    iload = np.rint(items.load * scale).astype(np.int64)
    target = np.rint(problem.capacity * problem.mean_load * scale).astype(np.int64)
    ub = int(iload.sum() + target.max() + 1)
    cost_scale = _SCALE / budget.max_cost if budget.max_cost else 0.0

    m = cp_model.CpModel()
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
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(0.05, time_limit)
    if math.isfinite(det_limit):
        p.max_deterministic_time = max(0.01, det_limit)
    p.num_workers = 1
    p.random_seed = seed
    status = solver.solve(m)
    name, wall = solver.status_name(status), float(solver.wall_time)
    det = float(solver.deterministic_time)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Step(None, name, wall, det)
    new = np.array(
        [
            cs[0] if not xs else next(n for n, v in xs if solver.value(v))
            for cs, xs in zip(cands, var_of, strict=True)
        ],
        dtype=np.int64,
    )
    return _Step(new, name, wall, det)


def _solve_window_highs(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    cands: list[list[int]],
    budget: Budget,
    *,
    time_limit: float,
    weights: tuple[float, float, float],
    cutoff: float,
) -> _Step:
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
        options={"time_limit": max(0.05, time_limit), "disp": False},
    )
    wall = float(getattr(res, "mip_node_count", 0) * 0.0)
    if res.x is None:
        return _Step(None, str(res.message).split(".")[0], wall)
    new = np.array(node_of, copy=True)
    for c in np.flatnonzero(res.x[:nx] > 0.5):
        i, n = cols[c]
        new[i] = n
    for i, cs in enumerate(cands):
        if len(cs) == 1:
            new[i] = cs[0]
    return _Step(new, "OPTIMAL" if res.status == 0 else "FEASIBLE", wall)


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


def _window_distance(problem: KeyGroupProblem, loads: np.ndarray, nodes: set[int]) -> float:
    dev = loads - problem.capacity * problem.mean_load
    worst = 0.0
    for n in nodes:
        worst = max(worst, dev[n] if not problem.keep[n] else abs(dev[n]))
    return worst


def solve_milp(
    problem: KeyGroupProblem,
    *,
    max_migrations: int | None = None,
    max_cost: float | None = None,
    collocate: Sequence[Sequence[int]] = (),
    pinned: Sequence[tuple[int, int]] = (),
    time_limit_s: float = 2.0,
    deterministic_limit: float | None = None,
    window: int = 1,
    exact_up_to: int = 1500,
    weights: tuple[float, float, float] = (100.0, 1.0, 1.0),
    seed: int | None = None,
    solver: str = "cpsat",
    max_steps: int = 50,
) -> BalanceResult:
    """Solve the key-group MILP within a migration budget (paper 003, §4.3.1).

    Parameters
    ----------
    problem
        Key groups, nodes, current allocation, N_r.
    max_migrations, max_cost
        Per-round budget: key groups moved (maxMigrations) and/or Σ c_k (maxMigrCost).
    collocate
        Sets of key group indices that must share a node (they move as one unit).
    pinned
        ``(key group, node)`` pairs: that key group's set must end on that node.
    time_limit_s
        Limit on the solver's total reported wall time over all steps.
    deterministic_limit
        CP-SAT deterministic time over all steps (default: none). When it
        binds before the wall-clock limit the answer is reproducible for a
        seed; on this machine one deterministic unit took about 5 s of wall time.
    window
        Nodes per side of a step's window (see "Reduction").
    exact_up_to
        Solve the whole model in one step when items × nodes is at most this.
    weights
        ``(w1, w2, w3)`` with ``w1 > w2 + w3`` so δ is minimised first.
    seed
        Solver random seed.
    solver
        ``"cpsat"`` (default) or ``"highs"`` (``scipy.optimize.milp``; each step
        is charged ``time_limit_s / max_steps`` since scipy reports no time).
    max_steps
        Most sub-MILPs per call.

    Returns
    -------
    BalanceResult
        ``method`` is ``"milp"``, ``"current"`` (nothing better than the
        current allocation was found) or ``"greedy-fallback"`` (the solver
        returned no solution in time); ``extra["steps"]`` counts sub-MILPs.
    """
    budget = Budget(max_migrations, max_cost)
    items = make_items(problem, collocate, pinned)
    node_of = np.array(items.current, copy=True)
    full = len(items.members) * int(problem.keep.sum()) <= exact_up_to
    det_total = float(deterministic_limit) if deterministic_limit else math.inf
    wall = det = 0.0
    steps, status = 0, "NOT_RUN"
    must_fix = bool(
        ((items.pinned >= 0) & (items.pinned != items.current)).any() or (node_of < 0).any()
    )
    if not must_fix and not full:
        # Warm start: the current allocation improved by the greedy balancer, whose moves
        # the sub-MILPs may keep, undo or replace (the budget counts from the current one).
        g = greedy_balance(problem, items, budget)
        if g is not None and load_distance(problem, items.expand(problem, g)) < load_distance(
            problem
        ):
            node_of = g
    while wall < time_limit_s and det < det_total and steps < max_steps:
        cands = _candidates(problem, items, node_of, budget, full=full, window=window)
        if not must_fix and all(len(c) == 1 for c in cands):
            break
        nodes = {n for c in cands if len(c) > 1 for n in c}
        before = _window_distance(problem, _item_loads(problem, items, node_of), nodes)
        if solver == "highs":
            step = _solve_window_highs(
                problem,
                items,
                node_of,
                cands,
                budget,
                time_limit=time_limit_s / max_steps,
                weights=weights,
                cutoff=before,
            )
            step = _Step(step.node_of, step.status, time_limit_s / max_steps)  # worst case
        else:
            step = _solve_window(
                problem,
                items,
                node_of,
                cands,
                budget,
                time_limit=time_limit_s - wall,
                det_limit=det_total - det,
                weights=weights,
                seed=int(seed or 0) + steps,
            )
        steps += 1
        wall += step.wall
        det += step.det
        status = step.status
        if step.node_of is None:
            if must_fix:
                g = greedy_balance(problem, items, budget)
                note = f"solver returned {status} within {time_limit_s:g} s; greedy fallback used"
                if g is None:
                    note = "solver found no solution and the constraints exceed the budget"
                    return _result(problem, items, node_of, "current", status, wall, steps, (note,))
                return _result(problem, items, g, "greedy-fallback", status, wall, steps, (note,))
            break
        after = _window_distance(problem, _item_loads(problem, items, step.node_of), nodes)
        improved = after < before - 1e-9 * max(1.0, problem.mean_load)
        if improved or must_fix:
            node_of = step.node_of
        must_fix = False
        if full or not improved:
            break
    if steps and not must_fix:
        new = items.expand(problem, node_of)
        cur_ok = bool(
            (items.current >= 0).all()
            and ((items.pinned < 0) | (items.pinned == items.current)).all()
        )
        if cur_ok and load_distance(problem, new) > load_distance(problem) + 1e-12:
            node_of = np.array(items.current, copy=True)
    method = "milp" if steps and (node_of != items.current).any() else "current"
    return _result(problem, items, node_of, method, status, wall, steps)


def _result(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    method: str,
    status: str,
    solve_s: float,
    steps: int,
    notes: tuple[str, ...] = (),
) -> BalanceResult:
    split = node_of < 0
    if split.any():  # constraints that could not be honoured: members stay where they are
        node_of = np.where(split, 0, node_of)
    assignment = items.expand(problem, node_of)
    for i in np.flatnonzero(split):
        assignment[items.members[i]] = problem.assignment[items.members[i]]
    sets = tuple(
        tuple(int(g) for g in m) for i, m in enumerate(items.members) if len(m) > 1 and not split[i]
    )
    return BalanceResult(assignment, method, status, solve_s, sets, notes, {"steps": float(steps)})
