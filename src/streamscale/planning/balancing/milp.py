"""ALBIC's MILP key-group balancer with a migration budget and scale-in.

Paper 003, §4.3.1 (the formulas are reconstructed in docs/algorithms.md, "003 — ALBIC")::

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
HiGHS through ``scipy.optimize.milp`` by default, chosen by measurement on
40 nodes × 800 key groups × 20 operators (the §5.1 setup), maxMigrations
20, a 2 s budget per round, on this 2-core machine under load. On the full
32 000-binary model no solver was usable: CP-SAT found no solution in 2 s,
HiGHS (scipy) returned allocations worse than the current one and highspy
spent 23 s in its first round despite a 2 s limit. On the windowed model
below, from a load distance of 34.4 %: HiGHS reached 0.60 % in round 3 with
0.35–1.34 s wall per round; CP-SAT (one worker) reached 1.03 % in round 3 and
0.46 % in round 4 with ~2 s per round. scipy passes no MIP start, so the warm
start enters as the cutoff δ ≤ δ(start) plus the greedy-improved start
allocation the window is built around, and scipy reports no solve time, so
each windowed step is charged its whole limit (``time_limit_s / max_steps``).
CP-SAT stays available (``solver="cpsat"``): it takes the current allocation
as a solution hint, a deterministic time limit (answers reproducible for a
seed even when the limit binds) and reports its own wall time. highspy itself
cannot be loaded in one process with OR-Tools (their bundled HiGHS symbols
clash), which other planners of this package import.

Finishing a drain
-----------------
Lemma 2 (the optimum drains N_r) holds for divisible load. With indivisible
key groups the last few on N_r can stay forever once moving any of them would
raise δ (each adds a whole key group's load to a balanced node). With
``finish_drain`` (off by default), when all key groups left on N_r fit in the
round's budget they must move, the MILP still choosing their targets, and the
node can be released (Algorithm 1, lines 1–3). It is off because a forced
drain can end far above the least δ the budget allows (on small brute-forced
instances, 9 of 60 rounds did); the ALBIC loop drains N_r over later rounds.

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
never increases from one step to the next. Steps repeat on the new extremes;
a window that cannot be improved is widened (doubled up to ``max_window``),
and the search stops when the widest window cannot be improved or the
solver's reported time reaches the limit. When items × nodes ≤ ``exact_up_to`` the
whole model (every item to every node of N_keep) is solved in one step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from streamscale.planning.balancing.greedy import Budget, Items, greedy_balance, make_items
from streamscale.planning.balancing.keygroup_settings import SOLVER, TIME_LIMIT
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import load_distance
from streamscale.planning.balancing.milp_window import (
    Step,
    candidates,
    item_loads,
    solve_window,
    solve_window_highs,
    window_distance,
)

__all__ = ["solve_milp"]


def solve_milp(
    problem: KeyGroupProblem,
    *,
    max_migrations: int | None = None,
    max_cost: float | None = None,
    collocate: Sequence[Sequence[int]] = (),
    pinned: Sequence[tuple[int, int]] = (),
    time_limit_s: float = TIME_LIMIT.default,
    deterministic_limit: float | None = None,
    window: int = 1,
    max_window: int = 4,
    finish_drain: bool = False,
    node_limit: int | None = 200,
    exact_up_to: int = 1500,
    weights: tuple[float, float, float] = (100.0, 1.0, 1.0),
    seed: int | None = None,
    solver: str = SOLVER.default,
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
        CP-SAT only: deterministic time over all steps (default: none). When it
        binds before the wall-clock limit the answer is reproducible for a
        seed; on this machine one deterministic unit took about 5 s of wall time.
    window, max_window
        Nodes per side of a step's window (see "Reduction"); a step that
        cannot improve doubles it, up to ``max_window``, before the search stops.
    node_limit
        HiGHS only: branch-and-bound nodes per step. Balancing models have a
        weak LP bound, so HiGHS rarely proves optimality; a node limit ends a
        step deterministically (and quickly on small models) where the time
        limit would end it at a machine-dependent point.
    finish_drain
        False (default): the MILP alone decides what leaves N_r. True: when
        every key group left on N_r fits in the budget, they must all move
        this round (see the module docstring on Lemma 2).
    exact_up_to
        Solve the whole model in one step when items × nodes is at most this.
    weights
        ``(w1, w2, w3)`` with ``w1 > w2 + w3`` so δ is minimised first.
    seed
        Solver random seed. Answers are reproducible while node limits
        (HiGHS) or ``deterministic_limit`` (CP-SAT) end the steps; a step
        ended by a wall-clock limit depends on the machine's speed and load.
    solver
        ``"highs"`` (default, ``scipy.optimize.milp``; a windowed step gets and
        is charged ``time_limit_s / max_steps``) or ``"cpsat"``.
    max_steps
        Most sub-MILPs per call.

    Returns
    -------
    BalanceResult
        ``method`` is ``"milp"``, ``"current"`` (nothing better than the
        current allocation was found) or ``"greedy-fallback"`` (the solver
        returned no solution in time); ``extra["steps"]`` counts sub-MILPs.

    Examples
    --------
    Node ``a`` holds key groups of load 4, 3 and 2, node ``b`` one of load 1 (mean 5). One
    migration suffices for a perfect balance: moving the 4 to ``b`` leaves 3 + 2 = 4 + 1.

    >>> from streamscale.planning.balancing.metrics import load_distance
    >>> p = KeyGroupProblem.build(["g0", "g1", "g2", "g3"], ["a", "b"],
    ...                           [4.0, 3.0, 2.0, 1.0], [0, 0, 0, 1])
    >>> r = solve_milp(p, max_migrations=1, seed=0)
    >>> r.assignment.tolist(), r.method, load_distance(p, r.assignment)
    ([1, 0, 0, 1], 'milp', 0.0)
    """
    budget = Budget(max_migrations, max_cost)
    items = make_items(problem, collocate, pinned)
    full = len(items.members) * int(problem.keep.sum()) <= exact_up_to
    force_out = _forced_out(problem, items, budget) if finish_drain else frozenset()
    drained = force_out
    must_fix = bool(force_out) or _constrained(items)
    node_of = _start(problem, items, budget, warm=not must_fix and not full)
    solve = _StepSolver(
        solver=solver, time_limit_s=time_limit_s, det_total=deterministic_limit or math.inf,
        step_limit=time_limit_s if full else time_limit_s / max_steps, node_limit=node_limit,
        weights=weights, seed=int(seed or 0),
    )  # fmt: skip
    width, status = window, "NOT_RUN"
    while solve.wall < time_limit_s and solve.det < solve.det_total and solve.steps < max_steps:
        cands = candidates(problem, items, node_of, budget, full=full, window=width,
                           force_out=force_out, no_return=drained)  # fmt: skip
        if not must_fix and all(len(c) == 1 for c in cands):
            break
        nodes = {n for c in cands if len(c) > 1 for n in c}
        before = window_distance(problem, item_loads(problem, items, node_of), nodes)
        step = solve(problem, items, node_of, cands, budget, math.inf if must_fix else before)
        status = step.status
        if step.node_of is None:
            if must_fix:
                return _fallback(problem, items, node_of, budget, status, solve)
            break
        improved = _improves(problem, items, step.node_of, nodes, before)
        if improved or must_fix:
            node_of = step.node_of
        must_fix, force_out = False, frozenset()
        if full or (not improved and width >= max_window):
            break
        # an improvement resets the neighbourhood; stagnation widens it
        width = window if improved else min(max_window, 2 * width)
    if solve.steps and not must_fix and not drained:
        node_of = _no_worse_than_current(problem, items, node_of)
    return _milp_result(problem, items, node_of, status, solve)


