"""Search state of GMA (paper 002, §IV.E): incremental node and link usage.

Holds, for one :class:`AllocatorProblem`, the CPU and link usage of every node
as operators are placed and removed, the phase-1 levels and phase-2 ranking of
candidate nodes, the operation and time budget, and the overload measure the
repair of :mod:`streamscale.planning.placement.gma` minimises. Everything is
indexed by position (operators and nodes in declaration order), never by name,
so results do not depend on names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from streamscale.planning.placement.elastic_allocator import AllocatorProblem, level_of

__all__ = ["EPS", "Objective", "SearchState"]

Objective = Literal["deviation", "utilization"]
EPS = 1e-9


class SearchState:
    """Usage bookkeeping shared by GMA's greedy passes, backtracking and repair."""

    def __init__(
        self,
        problem: AllocatorProblem,
        objective: Objective,
        max_operations: int,
        time_budget_s: float | None,
        clock: Callable[[], float] | None,
        thresholds: tuple[float, float],
    ) -> None:
        self.p = problem
        self.objective = objective
        self.max_ops = max_operations
        self.budget_s = time_budget_s
        self.clock = clock
        self.start = clock() if clock is not None else 0.0
        self.thresholds = thresholds
        nodes = problem.nodes
        self.n, self.m = len(nodes), len(problem.operators)
        self.cap = [x.cpu_capacity for x in nodes]
        self.link = [x.bandwidth_mbps for x in nodes]
        self.cpu_lim = [problem.d_cpu * c + EPS for c in self.cap]
        self.bw_lim = [problem.d_bw * b + EPS for b in self.link]
        self.c0 = [x.reserved_cpu for x in nodes]
        self.b0 = [x.reserved_bandwidth_mbps for x in nodes]
        self.cpu, self.bw = list(self.c0), list(self.b0)
        self.demand = [o.cpu for o in problem.operators]
        merged: list[dict[int, float]] = [{} for _ in range(self.m)]
        for f in problem.flows:
            a, b = problem.operator_index(f.src), problem.operator_index(f.dst)
            if a != b and f.mbps > 0:
                merged[a][b] = merged[a].get(b, 0.0) + f.mbps
                merged[b][a] = merged[b].get(a, 0.0) + f.mbps
        self.adj = [sorted(d.items()) for d in merged]
        mean_cap = sum(self.cap) / self.n
        mean_link = sum(self.link) / self.n
        weight = [
            self.demand[k] / mean_cap + sum(w for _, w in self.adj[k]) / mean_link
            for k in range(self.m)
        ]
        self.weight = weight
        self.order = sorted(range(self.m), key=lambda k: (-weight[k], k))
        self.mode = "balance"
        self.where = [-1] * self.m
        self.hosted = [0] * self.n
        self.ops = 0

        self.w_cpu, self.w_bw = [1.0] * self.n, [1.0] * self.n

    # -- bookkeeping -------------------------------------------------------
    def _traffic(self, k: int, j: int) -> dict[int, float]:
        """Link Mbit/s added per node if operator ``k`` goes to node ``j``."""
        extra: dict[int, float] = {}
        for o, w in self.adj[k]:
            p = self.where[o]
            if p >= 0 and p != j:
                extra[p] = extra.get(p, 0.0) + w
                extra[j] = extra.get(j, 0.0) + w
        return extra

    def _place(self, k: int, j: int) -> None:
        for p, w in self._traffic(k, j).items():
            self.bw[p] += w
        self.cpu[j] += self.demand[k]
        self.hosted[j] += 1
        self.where[k] = j

    def _unplace(self, k: int) -> None:
        j = self.where[k]
        self.where[k] = -1
        for p, w in self._traffic(k, j).items():
            self.bw[p] -= w
        self.cpu[j] -= self.demand[k]
        self.hosted[j] -= 1

    def _usage(self, j: int) -> float:
        return max(self.cpu[j] / self.cap[j], self.bw[j] / self.link[j])

    def _out_of_budget(self) -> bool:
        if self.ops >= self.max_ops:
            return True
        if self.clock is not None and self.budget_s is not None:
            return self.clock() - self.start >= self.budget_s
        return False

    # -- phase 1 + 2 for one operator ----------------------------------------
    def _candidates(self, k: int) -> list[int]:
        """Feasible nodes for operator ``k``, best first: (level, objective, index)."""
        cpu_f = [c / x for c, x in zip(self.cpu, self.cap, strict=True)]
        bw_f = [b / x for b, x in zip(self.bw, self.link, strict=True)]
        s1c, s2c = sum(cpu_f), sum(v * v for v in cpu_f)
        s1b, s2b = sum(bw_f), sum(v * v for v in bw_f)
        ranked: list[tuple[tuple[float, ...], int]] = []
        seen_empty: set[tuple[float, ...]] = set()
        for j in range(self.n):
            self.ops += 1
            if self.demand[k] > 0 and self.cpu[j] + self.demand[k] > self.cpu_lim[j]:
                continue
            extra = self._traffic(k, j)
            if any(w > 0 and self.bw[p] + w > self.bw_lim[p] for p, w in extra.items()):
                continue
            if self.hosted[j] == 0:
                # Two nodes alike in every figure and hosting nothing of ours are interchangeable.
                key = (self.cap[j], self.cpu[j], self.link[j], self.bw[j], self.cpu_lim[j])
                if key in seen_empty:
                    continue
                seen_empty.add(key)
            new_c = (self.cpu[j] + self.demand[k]) / self.cap[j]
            t1c = s1c - cpu_f[j] + new_c
            t2c = s2c - cpu_f[j] ** 2 + new_c**2
            t1b, t2b = s1b, s2b
            for p, w in extra.items():
                nb = (self.bw[p] + w) / self.link[p]
                t1b += nb - bw_f[p]
                t2b += nb * nb - bw_f[p] ** 2
            dev = _dev(t1c, t2c, self.n) + _dev(t1b, t2b, self.n)
            if self.objective == "deviation":
                score: tuple[float, ...] = (round(dev, 12),)
            else:
                util = self._planned_util(extra, k)
                score = (-round(util, 12), round(dev, 12))
            level = level_of(self._usage(j), self.thresholds)
            if self.mode == "collocate":
                score = (round(sum(extra.values()), 12), level, *score)
            else:
                score = (level, *score)
            ranked.append((score, j))
        ranked.sort()
        return [j for _, j in ranked]

    def _planned_util(self, extra: dict[int, float], k: int) -> float:
        cpu = (sum(self.cpu) + self.demand[k]) / sum(self.cap)
        bw = (sum(self.bw) + sum(extra.values())) / sum(self.link)
        return cpu + bw

    # -- overload, for the repair ------------------------------------------
    def _violation(self, nodes: set[int] | range, weighted: bool = False) -> float:
        """Σ overload beyond D_CPU and D_BW, counted where the query adds load."""
        v = 0.0
        for i in nodes:
            if self.cpu[i] - self.c0[i] > EPS and self.cpu[i] > self.cpu_lim[i]:
                w = self.w_cpu[i] if weighted else 1.0
                v += w * (self.cpu[i] - self.cpu_lim[i]) / self.cap[i]
            if self.bw[i] - self.b0[i] > EPS and self.bw[i] > self.bw_lim[i]:
                w = self.w_bw[i] if weighted else 1.0
                v += w * (self.bw[i] - self.bw_lim[i]) / self.link[i]
        return v

    def _try(self, moves: list[tuple[int, int]]) -> float:
        """Change in total overload if ``moves`` (operator, node) were made; state unchanged."""
        near = {j for _, j in moves}
        for k, _ in moves:
            near.add(self.where[k])
            near.update(self.where[o] for o, _ in self.adj[k])
        before = self._violation(near, True)
        undo = self._move(moves)
        after = self._violation(near, True)
        self._move(undo[::-1])
        return after - before

    def _move(self, moves: list[tuple[int, int]]) -> list[tuple[int, int]]:
        undo = []
        for k, j in moves:
            undo.append((k, self.where[k]))
            self._unplace(k)
            self._place(k, j)
        return undo

    def _clear(self) -> None:
        for k in range(self.m):
            if self.where[k] >= 0:
                self._unplace(k)


def _dev(s1: float, s2: float, n: int) -> float:
    """sqrt(Σ (x − mean)²) from Σx and Σx²."""
    return max(s2 - s1 * s1 / n, 0.0) ** 0.5
