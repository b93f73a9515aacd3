"""Movable items (key groups or collocated sets) and the greedy fallback balancer.

The greedy balancer is what :func:`~streamscale.planning.balancing.milp.solve_milp`
returns when the solver finds no solution within its time limit (paper 003,
§4.3.1 asks for a bounded solving time; the fallback keeps the adaptation
period's deadline). It repeatedly moves the best-fitting item from the most
loaded node (or a node of N_r) to the least loaded node of N_keep, within the
migration budget, while that lowers the load distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.errors import ModelError
from streamscale.planning.balancing.keygroups import KeyGroupProblem

__all__ = ["Budget", "Items", "greedy_balance", "make_items"]

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class Budget:
    """Per-round migration budget: a count (maxMigrations) and/or a cost (maxMigrCost)."""

    max_migrations: int | None = None
    max_cost: float | None = None

    def allows(self, count: float, cost: float) -> bool:
        if self.max_migrations is not None and count > self.max_migrations:
            return False
        return not (self.max_cost is not None and cost > self.max_cost * (1 + 1e-9) + _EPS)


@dataclass(frozen=True, eq=False)
class Items:
    """Key groups merged into indivisible items (collocated sets move as one unit)."""

    members: tuple[np.ndarray, ...]
    load: np.ndarray
    current: np.ndarray  # node index, or -1 when the members sit on several nodes
    pinned: np.ndarray  # node index the item must go to, or -1

    def move_count(self, problem: KeyGroupProblem, i: int, node: int) -> int:
        return int((problem.assignment[self.members[i]] != node).sum())

    def move_cost(self, problem: KeyGroupProblem, i: int, node: int) -> float:
        m = self.members[i]
        return float(problem.cost[m][problem.assignment[m] != node].sum())

    def expand(self, problem: KeyGroupProblem, item_node: np.ndarray) -> np.ndarray:
        out = np.array(problem.assignment, copy=True)
        for i, m in enumerate(self.members):
            out[m] = item_node[i]
        return out


def make_items(
    problem: KeyGroupProblem,
    collocate: Sequence[Sequence[int]] = (),
    pinned: Sequence[tuple[int, int]] = (),
) -> Items:
    """Merge intersecting collocation sets (union–find) into items.

    ``pinned`` holds ``(key group, node)`` pairs: the item containing the key
    group must be placed on that node (ALBIC's new constraint, §4.3.2 step 3).
    """
    parent = list(range(problem.k))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for s in collocate:
        s = [int(v) for v in s]
        for v in s:
            if not 0 <= v < problem.k:
                raise ModelError(f"unknown key group index {v}", item="collocate")
        for v in s[1:]:
            ra, rb = find(s[0]), find(v)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots: dict[int, list[int]] = {}
    for v in range(problem.k):
        roots.setdefault(find(v), []).append(v)
    members = tuple(np.array(v, dtype=np.int64) for v in roots.values())
    index = {r: i for i, r in enumerate(roots)}
    load = np.array([problem.load[m].sum() for m in members])
    cur = np.array(
        [
            int(problem.assignment[m[0]])
            if (problem.assignment[m] == problem.assignment[m[0]]).all()
            else -1
            for m in members
        ],
        dtype=np.int64,
    )
    pin = np.full(len(members), -1, dtype=np.int64)
    for g, node in pinned:
        i = index[find(int(g))]
        if pin[i] >= 0 and pin[i] != node:
            raise ModelError("pinned to two nodes", item=problem.groups[int(g)])
        if problem.removing[node] and cur[i] != node:
            raise ModelError("cannot pin into a node marked for removal", item=problem.nodes[node])
        pin[i] = node
    return Items(members, load, cur, pin)


def greedy_balance(
    problem: KeyGroupProblem,
    items: Items,
    budget: Budget,
) -> np.ndarray | None:
    """Greedy best-fit balancing over ``items``; returns an item → node array.

    Returns ``None`` when the pinned/split items alone exceed the budget.
    """
    n_items = len(items.members)
    node_of = np.array(items.current, copy=True)
    target = problem.capacity * problem.mean_load
    loads = problem.node_loads().astype(float)
    count, cost = 0, 0.0
    keep = problem.keep

    def place(i: int, dst: int) -> None:
        nonlocal count, cost
        count += items.move_count(problem, i, dst)
        cost += items.move_cost(problem, i, dst)
        for g in items.members[i]:
            loads[problem.assignment[g]] -= problem.load[g]
        loads[dst] += items.load[i]
        node_of[i] = dst

    # Items that must be made whole (split or pinned) first: they are constraints, not options.
    for i in range(n_items):
        if items.pinned[i] >= 0 or node_of[i] < 0:
            if items.pinned[i] >= 0:
                dst = int(items.pinned[i])
            else:
                homes = np.unique(problem.assignment[items.members[i]])
                homes = homes[keep[homes]]
                cands = homes if homes.size else np.flatnonzero(keep)
                dst = int(cands[np.argmin(loads[cands] - target[cands])])
            if not budget.allows(
                count + items.move_count(problem, i, dst), cost + items.move_cost(problem, i, dst)
            ):
                return None
            if node_of[i] != dst:
                place(i, dst)
    frozen = (items.pinned >= 0) | (items.current < 0)

    def distance() -> float:
        dev = loads - target
        return max(float(dev.max()), float((-dev[keep]).max()), 0.0)

    res_used = None
    if problem.resources is not None:
        res_used = np.zeros((problem.n, problem.resources.shape[1]))
        full = items.expand(problem, node_of) if (node_of >= 0).all() else problem.assignment
        np.add.at(res_used, full, problem.resources)
    keep_idx = np.flatnonzero(keep)
    for _ in range(problem.k + 1):
        dev = loads - target
        # N_r nodes are drained first-class: all of their load is excess.
        excess = np.where(keep, dev, np.where(loads > _EPS, np.inf, -np.inf))
        d = int(np.argmax(excess))
        r = int(keep_idx[np.argmin(dev[keep_idx])])
        if d == r or excess[d] <= 0:
            break
        now = distance()
        best, best_score = -1, now - _EPS if keep[d] else now + _EPS
        for i in np.flatnonzero((node_of == d) & ~frozen):
            c1 = items.move_count(problem, int(i), r)
            c2 = items.move_cost(problem, int(i), r)
            if not budget.allows(count + c1, cost + c2):
                continue
            ld = items.load[i]
            new_d = abs(dev[d] - ld) if keep[d] else max(dev[d] - ld, 0.0)
            score = max(new_d, abs(dev[r] + ld))
            if res_used is not None and problem.resource_caps is not None:
                res = problem.resources[items.members[i]].sum(axis=0)  # type: ignore[index]
                if (res_used[r] + res > problem.resource_caps[r] + _EPS).any():
                    continue
            if score < best_score:
                best, best_score = int(i), score
        if best < 0:
            break
        if res_used is not None:
            res = problem.resources[items.members[best]].sum(axis=0)  # type: ignore[index]
            res_used[d] -= res
            res_used[r] += res
        place(best, r)
    return node_of
