"""Flux: adaptive repartitioning by pairwise moves (Shah et al., ICDE 2003).

The baseline of paper 003, §5.1–5.2 (docs/algorithms.md, "003 — ALBIC"): sort
the nodes by load; move the largest suitable key group from the most loaded
node to the least loaded one, then from the second to the second-last, and so
on; repeat within the per-round migration limit. A key group is *suitable*
when moving it lowers the larger of the pair's deviations from the mean (it
cannot overshoot the receiver past where the donor was). Nodes of N_r count
as the most loaded (all of their load is excess), so Flux also drains them.
"""

from __future__ import annotations

import numpy as np

from streamscale.planning.balancing.greedy import Budget
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem

__all__ = ["flux"]

_EPS = 1e-12


def flux(
    problem: KeyGroupProblem,
    *,
    max_migrations: int | None = None,
    max_cost: float | None = None,
) -> BalanceResult:
    """Flux's pairwise largest-suitable-move rebalancing within a migration budget.

    The baseline of paper 003, §5.2.1 (Shah et al., ICDE 2003).

    Parameters
    ----------
    problem
        Key groups, nodes and the current allocation.
    max_migrations, max_cost
        Per-round budget (maxMigrations, as the paper runs Flux, or maxMigrCost).

    Returns
    -------
    BalanceResult
        ``method="flux"``.

    Examples
    --------
    Node ``a`` carries 9, node ``b`` 1 (mean 5): the largest suitable key group of ``a`` is
    the 4, and moving it gives 5 and 5.

    >>> from streamscale.planning.balancing.keygroups import KeyGroupProblem
    >>> p = KeyGroupProblem.build(["g0", "g1", "g2", "g3"], ["a", "b"],
    ...                           [4.0, 3.0, 2.0, 1.0], [0, 0, 0, 1])
    >>> r = flux(p, max_migrations=1)
    >>> r.assignment.tolist(), p.node_loads(r.assignment).tolist()
    ([1, 0, 0, 1], [5.0, 5.0])
    """
    budget = Budget(max_migrations, max_cost)
    asg = np.array(problem.assignment, copy=True)
    loads = problem.node_loads().astype(float)
    target = problem.capacity * problem.mean_load
    keep = problem.keep
    count, cost = 0, 0.0
    for _ in range(problem.k + 1):
        dev = loads - target
        excess = np.where(keep, dev, np.where(loads > _EPS, np.inf, -np.inf))
        order = np.argsort(-excess, kind="stable")
        donors = [int(n) for n in order if excess[n] > _EPS]
        receivers = [int(n) for n in order[::-1] if keep[n] and dev[n] < -_EPS]
        moved = False
        for d, r in zip(donors, receivers, strict=False):
            if d == r or not excess[d] > dev[r]:
                break
            worst = max(abs(dev[d]) if keep[d] else np.inf, abs(dev[r]))
            best = -1
            for k in np.flatnonzero(asg == d):
                lk = problem.load[k]
                after = max(abs(dev[d] - lk) if keep[d] else 0.0, abs(dev[r] + lk))
                if after >= worst - _EPS:
                    continue
                if not budget.allows(count + 1, cost + problem.cost[k]):
                    continue
                if best < 0 or lk > problem.load[best]:
                    best = int(k)
            if best < 0:
                continue
            asg[best] = r
            loads[d] -= problem.load[best]
            loads[r] += problem.load[best]
            dev[d] -= problem.load[best]
            dev[r] += problem.load[best]
            count += 1
            cost += float(problem.cost[best])
            moved = True
        if not moved:
            break
    return BalanceResult(asg, "flux", "done")
