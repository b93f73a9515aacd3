"""Exact task allocation: maximise the IMC gain φ(X) with OR-Tools CP-SAT.

Paper 001, §7.3 computes the optimum by enumerating every allocation of
17-task jobs. Tasks of a group are interchangeable, so an allocation is the
per-node task counts x_{g,n}:

    maximise   Σ_{(a,b)∈E} imc_ab/(|a||b|) · Σ_n x_{a,n}·x_{b,n}
    subject to Σ_n x_{g,n} = |g|,   Σ_g pc_g/|g| · x_{g,n} ≤ μ_n.

Two exact CP-SAT models are offered:

* ``patterns`` — every count vector a node of a given capacity can hold is a
  *pattern* p with a known gain v_p (the products are evaluated when it is
  enumerated, so nothing needs linearising); the model picks how many nodes
  of each capacity use each pattern. Nodes of equal capacity are
  interchangeable, so this model has no symmetry and a tight relaxation; it
  is the one for paper-size jobs (17 tasks).
* ``counts`` — integer x_{g,n}; each product x_{a,n}·x_{b,n} is linearised
  exactly through a one-hot encoding of the smaller group's count
  (y = Σ_k k·w_k, w_k ≤ x_{b,n}, w_k ≤ |b|·[x_{a,n} = k]); equal nodes hold
  the most tasked group in non-increasing counts, against symmetry. Used when
  there are too many patterns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from streamscale.errors import import_extra
from streamscale.planning.placement.groups import EPS, GroupJob, TaskAllocation
from streamscale.planning.placement.top_down import top_down
from streamscale.settings import Setting

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["TIME_LIMIT", "Method", "OptimalResult", "node_patterns", "optimal"]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
TIME_LIMIT = Setting("time_limit_s", float, 10.0, "CP-SAT time limit (s)", low=0.0, low_open=True)


def _cp() -> ModuleType:
    """OR-Tools' CP-SAT (the ``papers`` extra), imported when a model is solved."""
    return import_extra("ortools.sat.python.cp_model")


Method = Literal["auto", "patterns", "counts"]


@dataclass(frozen=True, slots=True)
class OptimalResult:
    """The allocation found, the solver's status and its upper bound on φ (MB/s).

    ``proven_optimal`` is True only when CP-SAT proved optimality; after a
    time-out the allocation is the best one found and the flag is False.
    """

    allocation: TaskAllocation
    status: str
    proven_optimal: bool
    bound: float
    method: str


def node_patterns(job: GroupJob, capacity: float, *, limit: int) -> list[tuple[int, ...]] | None:
    """Every non-empty task-count vector a node of ``capacity`` can host, or None past ``limit``."""
    pc, tasks, ng = job.task_cost, job.tasks, len(job.groups)
    slack = EPS * max(1.0, capacity)
    out: list[tuple[int, ...]] = []
    cur = [0] * ng

    def walk(g: int, left: float) -> None:
        if g == ng:
            if any(cur):
                out.append(tuple(cur))
                if len(out) > limit:
                    raise _TooMany
            return
        c = 0
        while c <= tasks[g] and c * pc[g] <= left + slack:
            cur[g] = c
            walk(g + 1, left - c * pc[g])
            c += 1
        cur[g] = 0

    try:
        walk(0, capacity)
    except _TooMany:
        return None
    return out


class _TooMany(Exception):
    pass


