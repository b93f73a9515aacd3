"""ALBIC: autonomic load balancing with integrated collocation, and the adaptation loop.

Paper 003, §4.3.2 (collocation on top of the MILP of §4.3.1) and §4.1,
Algorithm 1 (the integrative adaptation framework); docs/algorithms.md,
"003 — ALBIC".

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
from dataclasses import dataclass

import numpy as np

from streamscale.planning.balancing.cola import metis_split
from streamscale.planning.balancing.greedy import make_items
from streamscale.planning.balancing.keygroup_settings import (
    MAX_PARTITION_LOAD,
    PAIR_SHARE,
    SCORE_FACTOR,
    SPREAD,
    TIME_LIMIT,
)
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import collocation_factor, load_distance_pct
from streamscale.planning.balancing.milp import solve_milp

__all__ = ["albic", "collocation_candidates", "split_sets"]


def collocation_candidates(
    problem: KeyGroupProblem, *, score_factor: float = SCORE_FACTOR.default
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


@dataclass(frozen=True, slots=True)
class _Round:
    """Step 3's outcome: the sets after merging, the pins and the pairs added."""

    sets: list[list[int]]
    pinned: list[tuple[int, int]]
    added: list[tuple[int, int]]


def _improve(
    problem: KeyGroupProblem,
    pairs: Sequence[tuple[float, int, int]],
    sets: Sequence[Sequence[int]],
    *,
    max_partition_load: float,
    new_pairs: int | None,
    pair_budget: int | None,
    max_cost: float | None,
    load_cap: float | None,
) -> _Round:
    """Step 3: pin qualifying pairs, highest rate first, each on one node.

    Node choice (paper 003, §4.3.2): where the set one of the two belongs to
    lives (case 2), else the less loaded of their nodes (cases 1 and 3). The
    loads compared are those the round's earlier pins leave, and a set pinned
    earlier in the round keeps its node. ``pair_budget`` bounds the key groups
    the pins move, ``max_cost`` their migration cost; ``load_cap`` (load per
    unit of capacity weight, or None) skips a pin that would raise its node
    above it.
    """
    asg = problem.assignment
    loads = problem.node_loads().astype(float)
    live: dict[int, list[int]] = {i: sorted(map(int, s)) for i, s in enumerate(sets)}
    where = {g: i for i, s in live.items() for g in s}
    pin_of: dict[int, int] = {}
    moved: set[int] = set()
    cost = 0.0
    added: list[tuple[int, int]] = []
    next_id = len(live)
    for _, a, b in pairs:
        if new_pairs is not None and len(added) >= new_pairs:
            break
        ia, ib = where.get(a), where.get(b)
        if ia is not None and ia == ib:
            continue
        sa = live[ia] if ia is not None else [a]
        sb = live[ib] if ib is not None else [b]
        merged = sorted({*sa, *sb})
        if float(problem.load[merged].sum()) >= max_partition_load:
            continue
        pins = {pin_of[i] for i in (ia, ib) if i is not None and i in pin_of}
        if len(pins) > 1:
            continue  # both halves already pinned to different nodes this round
        if pins:
            node = pins.pop()
        elif (ia is None) != (ib is None):  # case 2: go where the existing set lives
            node = _least_loaded(np.unique(asg[sa if ia is not None else sb]), loads)
        else:  # cases 1 and 3: the less loaded of the two nodes
            node = _least_loaded(np.unique(asg[[a, b]]), loads)
        if problem.removing[node]:
            continue
        moving = [g for g in merged if asg[g] != node and g not in moved]
        step_cost = float(problem.cost[moving].sum())
        if pair_budget is not None and len(moved) + len(moving) > pair_budget:
            continue
        if max_cost is not None and cost + step_cost > max_cost:
            continue
        arriving = float(problem.load[moving].sum())
        if (
            load_cap is not None
            and moving
            and loads[node] + arriving > load_cap * problem.capacity[node]
        ):
            continue
        for g in moving:
            loads[asg[g]] -= problem.load[g]
        loads[node] += arriving
        moved.update(moving)
        cost += step_cost
        for i in (ia, ib):
            if i is not None:
                del live[i]
                pin_of.pop(i, None)
        live[next_id] = merged
        pin_of[next_id] = node
        where.update((g, next_id) for g in merged)
        next_id += 1
        added.append((a, b))
    return _Round(
        list(live.values()),
        [(live[i][0], n) for i, n in pin_of.items()],
        added,
    )


def _least_loaded(nodes: np.ndarray, loads: np.ndarray) -> int:
    return int(nodes[np.argmin(loads[nodes])])


def _together(problem: KeyGroupProblem, pairs: Sequence[tuple[float, int, int]]) -> list[list[int]]:
    """Qualifying pairs already on one node (``protect_existing``)."""
    asg = problem.assignment
    return [[a, b] for _, a, b in pairs if asg[a] == asg[b] and asg[a] >= 0]


