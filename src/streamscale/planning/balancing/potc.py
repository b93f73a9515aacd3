"""Power of Two Choices with key splitting (Nasir et al., ICDE 2015), as paper 003 models it.

Paper 003, §2 and §5.2: every key group has two candidate instances; senders
send each tuple to the less loaded of the two, so a key group's load (and
state) splits over both, and the two halves of the state must be merged
periodically. That merge is a continuous overhead and cannot be balanced: it
runs where the key group's state is merged (its primary node). Here the split
is the water-filling the senders converge to, processed from the largest key
group down, and the merge costs ``merge_factor`` × the load served by the
secondary node, charged to the primary node.

**Assumption**: paper 003 says only that merging runs every minute, that the
state to merge varies over time and between nodes, and that it is a
continuous overhead that cannot be balanced; it gives no figure for its cost.
The default ``merge_factor`` 0.1 (merging a split-off share costs a tenth of
processing it) is ours; ``streamscale reproduce albic`` reports PoTC's load
distance over a sweep of it (0, 0.05, 0.1, 0.2, 0.5).
"""

from __future__ import annotations

import numpy as np

from streamscale.planning.balancing.keygroup_settings import MERGE_FACTOR
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem

__all__ = ["potc", "potc_loads"]


def potc_loads(
    problem: KeyGroupProblem, *, merge_factor: float = MERGE_FACTOR.default, seed: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Node loads under PoTC and the secondary node of each key group.

    The primary node is the key group's current node; the secondary is drawn
    (seeded) among the other nodes of N_keep.
    """
    rng = np.random.default_rng(seed)
    keep = np.flatnonzero(problem.keep)
    second = np.empty(problem.k, dtype=np.int64)
    for k in range(problem.k):
        others = keep[keep != problem.assignment[k]]
        second[k] = rng.choice(others) if others.size else problem.assignment[k]
    loads = np.zeros(problem.n)
    for k in np.argsort(-problem.load, kind="stable"):
        a, b, lk = int(problem.assignment[k]), int(second[k]), float(problem.load[k])
        if a == b:
            loads[a] += lk
            continue
        # Senders pick the less loaded candidate tuple by tuple: the two fill to a level.
        wa, wb = problem.capacity[a], problem.capacity[b]
        level = (loads[a] + loads[b] + lk) / (wa + wb)
        on_b = float(np.clip(level * wb - loads[b], 0.0, lk))
        if not problem.keep[a]:
            on_b = lk
        loads[a] += lk - on_b + merge_factor * on_b
        loads[b] += on_b
    return loads, second


def potc(
    problem: KeyGroupProblem, *, merge_factor: float = MERGE_FACTOR.default, seed: int | None = None
) -> BalanceResult:
    """PoTC: no state migration, each key group split over two nodes plus a merge overhead.

    The baseline of paper 003, §2.2 and §5.2.1 (Nasir et al., ICDE 2015).

    Returns
    -------
    BalanceResult
        ``assignment`` is each key group's primary node (where its state is
        merged) — unchanged; ``extra`` holds the load distance under PoTC's
        own node loads (``load_distance_pct``) and the merge overhead.

    Examples
    --------
    With two nodes each key group's second choice is the other node. Without merge cost the
    senders fill both to the same level, 5 and 5; with ``merge_factor=0.1`` the primary node
    also pays a tenth of what its secondary served: 0.2 + 0.16 + 0.108 for the groups on
    ``a`` (largest first) and 0.0446 for the one on ``b``.

    >>> from streamscale.planning.balancing.keygroups import KeyGroupProblem
    >>> p = KeyGroupProblem.build(["g0", "g1", "g2", "g3"], ["a", "b"],
    ...                           [4.0, 3.0, 2.0, 1.0], [0, 0, 0, 1])
    >>> potc_loads(p, merge_factor=0.0, seed=0)[0].tolist()
    [5.0, 5.0]
    >>> r = potc(p, seed=0)
    >>> r.assignment.tolist(), round(r.extra["merge_overhead"], 4)
    ([0, 0, 0, 1], 0.5126)
    """
    loads, _ = potc_loads(problem, merge_factor=merge_factor, seed=seed)
    total = float(loads.sum())
    mean = total / problem.capacity[problem.keep].sum()
    dev = loads - problem.capacity * mean
    dist = max(float(dev.max()), float((-dev[problem.keep]).max()), 0.0)
    extra = {
        "load_distance_pct": 0.0 if mean <= 0 else float(100.0 * dist / mean),
        "merge_overhead": total - float(problem.load.sum()),
    }
    return BalanceResult(np.array(problem.assignment, copy=True), "potc", "done", extra=extra)