def optimal(
    job: GroupJob,
    *,
    time_limit_s: float = TIME_LIMIT.default,
    work_limit: float | None = None,
    method: Method = "auto",
    max_patterns: int = 50_000,
    workers: int = 1,
    seed: int | None = None,
    hint: TaskAllocation | None = None,
) -> OptimalResult:
    """The allocation of maximum IMC gain (paper 001, §2.2 objective, §7.3 optimum).

    Parameters
    ----------
    job
        The group job.
    time_limit_s
        CP-SAT's time limit; when it is hit, the best allocation found is
        returned with ``proven_optimal=False``.
    work_limit
        CP-SAT's deterministic time limit (its own work units, about a second
        each); unlike the wall-clock limit it ends the search at the same point
        on every run, so a time-out gives the same allocation every time.
    method
        ``patterns``, ``counts`` or ``auto`` (patterns when at least three
        nodes duplicate another's capacity and the node patterns number at
        most ``max_patterns``, else counts).
    workers
        CP-SAT search workers; 1 keeps the search deterministic.
    seed
        CP-SAT's random seed.
    hint
        A complete allocation to start the ``counts`` model from (default:
        TD's, when complete).

    Returns
    -------
    OptimalResult
        ``allocation`` is complete unless no complete allocation exists (status
        ``INFEASIBLE``) or none was found in time (``UNKNOWN``); then no task is
        placed and every one is listed in ``unplaced``.

    Examples
    --------
    Groups ``A`` and ``B`` have two tasks of 30 % each, ``C`` one of 40 %; an ``A``–``B``
    task link carries 8/4 = 2 MB/s and a ``B``–``C`` link 6/2 = 3. The five tasks (160 %)
    need both nodes of 100 %; trying all 18 count vectors shows that the best gain is 7 (e.g.
    one ``A`` and one ``B`` per node, ``C`` beside one ``B``: 2 + 2 + 3).

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> r = optimal(job, seed=0)
    >>> r.status, r.proven_optimal, r.allocation.gain  # several optima: only the gain is shown
    ('OPTIMAL', True, 7.0)
    """
    solver = _cp().CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed or 0)
    if work_limit is not None:
        solver.parameters.max_deterministic_time = float(work_limit)
    classes: dict[float, list[int]] = {}
    for n, c in enumerate(job.capacities):
        classes.setdefault(c, []).append(n)
    if _plainly_infeasible(job):
        empty = [[0] * len(job.nodes) for _ in job.groups]
        return OptimalResult(
            TaskAllocation.of(job, empty, "optimal"), "INFEASIBLE", False, 0.0, "none"
        )
    patterns: dict[float, list[tuple[int, ...]]] | None = None
    # Patterns pay off when many nodes are interchangeable; with few equal
    # nodes the per-node model is smaller and solves faster.
    symmetric = len(job.nodes) - len(classes) >= 3
    if method == "patterns" or (method == "auto" and symmetric):
        patterns = {}
        for c in classes:
            found = node_patterns(job, c, limit=max_patterns)
            if found is None:
                patterns = None
                break
            patterns[c] = found
        if patterns is not None and sum(map(len, patterns.values())) > max_patterns:
            patterns = None
        if patterns is None and method == "patterns":
            raise ValueError(f"more than {max_patterns} node patterns; use method='counts'")
    if patterns is not None:
        return _solve_patterns(job, classes, patterns, solver)
    return _solve_counts(job, solver, hint)


def _plainly_infeasible(job: GroupJob) -> bool:
    """Total cost above total capacity, or a task bigger than every node.

    Each node may hold up to twice its tolerance EPS·max(1, μ) over μ (see
    :func:`_solve_counts`), so the bounds add up the nodes' tolerances.
    """
    slack = 2.0 * sum(EPS * max(1.0, c) for c in job.capacities)
    if job.total_cost > sum(job.capacities) + slack:
        return True
    biggest = max(job.capacities)
    return any(c > biggest + 2.0 * EPS * max(1.0, biggest) for c in job.task_cost)


def _value(job: GroupJob, p: tuple[int, ...]) -> float:
    return sum(w * p[a] * p[b] for (a, b), w in zip(job.ends, job.link_imc, strict=True))


def _solve_patterns(
    job: GroupJob,
    classes: dict[float, list[int]],
    patterns: dict[float, list[tuple[int, ...]]],
    solver: cp_model.CpSolver,
) -> OptimalResult:
    ng, nn = len(job.groups), len(job.nodes)
    m = _cp().CpModel()
    uses: list[tuple[float, tuple[int, ...], cp_model.IntVar]] = []
    for c, nodes in classes.items():
        ys = []
        for i, p in enumerate(patterns[c]):
            y = m.new_int_var(0, len(nodes), f"y{len(uses)}_{i}")
            ys.append(y)
            uses.append((c, p, y))
        m.add(sum(ys) <= len(nodes))
    for g in range(ng):
        m.add(sum(p[g] * y for _, p, y in uses if p[g]) == job.tasks[g])
    m.maximize(sum(_value(job, p) * y for _, p, y in uses))
    status = solver.solve(m)
    counts = [[0] * nn for _ in range(ng)]
    if status in (_cp().OPTIMAL, _cp().FEASIBLE):
        slots = {c: iter(nodes) for c, nodes in classes.items()}
        for c, p, y in uses:
            for _ in range(int(solver.value(y))):
                n = next(slots[c])
                for g in range(ng):
                    counts[g][n] = p[g]
    return _result(job, counts, status, solver, "patterns")