def _improves(
    problem: KeyGroupProblem, items: Items, node_of: np.ndarray, nodes: set[int], before: float
) -> bool:
    """Whether ``node_of`` lowers the window's distance below ``before`` (beyond rounding)."""
    after = window_distance(problem, item_loads(problem, items, node_of), nodes)
    return after < before - 1e-9 * max(1.0, problem.mean_load)


def _milp_result(
    problem: KeyGroupProblem, items: Items, node_of: np.ndarray, status: str, solve: _StepSolver
) -> BalanceResult:
    """The search's answer: ``milp`` when a step moved something, else ``current``."""
    method = "milp" if solve.steps and (node_of != items.current).any() else "current"
    return _result(problem, items, node_of, method, status, solve.wall, solve.steps)


def _forced_out(problem: KeyGroupProblem, items: Items, budget: Budget) -> frozenset[int]:
    """``finish_drain``: the items left on removed nodes, when all of them fit the budget
    (they must then all move this round), else none."""
    on_removed = [
        i
        for i, c in enumerate(items.current)
        if c >= 0 and problem.removing[c] and items.pinned[i] < 0
    ]
    moves = sum(len(items.members[i]) for i in on_removed)
    cost = sum(float(problem.cost[items.members[i]].sum()) for i in on_removed)
    return frozenset(on_removed) if on_removed and budget.allows(moves, cost) else frozenset()