def _pair_limits(
    mean: float,
    *,
    new_pairs: int | None,
    max_migrations: int | None,
    max_cost: float | None,
    pair_share: float,
    max_load_distance_pct: float,
) -> tuple[int | None, float | None, float | None]:
    """Step 3's limits: key groups and cost the pins may move, and the node load cap.

    With one new pair a round (``new_pairs`` set) the pins share the whole budget and
    have no load cap; with ``new_pairs=None`` they get ``pair_share`` of it and may not
    raise a node above maxLoadDistance.
    """
    if new_pairs is not None:
        return max_migrations, max_cost, None
    budget = None if max_migrations is None else int(pair_share * max_migrations)
    cost = None if max_cost is None else max_cost * pair_share
    return budget, cost, (1.0 + max_load_distance_pct / 100.0) * mean


def albic(
    problem: KeyGroupProblem,
    *,
    collocated: Sequence[Sequence[int]] = (),
    max_migrations: int | None = None,
    max_cost: float | None = None,
    score_factor: float = SCORE_FACTOR.default,
    max_load_distance_pct: float = SPREAD.default,
    max_partition_load_pct: float = MAX_PARTITION_LOAD.default,
    partition_load_step_pct: float = 5.0,
    max_resolves: int = 5,
    new_pairs: int | None = 1,
    pair_share: float = PAIR_SHARE.default,
    protect_existing: bool = True,
    time_limit_s: float = TIME_LIMIT.default,
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
        New collocation constraints per round: 1 is the paper's step 3;
        ``None`` adds pairs, highest rate first, while their moves fit in
        ``pair_share`` of the migration budget and keep every node within
        maxLoadDistance of its share of the load.
    pair_share
        With ``new_pairs=None``: the share of ``max_migrations`` (and of
        ``max_cost``) the new pairs' moves may take; the MILP balances with the rest.
        The default is the ``albic`` balancer's setting (0: it then adds one pair).
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

    Examples
    --------
    The problem of :func:`~streamscale.planning.balancing.cola.cola`'s example: both pairs
    qualify (rate 10 > 10 sent / 2 downstream key groups). The round pins the first pair to
    node ``a`` (one move, ``down/0``), and the MILP restores the balance with the second
    move, ``down/1`` to ``b``, which collocates the other pair as well. The next round keeps
    both pairs on one node each (``protect_existing``) and moves nothing.

    >>> from streamscale.planning.balancing.keygroups import KeyGroupProblem
    >>> from streamscale.planning.balancing.metrics import collocation_factor, load_distance
    >>> groups = ["up/0", "up/1", "down/0", "down/1", "x/0", "x/1"]
    >>> p = KeyGroupProblem.build(groups, ["a", "b"], [0.25] * 4 + [2.0, 2.0],
    ...                           [0, 1, 1, 0, 0, 1], traffic=[(0, 2, 10.0), (1, 3, 10.0)])
    >>> r = albic(p, max_migrations=2, seed=0)
    >>> r.assignment.tolist(), r.collocated, load_distance(p, r.assignment)
    ([0, 1, 0, 1, 0, 1], ((0, 2),), 0.0)
    >>> nxt = albic(p.replace(assignment=r.assignment), collocated=r.collocated,
    ...             max_migrations=2, seed=0)
    >>> nxt.assignment.tolist(), nxt.collocated, collocation_factor(p, nxt.assignment)
    ([0, 1, 0, 1, 0, 1], ((0, 2), (1, 3)), 100.0)
    """
    if not 0.0 <= pair_share <= 1.0:
        raise ValueError(f"pair_share must be in [0, 1], got {pair_share}")
    mean = problem.mean_load
    pairs = collocation_candidates(problem, score_factor=score_factor)
    if protect_existing:
        collocated = [*map(list, collocated), *_together(problem, pairs)]
    pair_budget, pair_cost, load_cap = _pair_limits(
        mean, new_pairs=new_pairs, max_migrations=max_migrations, max_cost=max_cost,
        pair_share=pair_share, max_load_distance_pct=max_load_distance_pct,
    )  # fmt: skip
    mpl = max_partition_load_pct
    result: BalanceResult | None = None
    resolves = 0
    added: list[tuple[int, int]] = []
    while True:
        sets = split_sets(
            problem, collocated, max_partition_load=mpl / 100 * mean, max_cost=max_cost, seed=seed
        )
        step = _improve(
            problem, pairs, sets, max_partition_load=mpl / 100 * mean, new_pairs=new_pairs,
            pair_budget=pair_budget, max_cost=pair_cost, load_cap=load_cap,
        )  # fmt: skip
        added = step.added
        result = solve_milp(
            problem, max_migrations=max_migrations, max_cost=max_cost, collocate=step.sets,
            pinned=step.pinned, time_limit_s=time_limit_s,
            deterministic_limit=deterministic_limit, seed=seed,
        )  # fmt: skip
        dist = load_distance_pct(problem, result.assignment)
        if dist <= max_load_distance_pct or resolves >= max_resolves or not step.sets:
            break
        resolves += 1
        mpl = max(mpl - partition_load_step_pct, 0.0)
    return _round_result(problem, result, resolves=resolves, added=len(added), mpl=mpl)


def _round_result(
    problem: KeyGroupProblem, result: BalanceResult, *, resolves: int, added: int, mpl: float
) -> BalanceResult:
    """The round's MILP answer as ALBIC's, with the round's figures in ``extra``."""
    extra = {
        **result.extra,
        "collocation_pct": collocation_factor(problem, result.assignment),
        "resolves": float(resolves),
        "new_pairs": float(added),
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