def _solve_counts(
    job: GroupJob, solver: cp_model.CpSolver, hint: TaskAllocation | None
) -> OptimalResult:
    ng, nn = len(job.groups), len(job.nodes)
    total = job.total_tasks
    caps = job.capacities
    # Integer costs rounded up and capacities (plus twice the tolerance
    # EPS·max(1, μ): the heuristics fill a node up to μ + EPS·max(1, μ) and
    # TaskAllocation.respects_capacities allows twice that) rounded down: every
    # solution passes the check. Rounding adds < 1 unit per task, and the extra
    # tolerance is worth ≥ 2(total + 1) units at this scale, so every allocation
    # a heuristic may return stays feasible.
    scale = 2.0 * (total + 1) / EPS
    cost = [math.ceil(c * scale) for c in job.task_cost]
    cap = [math.floor((c + 2.0 * EPS * max(1.0, c)) * scale) for c in caps]

    m = _cp().CpModel()
    x = [[m.new_int_var(0, job.tasks[g], f"x{g}_{n}") for n in range(nn)] for g in range(ng)]
    for g in range(ng):
        m.add(sum(x[g]) == job.tasks[g])
    loads = [sum(cost[g] * x[g][n] for g in range(ng)) for n in range(nn)]
    for n in range(nn):
        m.add(loads[n] <= cap[n])
    # Against symmetry, equal nodes hold the most tasked group in non-increasing counts.
    # (Ordering their loads instead put coefficients of ~1e11 into the model, and CP-SAT
    # then proved a wrong optimum: half the gain on a 9-task job.)
    lead = max(range(ng), key=lambda g: job.tasks[g])
    for n in range(nn - 1):
        if caps[n] == caps[n + 1]:
            m.add(x[lead][n] >= x[lead][n + 1])
    objective = []
    for e, (a, b) in enumerate(job.ends):
        if job.link_imc[e] <= 0:
            continue
        small, big = (a, b) if job.tasks[a] <= job.tasks[b] else (b, a)
        for n in range(nn):
            zs = [m.new_bool_var(f"z{e}_{n}_{k}") for k in range(job.tasks[small] + 1)]
            m.add_exactly_one(zs)
            m.add(x[small][n] == sum(k * z for k, z in enumerate(zs)))
            for k in range(1, job.tasks[small] + 1):
                w = m.new_int_var(0, job.tasks[big], f"w{e}_{n}_{k}")
                m.add(w <= x[big][n])
                m.add(w <= job.tasks[big] * zs[k])
                objective.append(job.link_imc[e] * k * w)
    m.maximize(sum(objective))
    start = hint if hint is not None else top_down(job)
    if start.complete and start.job.tasks == job.tasks and len(start.counts[0]) == nn:
        for g in range(ng):
            for n in range(nn):
                m.add_hint(x[g][n], start.counts[g][n])
    status = solver.solve(m)
    counts = [[0] * nn for _ in range(ng)]
    if status in (_cp().OPTIMAL, _cp().FEASIBLE):
        counts = [[int(solver.value(x[g][n])) for n in range(nn)] for g in range(ng)]
    return _result(job, counts, status, solver, "counts")


def _result(
    job: GroupJob, counts: list[list[int]], status: int, solver: cp_model.CpSolver, method: str
) -> OptimalResult:
    found = status in (_cp().OPTIMAL, _cp().FEASIBLE)
    proven = status == _cp().OPTIMAL
    alloc = TaskAllocation.of(job, counts, "optimal", proven_optimal=proven)
    bound = float(solver.best_objective_bound) if found else 0.0
    return OptimalResult(alloc, solver.status_name(status), proven, bound, method)