def _constrained(items: Items) -> bool:
    """Whether the current allocation breaks a constraint (a pin elsewhere, an item
    without a node), so that the first step must change it."""
    return bool(
        ((items.pinned >= 0) & (items.pinned != items.current)).any() or (items.current < 0).any()
    )


def _start(problem: KeyGroupProblem, items: Items, budget: Budget, *, warm: bool) -> np.ndarray:
    """The allocation the first step starts from: the current one, warm-started when
    ``warm`` (:func:`_warm_start`)."""
    node_of = np.array(items.current, copy=True)
    return _warm_start(problem, items, budget, node_of) if warm else node_of


def _warm_start(
    problem: KeyGroupProblem, items: Items, budget: Budget, node_of: np.ndarray
) -> np.ndarray:
    """The current allocation improved by the greedy balancer, whose moves the sub-MILPs
    may keep, undo or replace (the budget counts from the current one)."""
    g = greedy_balance(problem, items, budget)
    if g is not None and load_distance(problem, items.expand(problem, g)) < load_distance(problem):
        return g
    return node_of


class _StepSolver:
    """One sub-MILP per call with the chosen solver, counting steps and the time spent."""

    def __init__(
        self,
        *,
        solver: str,
        time_limit_s: float,
        det_total: float,
        step_limit: float,
        node_limit: int | None,
        weights: tuple[float, float, float],
        seed: int,
    ) -> None:
        self.solver, self.time_limit_s, self.det_total = solver, time_limit_s, float(det_total)
        self.step_limit, self.node_limit, self.weights = step_limit, node_limit, weights
        self.seed = seed
        self.wall = self.det = 0.0
        self.steps = 0

    def __call__(
        self,
        problem: KeyGroupProblem,
        items: Items,
        node_of: np.ndarray,
        cands: list[list[int]],
        budget: Budget,
        cutoff: float,
    ) -> Step:
        if self.solver == "highs":
            got = solve_window_highs(problem, items, node_of, cands, budget,
                                     time_limit=self.step_limit, node_limit=self.node_limit,
                                     weights=self.weights, cutoff=cutoff)  # fmt: skip
            # charged in full: HiGHS reports no time
            step = Step(got.node_of, got.status, self.step_limit)
        else:
            step = solve_window(problem, items, node_of, cands, budget,
                                time_limit=self.time_limit_s - self.wall,
                                det_limit=self.det_total - self.det, weights=self.weights,
                                seed=self.seed + self.steps)  # fmt: skip
        self.steps += 1
        self.wall += step.wall
        self.det += step.det
        return step


def _fallback(
    problem: KeyGroupProblem,
    items: Items,
    node_of: np.ndarray,
    budget: Budget,
    status: str,
    solve: _StepSolver,
) -> BalanceResult:
    """The answer when the solver found nothing for a step that must change the allocation:
    the greedy balancer's, else the current one (the constraints exceed the budget)."""
    g = greedy_balance(problem, items, budget)
    if g is None:
        note = "solver found no solution and the constraints exceed the budget"
        return _result(problem, items, node_of, "current", status, solve.wall, solve.steps, (note,))
    note = f"solver returned {status} within {solve.time_limit_s:g} s; greedy fallback used"
    return _result(problem, items, g, "greedy-fallback", status, solve.wall, solve.steps, (note,))


def _no_worse_than_current(
    problem: KeyGroupProblem, items: Items, node_of: np.ndarray
) -> np.ndarray:
    """``node_of``, or the current allocation where that is valid and balances better."""
    new = items.expand(problem, node_of)
    cur_ok = bool(
        (items.current >= 0).all() and ((items.pinned < 0) | (items.pinned == items.current)).all()
    )
    if cur_ok and load_distance(problem, new) > load_distance(problem) + 1e-12:
        return np.array(items.current, copy=True)
    return node_of


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
