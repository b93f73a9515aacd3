"""Intra-instance shard balancing (paper 000, Elasticutor, §3.1).

An instance's ``Z`` shards map to its ``k`` tasks through a routing
table. The imbalance is δ = max task load / mean task load. Balancing runs in
rounds: each round considers moving one shard from the most loaded task to the
least loaded one and applies the move that lowers the load of that pair's
larger side the most; it stops when δ ≤ θ or no move helps. Each move migrates
the shard's state, so the procedure aims at few moves: shards whose task
disappeared (``k`` decreased) are placed first, heaviest first, on the least
loaded task, and new tasks (``k`` increased) start empty and receive shards only
through rounds.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.errors import ModelError
from streamscale.settings import Setting

__all__ = ["THETA", "BalanceResult", "balance_shards", "imbalance", "task_loads"]

#: θ, declared once: the Elasticutor steps' setting and every balancer's default.
THETA = Setting("theta", float, 1.2, "shard-balancing threshold on δ = max/mean task load", low=1.0)

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class BalanceResult:
    """Outcome of :func:`balance_shards`.

    Attributes
    ----------
    tasks
        New shard → task table (task indices ``0 … k−1``).
    moves
        ``(shard, old_task, new_task)`` for every shard whose task changed;
        ``old_task`` is ``None`` for a shard whose task was removed or unset.
    delta_before
        δ once orphaned shards are placed, before any balancing round.
    delta_after
        δ of ``tasks``.
    rounds
        Balancing rounds applied.
    """

    tasks: tuple[int, ...]
    moves: tuple[tuple[int, int | None, int], ...]
    delta_before: float
    delta_after: float
    rounds: int


def task_loads(loads: Sequence[float] | np.ndarray, tasks: Sequence[int], k: int) -> np.ndarray:
    """Load of each of ``k`` tasks given shard loads and a shard → task table."""
    idx = np.asarray(tasks, dtype=np.int64)
    w = np.asarray(loads, dtype=float)
    # bincount of an empty input is integer-typed; later in-place adds must stay float
    return np.bincount(idx, weights=w, minlength=k).astype(float)


def imbalance(per_task: Sequence[float] | np.ndarray) -> float:
    """δ = max / mean task load; 1.0 when nothing is loaded."""
    a = np.asarray(per_task, dtype=float)
    mean = float(a.mean()) if a.size else 0.0
    return float(a.max()) / mean if mean > _EPS else 1.0


def balance_shards(
    loads: Sequence[float] | np.ndarray,
    current: Sequence[int | None],
    k: int,
    *,
    theta: float = THETA.default,
    max_rounds: int | None = None,
) -> BalanceResult:
    """Rebalance one instance's shards over ``k`` tasks (paper 000, §3.1).

    Parameters
    ----------
    loads
        Load of each shard (cores, or any additive cost).
    current
        Current task of each shard; ``None`` or an index ``≥ k`` marks a shard
        whose task no longer exists.
    k
        Number of tasks after the change.
    theta
        Target imbalance θ; rounds stop once δ ≤ θ.
    max_rounds
        Safety bound on rounds (default ``4·Z``).

    Returns
    -------
    BalanceResult
        Never has a higher δ than ``delta_before``. A round is accepted only if
        it strictly lowers the larger of the two loads it touches, so when several
        tasks tie at the maximum the rounds keep going (δ drops once the last of
        them is relieved) and the procedure always terminates.

    Examples
    --------
    Task 2 is gone: its shard (load 2) goes first to the least loaded task, 1 (loads 5 and 3,
    δ = 5/4 = 1.25); one round then moves shard 1 from task 0 to task 1 (4 and 4).

    >>> r = balance_shards([4.0, 1.0, 1.0, 2.0], [0, 0, 1, 2], 2, theta=1.2)
    >>> r.tasks, r.moves, r.delta_before, r.delta_after
    ((0, 1, 1, 1), ((1, 0, 1), (3, None, 1)), 1.25, 1.0)
    """
    w = np.asarray(loads, dtype=float)
    z = w.size
    if k < 1:
        raise ModelError(f"need at least one task, got {k}", item="shard balance")
    if len(current) != z:
        raise ModelError(f"{len(current)} table entries for {z} shards", item="shard balance")
    if z and (not np.all(np.isfinite(w)) or w.min() < 0):
        raise ModelError("shard loads must be finite and >= 0", item="shard balance")
    orig = [t if t is not None and 0 <= t < k else None for t in current]
    wl: list[float] = w.tolist()
    assign = [-1 if t is None else int(t) for t in orig]
    idx = np.asarray(assign, dtype=np.int64)
    per_arr = task_loads(w[idx >= 0], idx[idx >= 0], k)
    per: list[float] = per_arr.tolist()
    # the least loaded task, lowest index first (np.argmin's choice), as a heap
    low = [(v, t) for t, v in enumerate(per)]
    heapq.heapify(low)
    for s in sorted((s for s in range(z) if assign[s] < 0), key=lambda s: (-wl[s], s)):
        _, t = heapq.heappop(low)
        assign[s] = t
        per[t] += wl[s]
        heapq.heappush(low, (per[t], t))
    per_arr = np.asarray(per)
    delta0 = imbalance(per_arr)
    rounds = 0
    limit = 4 * z if max_rounds is None else max_rounds
    # moves keep the total, so δ > θ  ⇔  max > θ·mean with a fixed mean
    bound = theta * float(per_arr.mean())
    if rounds < limit and delta0 > theta and max(per) > bound + _EPS:
        rounds = _rounds(wl, assign, per, limit, bound)
    moves = tuple((s, orig[s], assign[s]) for s in range(z) if orig[s] != assign[s])
    return BalanceResult(
        tasks=tuple(assign),
        moves=moves,
        delta_before=delta0,
        delta_after=imbalance(np.asarray(per)),
        rounds=rounds,
    )


def _rounds(wl: list[float], assign: list[int], per: list[float], limit: int, bound: float) -> int:
    """Balancing rounds of :func:`balance_shards` in place; returns how many were applied.

    Each round moves, from the most loaded task to the least loaded one (lowest index
    first on ties, as ``np.argmax``/``np.argmin``), the shard minimising
    ``max(P_src − w, P_dst + w)``, the lowest shard index among equal values. That
    function of ``w`` falls while ``P_src − w > P_dst + w`` and rises after, so with each
    task's shards kept sorted by ``(w, shard)`` the best shard is found by bisection next
    to the crossing instead of by a scan of the task's shards: O(log Z + log k) per round
    instead of O(Z + k), the same floating-point values and choices.
    """
    k = len(per)
    tasks: list[list[tuple[float, int]]] = [[] for _ in range(k)]
    for e in sorted(zip(wl, range(len(wl)), strict=True)):  # by (w, shard), no key
        tasks[assign[e[1]]].append(e)
    # lazy heaps: an entry is current while its value equals the task's load
    high = [(-v, t) for t, v in enumerate(per)]
    low = [(v, t) for t, v in enumerate(per)]
    heapq.heapify(high)
    heapq.heapify(low)
    rounds = 0
    while True:
        while -high[0][0] != per[high[0][1]]:
            heapq.heappop(high)
        while low[0][0] != per[low[0][1]]:
            heapq.heappop(low)
        src, dst = high[0][1], low[0][1]
        p_src, p_dst = per[src], per[dst]
        if not (rounds < limit and p_src > bound + _EPS):
            return rounds
        cand = tasks[src]
        if src == dst or not cand:
            return rounds
        # first shard (by weight) where moving it no longer lowers src below dst's new load
        cross = bisect.bisect_left(cand, True, key=lambda e: p_src - e[0] <= p_dst + e[0])
        best = min(
            (p_src - cand[cross - 1][0]) if cross > 0 else math.inf,
            (p_dst + cand[cross][0]) if cross < len(cand) else math.inf,
        )
        if not best < p_src - _EPS:
            return rounds
        s = _lowest_at(cand, cross, best, p_src, p_dst)
        ws = wl[s]
        del cand[bisect.bisect_left(cand, (ws, s))]
        bisect.insort(tasks[dst], (ws, s))
        assign[s] = dst
        per[src] -= ws
        per[dst] += ws
        heapq.heappush(high, (-per[src], src))
        heapq.heappush(high, (-per[dst], dst))
        heapq.heappush(low, (per[src], src))
        heapq.heappush(low, (per[dst], dst))
        rounds += 1


def _lowest_at(
    cand: list[tuple[float, int]], cross: int, best: float, p_src: float, p_dst: float
) -> int:
    """Lowest shard index among ``cand`` (sorted by ``(w, shard)``) whose move reaches
    ``best``: equal values form one run of weights on each side of ``cross``, and the
    first entry of each weight holds its lowest shard index."""
    found = []
    i = cross - 1
    while i >= 0 and p_src - cand[i][0] == best:
        g = bisect.bisect_left(cand, (cand[i][0], -1))
        found.append(cand[g][1])
        i = g - 1
    i = cross
    while i < len(cand) and p_dst + cand[i][0] == best:
        found.append(cand[i][1])
        i = bisect.bisect_left(cand, (cand[i][0], math.inf))
    return min(found)
