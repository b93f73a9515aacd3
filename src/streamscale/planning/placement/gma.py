"""GMA, the Greedy Matching Algorithm of the Elastic Allocator (paper 002, §IV.E, Algorithm 1).

Phase 1 clusters the nodes into light (< 40 %), moderate (40–80 %) and heavy
(≥ 80 %) by their CPU and link usage; phase 2 places each operator on a node
that keeps every constraint (D_CPU, D_BW), lighter levels first and, within a
level, the node whose assignment gives the best objective. Clustering is redone
before every operator (Algorithm 1, line 4), so levels follow the placement.

**Choices** (the paper's pseudo-code leaves them open):

* Operators are taken in decreasing order of demand (CPU over the mean node
  capacity plus traffic over the mean link), ties in declaration order — a
  first-fit-decreasing order, so large operators are not left for the end.
* Algorithm 1's outer ``while t ≤ t_max`` repeats the matching until the time
  budget is spent. Here the repetition is systematic: when an operator has no
  feasible node, the search backtracks over the greedy choices (depth first,
  in the same greedy preference order, skipping interchangeable empty nodes).
  The first descent is the plain greedy matching; with enough budget the search
  finds a feasible placement whenever one exists.
* The budget is a number of candidate evaluations (``max_operations``) and,
  optionally, seconds measured by an injected ``clock`` callable — the planner
  never reads the clock itself. When it runs out, or the search proves that no
  feasible placement exists, the deepest partial placement found is kept; the
  remaining operators go greedily to feasible nodes where they still have one,
  and the others are spread over the light subcluster, least used node first
  (best effort, Algorithm 1 lines 11–13).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from streamscale.errors import ModelError
from streamscale.planning.placement.elastic_allocator import (
    AllocatorProblem,
    AllocatorResult,
    evaluate,
    level_of,
)

__all__ = ["Objective", "gma"]

Objective = Literal["deviation", "utilization"]
_EPS = 1e-9


def gma(
    problem: AllocatorProblem,
    *,
    objective: Objective = "deviation",
    max_operations: int = 100_000,
    time_budget_s: float | None = None,
    clock: Callable[[], float] | None = None,
    thresholds: tuple[float, float] = (0.4, 0.8),
) -> AllocatorResult:
    """Place every operator of ``problem`` with GMA (paper 002, §IV.E, Algorithm 1).

    Parameters
    ----------
    problem
        The operators, their traffic and the cluster with its existing usage.
    objective
        ``deviation``: minimise ``R_dev`` of node CPU loads plus that of link
        loads. ``utilization``: maximise planned ``R_utl`` (CPU plus bandwidth),
        ties broken by deviation.
    max_operations
        Budget in candidate evaluations (one operator tried on one node).
    time_budget_s, clock
        Optional budget t_max in seconds, measured with ``clock()``.
    thresholds
        Upper bounds of the light and moderate levels.

    Returns
    -------
    AllocatorResult
        Every operator placed; ``feasible`` tells whether D_CPU and D_BW hold.
    """
    if objective not in ("deviation", "utilization"):
        raise ModelError("must be 'deviation' or 'utilization'", item=f"objective {objective}")
    if max_operations < 1:
        raise ModelError("max_operations must be >= 1", item="gma")
    if time_budget_s is not None and clock is None:
        raise ModelError("a time budget needs a clock callable", item="gma")
    return _Search(problem, objective, max_operations, time_budget_s, clock, thresholds).run()


class _Search:
    """Incremental usage bookkeeping and the depth-first greedy search."""

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
        self.cpu_lim = [problem.d_cpu * c + _EPS for c in self.cap]
        self.bw_lim = [problem.d_bw * b + _EPS for b in self.link]
        self.cpu = [x.reserved_cpu for x in nodes]
        self.bw = [x.reserved_bandwidth_mbps for x in nodes]
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
        self.order = sorted(range(self.m), key=lambda k: (-weight[k], k))
        self.where = [-1] * self.m
        self.hosted = [0] * self.n
        self.ops = 0

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
        ranked: list[tuple[int, tuple[float, ...], int]] = []
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
            ranked.append((level, score, j))
        ranked.sort()
        return [j for _, _, j in ranked]

    def _planned_util(self, extra: dict[int, float], k: int) -> float:
        cpu = (sum(self.cpu) + self.demand[k]) / sum(self.cap)
        bw = (sum(self.bw) + sum(extra.values())) / sum(self.link)
        return cpu + bw

    # -- search ------------------------------------------------------------
    def run(self) -> AllocatorResult:
        stack: list[tuple[list[int], int]] = []
        depth, best_depth = 0, -1
        best = list(self.where)
        exhausted = proven_infeasible = False
        while depth < self.m:
            if self._out_of_budget():
                exhausted = True
                break
            if len(stack) == depth:
                stack.append((self._candidates(self.order[depth]), 0))
            if depth > best_depth:
                best_depth, best = depth, list(self.where)
            cands, idx = stack[depth]
            if idx < len(cands):
                stack[depth] = (cands, idx + 1)
                self._place(self.order[depth], cands[idx])
                depth += 1
                continue
            stack.pop()
            depth -= 1
            if depth < 0:
                proven_infeasible = True
                break
            self._unplace(self.order[depth])
        fallback: tuple[str, ...] = ()
        if depth != self.m:
            fallback = self._best_effort(best)
        names = self.p.node_names
        assignment = {o.name: names[self.where[k]] for k, o in enumerate(self.p.operators)}
        return AllocatorResult(
            assignment,
            evaluate(self.p, assignment),
            operations=self.ops,
            best_effort=fallback,
            exhausted=exhausted,
            proven_infeasible=proven_infeasible,
        )

    def _best_effort(self, partial: list[int]) -> tuple[str, ...]:
        """Algorithm 1, lines 11–13: finish the deepest partial placement.

        Each remaining operator still goes to its best feasible node when it has
        one; those with none are spread over the light subcluster (the lightest
        level present), least used node first. Returns the latter.
        """
        for k in range(self.m):
            if self.where[k] >= 0:
                self._unplace(k)
        for k in self.order:
            if partial[k] >= 0:
                self._place(k, partial[k])
        forced: list[int] = []
        for k in (k for k in self.order if self.where[k] < 0):
            cands = self._candidates(k)
            if cands:
                self._place(k, cands[0])
                continue
            levels = [level_of(self._usage(j), self.thresholds) for j in range(self.n)]
            lightest = min(levels)
            pool = [j for j in range(self.n) if levels[j] == lightest]
            self._place(k, min(pool, key=lambda j: (self._usage(j), j)))
            forced.append(k)
        return tuple(self.p.operators[k].name for k in forced)


def _dev(s1: float, s2: float, n: int) -> float:
    """sqrt(Σ (x − mean)²) from Σx and Σx²."""
    return max(s2 - s1 * s1 / n, 0.0) ** 0.5
