"""Intra-executor shard balancing (paper 000, Elasticutor, §3.1).

An elastic executor's ``Z`` shards map to its ``k`` tasks through a routing
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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.errors import ModelError

__all__ = ["BalanceResult", "balance_shards", "imbalance", "task_loads"]

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
    theta: float = 1.2,
    max_rounds: int | None = None,
) -> BalanceResult:
    """Rebalance one executor's shards over ``k`` tasks (paper 000, §3.1).

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
    assign = np.array([-1 if t is None else t for t in orig], dtype=np.int64)
    per = task_loads(w[assign >= 0], assign[assign >= 0], k)
    for s in sorted(np.flatnonzero(assign < 0), key=lambda s: (-w[s], s)):
        t = int(np.argmin(per))
        assign[s] = t
        per[t] += w[s]
    delta0 = imbalance(per)
    rounds = 0
    limit = 4 * z if max_rounds is None else max_rounds
    # moves keep the total, so δ > θ  ⇔  max > θ·mean with a fixed mean
    bound = theta * float(per.mean())
    while rounds < limit and delta0 > theta and per.max() > bound + _EPS:
        src, dst = int(np.argmax(per)), int(np.argmin(per))
        cand = np.flatnonzero(assign == src)
        if src == dst or cand.size == 0:
            break
        after = np.maximum(per[src] - w[cand], per[dst] + w[cand])
        best = int(np.argmin(after))
        if not after[best] < per[src] - _EPS:
            break
        s = int(cand[best])
        assign[s] = dst
        per[src] -= w[s]
        per[dst] += w[s]
        rounds += 1
    final = assign.tolist()
    moves = tuple((s, orig[s], final[s]) for s in range(z) if orig[s] != final[s])
    return BalanceResult(
        tasks=tuple(assign.tolist()),
        moves=moves,
        delta_before=delta0,
        delta_after=imbalance(per),
        rounds=rounds,
    )
