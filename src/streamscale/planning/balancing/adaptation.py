"""The integrative adaptation framework of ALBIC (paper 003, §4.1, Algorithm 1).

Each period: (1) release the nodes of N_r that no longer hold a key group;
(2) compute a tentative allocation (balancing and collocation) without
deploying it; (3) decide scaling from the tentative allocation — scale out
only when it still leaves a node overloaded, scale in only when the remaining
nodes can carry the load below the overload threshold; (4) recompute the
allocation with that decision. The migration budget per period bounds the
work, so nodes marked for removal drain over several periods.

The scaling rule itself is not the paper's contribution (§4.2 defers to
existing techniques); here it is the usual utilisation rule: the number of
nodes needed is ⌈total load ÷ (target utilisation × node capacity)⌉.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem

__all__ = ["AdaptResult", "adapt", "drop_nodes"]

Balancer = Callable[[KeyGroupProblem], BalanceResult]


@dataclass(frozen=True, eq=False)
class AdaptResult:
    """One period's outcome: the final problem (nodes, marks) and its allocation."""

    problem: KeyGroupProblem
    result: BalanceResult
    tentative: BalanceResult
    released: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    marked: tuple[str, ...] = ()


def drop_nodes(problem: KeyGroupProblem, names: Sequence[str]) -> KeyGroupProblem:
    """``problem`` without the (empty) nodes ``names``; key group indices are unchanged."""
    gone = set(names)
    keep = [j for j, n in enumerate(problem.nodes) if n not in gone]
    remap = np.full(problem.n, -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    asg = remap[problem.assignment]
    if (asg < 0).any():
        raise ValueError("cannot drop a node that still holds key groups")
    caps = problem.resource_caps[keep] if problem.resource_caps is not None else None
    return problem.replace(
        nodes=[problem.nodes[j] for j in keep],
        assignment=asg,
        capacity=problem.capacity[keep],
        removing=[problem.nodes[j] for j in keep if problem.removing[j]],
        resource_caps=caps,
    )


def _add_nodes(problem: KeyGroupProblem, names: Sequence[str]) -> KeyGroupProblem:
    caps = problem.resource_caps
    if caps is not None:
        caps = np.vstack([caps, np.repeat(caps.mean(axis=0, keepdims=True), len(names), axis=0)])
    return problem.replace(
        nodes=[*problem.nodes, *names],
        capacity=np.r_[problem.capacity, np.ones(len(names))],
        resource_caps=caps,
    )


def adapt(
    problem: KeyGroupProblem,
    balance: Balancer,
    *,
    node_capacity: float = 1.0,
    target_utilization: float = 0.7,
    overload: float = 0.9,
    spare_nodes: Sequence[str] = (),
) -> AdaptResult:
    """Run one period of Algorithm 1 with ``balance`` (e.g. MILP or ALBIC) as the allocator.

    Parameters
    ----------
    problem
        The current key groups, nodes and marks (N_r).
    balance
        The allocation planner: problem → result (closes over its budget).
    node_capacity
        Load a node of capacity weight 1 can carry at 100 % (same unit as the loads).
    target_utilization, overload
        The scaling rule's target, and the utilisation above which a node is overloaded.
    spare_nodes
        Names of nodes that may be added on scale-out, in order.

    Examples
    --------
    Four key groups of load 0.2 on three nodes need ⌈0.8 / 0.7⌉ = 2 nodes: the first period
    marks ``b`` for removal and Flux drains it; the next period releases it.

    >>> from functools import partial
    >>> from streamscale.planning.balancing.flux import flux
    >>> from streamscale.planning.balancing.keygroups import KeyGroupProblem
    >>> p = KeyGroupProblem.build(["g0", "g1", "g2", "g3"], ["a", "b", "c"], [0.2] * 4,
    ...                           [0, 0, 1, 2])
    >>> one = adapt(p, partial(flux, max_migrations=2), target_utilization=0.7)
    >>> one.marked, one.result.assignment.tolist()
    (('b',), [0, 0, 2, 2])
    >>> two = adapt(one.problem.replace(assignment=one.result.assignment),
    ...             partial(flux, max_migrations=2), target_utilization=0.7)
    >>> two.released, two.problem.nodes, two.result.assignment.tolist()
    (('b',), ('a', 'c'), [0, 0, 1, 1])
    """
    empty = [
        problem.nodes[j]
        for j in np.flatnonzero(problem.removing)
        if not (problem.assignment == j).any()
    ]
    if empty and len(empty) < problem.n:
        problem = drop_nodes(problem, empty)
    tentative = balance(problem)
    loads = problem.node_loads(tentative.assignment)
    keep = problem.keep
    # capacity weights are relative to the mean of N_keep; absolute capacity per node:
    cap = problem.capacity * node_capacity
    util = loads[keep] / cap[keep]
    total = float(problem.load.sum())
    needed = max(1, math.ceil(total / (target_utilization * node_capacity)))
    n_keep = int(keep.sum())
    added: list[str] = []
    marked: list[str] = []
    if util.size and util.max() > overload and needed > n_keep:
        fresh = [s for s in spare_nodes if s not in problem.nodes][: needed - n_keep]
        if fresh:
            problem = _add_nodes(problem, fresh)
            added = fresh
    elif needed < n_keep and total / ((n_keep - 1) * node_capacity) <= overload:
        # Scale in only as far as the remaining nodes stay under the overload threshold.
        fit = max(needed, math.ceil(total / (overload * node_capacity)))
        order = [int(j) for j in np.flatnonzero(keep)[np.argsort(loads[keep], kind="stable")]]
        marked = [problem.nodes[j] for j in order[: max(0, n_keep - fit)]]
        if marked:
            removing = [problem.nodes[j] for j in np.flatnonzero(problem.removing)] + marked
            problem = problem.replace(removing=removing)
    final = balance(problem) if (added or marked) else tentative
    return AdaptResult(problem, final, tentative, tuple(empty), tuple(added), tuple(marked))
