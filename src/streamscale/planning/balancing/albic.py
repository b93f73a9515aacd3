"""ALBIC: autonomic load balancing with integrated collocation, and the adaptation loop.

Paper 003, §4.3.2 (collocation on top of the MILP of §4.3.1) and §4.1,
Algorithm 1 (the integrative adaptation framework). Restated in
ALGORITHMS.md §003.

Collocation, per adaptation round:

1. *Scores*: a pair (k, k') qualifies when rate(k→k') > θ_k, θ_k = (tuples k
   sends downstream ÷ number of downstream key groups) × score factor.
2. *Maintain*: existing collocation sets are merged when they intersect and
   split with balanced graph partitioning (METIS) until every partition has a
   load below ``maxPartitionLoad`` (a percentage of the mean node load) and a
   migration cost below ``maxMigrCost`` (vertex weight = migration cost where
   that binds, else load; edge weight = rate).
3. *Improve*: the qualifying pair with the highest rate that is not yet
   collocated becomes one new constraint: both on the less loaded of their two
   nodes (cases 1 and 3) or on the node of the set one of them belongs to
   (case 2).
4. *Solve* the MILP with the sets as indivisible units; while the load
   distance exceeds ``maxLoadDistance``, lower ``maxPartitionLoad`` and re-solve
   (at most ``max_resolves`` times).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamscale.planning.balancing.cola import metis_split
from streamscale.planning.balancing.greedy import make_items
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import collocation_factor, load_distance_pct
from streamscale.planning.balancing.milp import solve_milp

__all__ = ["albic", "collocation_candidates", "split_sets"]


def collocation_candidates(
    problem: KeyGroupProblem, *, score_factor: float = 1.0
) -> list[tuple[float, int, int]]:
    """Qualifying pairs ``(rate, k, k')``, highest rate first (step 1)."""
    tr = problem.traffic
    if not tr.size:
        return []
    src = tr[:, 0].astype(np.int64)
    dst = tr[:, 1].astype(np.int64)
    sent = np.bincount(src, weights=tr[:, 2], minlength=problem.k)
    sent = np.maximum(sent, problem.output_rate)
    ops = np.array(problem.operators)
    # Downstream key groups of k = all key groups of the operators k's operator sends to.
    size = {o: int((ops == o).sum()) for o in set(problem.operators)}
    down: dict[str, set[str]] = {}
    for a, b in zip(src, dst, strict=True):
        down.setdefault(problem.operators[a], set()).add(problem.operators[b])
    out: list[tuple[float, int, int]] = []
    for a, b, r in zip(src, dst, tr[:, 2], strict=True):
        if a == b:
            continue
        n_down = sum(size[o] for o in down[problem.operators[a]]) or 1
        if r > sent[a] / n_down * score_factor:
            out.append((float(r), int(a), int(b)))
    out.sort(key=lambda t: (-t[0], t[1], t[2]))
    return out


def split_sets(
    problem: KeyGroupProblem,
    sets: Sequence[Sequence[int]],
    *,
    max_partition_load: float,
    max_cost: float | None = None,
    seed: int | None = None,
) -> list[list[int]]:
    """Merge intersecting sets, then split each until load and cost are under the limits (step 2)."""
    items = make_items(problem, [list(s) for s in sets if len(s) > 1])
    todo = [list(map(int, m)) for m in items.members if len(m) > 1]
    out: list[list[int]] = []
    while todo:
        s = todo.pop()
        load = float(problem.load[s].sum())
        cost = float(problem.cost[s].sum())
        cost_binds = max_cost is not None and cost >= max_cost
        if load < max_partition_load and not cost_binds:
            out.append(sorted(s))
            continue
        if len(s) < 2:
            continue
        weights = problem.cost if cost_binds else problem.load
        for part in metis_split(problem, s, 2, weights=weights, seed=seed):
            if len(part) > 1:
                todo.append(part)
    out.sort()
    return out


def _node_of_set(problem: KeyGroupProblem, s: Sequence[int]) -> int:
    nodes = np.unique(problem.assignment[list(s)])
    loads = problem.node_loads()
    return int(nodes[np.argmin(loads[nodes])])


def albic(
    problem: KeyGroupProblem,
    *,
    collocated: Sequence[Sequence[int]] = (),
    max_migrations: int | None = None,
    max_cost: float | None = None,
    score_factor: float = 1.0,
    max_load_distance_pct: float = 5.0,
    max_partition_load_pct: float = 25.0,
    partition_load_step_pct: float = 5.0,
    max_resolves: int = 5,
    new_pairs: int = 1,
    protect_existing: bool = True,
    time_limit_s: float = 2.0,
    deterministic_limit: float | None = None,
    seed: int | None = None,
) -> BalanceResult:
    """One ALBIC round (paper 003, §4.3.2): maintain and extend collocation, then solve.

    Parameters
    ----------
    problem
        Key groups (with traffic), nodes, current allocation, N_r.
    collocated
        Collocation sets kept from the previous round (``BalanceResult.collocated``).
    max_migrations, max_cost
        Per-round migration budget (maxMigrations / maxMigrCost).
    score_factor
        θ multiplier of step 1 (1 = pairs sending more than average).
    max_load_distance_pct
        maxLoadDistance, percent of the mean node load.
    max_partition_load_pct, partition_load_step_pct
        Initial maxPartitionLoad (25 % of the mean node load) and its decrease per re-solve.
    max_resolves
        Most re-solves with a smaller maxPartitionLoad.
    new_pairs
        New collocation constraints per round (the paper adds one).
    protect_existing
        Qualifying pairs (step 1) already on one node, by chance or from
        earlier rounds, join ``collocated`` so the round does not split them
        (step 2 still splits sets over maxPartitionLoad).
    time_limit_s, deterministic_limit, seed
        Passed to the MILP.

    Returns
    -------
    BalanceResult
        ``method="albic"``; ``collocated`` holds the sets to keep for the next
        round; ``extra`` has ``collocation_pct``, ``resolves`` and ``new_pairs``.
    """
    mean = problem.mean_load
    pairs = collocation_candidates(problem, score_factor=score_factor)
    if protect_existing:
        asg = problem.assignment
        together = [[a, b] for _, a, b in pairs if asg[a] == asg[b] and asg[a] >= 0]
        collocated = [*map(list, collocated), *together]
    mpl = max_partition_load_pct
    result: BalanceResult | None = None
    resolves = 0
    added: list[tuple[int, int]] = []
    while True:
        sets = split_sets(
            problem, collocated, max_partition_load=mpl / 100 * mean, max_cost=max_cost, seed=seed
        )
        where = {g: i for i, s in enumerate(sets) for g in s}
        pinned: list[tuple[int, int]] = []
        added = []
        budget_left = max_migrations
        for _, a, b in pairs:
            if len(added) >= new_pairs:
                break
            ia, ib = where.get(a), where.get(b)
            if ia is not None and ia == ib:
                continue
            merged = sorted(
                set(sets[ia] if ia is not None else [a]) | set(sets[ib] if ib is not None else [b])
            )
            if float(problem.load[merged].sum()) >= mpl / 100 * mean:
                continue
            if (ia is None) != (ib is None):  # case 2: go where the existing set lives
                node = _node_of_set(problem, sets[ia] if ia is not None else sets[ib])  # type: ignore[index]
            else:  # cases 1 and 3: the less loaded of the two nodes
                node = _node_of_set(problem, [a, b])
            if problem.removing[node]:
                continue
            moving = [g for g in merged if problem.assignment[g] != node]
            cost = float(problem.cost[moving].sum())
            if budget_left is not None and len(moving) > budget_left:
                continue
            if max_cost is not None and cost > max_cost:
                continue
            sets = [s for i, s in enumerate(sets) if i not in (ia, ib)] + [merged]
            where = {g: i for i, s in enumerate(sets) for g in s}
            pinned.append((merged[0], node))
            added.append((a, b))
            if budget_left is not None:
                budget_left -= len(moving)
        result = solve_milp(
            problem,
            max_migrations=max_migrations,
            max_cost=max_cost,
            collocate=sets,
            pinned=pinned,
            time_limit_s=time_limit_s,
            deterministic_limit=deterministic_limit,
            seed=seed,
        )
        dist = load_distance_pct(problem, result.assignment)
        if dist <= max_load_distance_pct or resolves >= max_resolves or not sets:
            break
        resolves += 1
        mpl = max(mpl - partition_load_step_pct, 0.0)
    extra = {
        **result.extra,
        "collocation_pct": collocation_factor(problem, result.assignment),
        "resolves": float(resolves),
        "new_pairs": float(len(added)),
        "max_partition_load_pct": mpl,
    }
    return BalanceResult(
        result.assignment,
        "albic",
        result.status,
        result.solve_s,
        result.collocated,
        (*result.notes, f"underlying MILP answer: {result.method}"),
        extra,
    )
