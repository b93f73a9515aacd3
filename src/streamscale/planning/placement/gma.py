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
  budget is spent. Here the repetitions are systematic, each on a share of the
  budget:

  1. the paper's matching, backtracking over the greedy choices when an
     operator has no feasible node (depth first, same preference order,
     skipping interchangeable empty nodes, and backing off as soon as some
     operator still to place has no node left that takes it) — its first
     descent is the plain greedy matching, and on small instances it runs to
     completion, so it either finds a feasible placement or proves there is
     none (30 % of the budget);
  2. the same search with operators in traffic-connected order and nodes
     ranked first by the traffic they would add (collocating heavy flows,
     which the balancing objective alone tends to cut; up to 45 %);
  3. Algorithm 1's best effort (lines 11–13) on the deepest partial placement
     found — the rest goes greedily to feasible nodes where it can, otherwise
     to the light subcluster, least used node first — then a local search
     that moves operators off overloaded nodes and links until nothing is
     overloaded or the budget ends.

* The budget is a number of candidate evaluations (``max_operations``) and,
  optionally, seconds measured by an injected ``clock`` callable — the planner
  never reads the clock itself.
"""

from __future__ import annotations

from collections.abc import Callable

from streamscale.errors import ModelError
from streamscale.planning.placement.elastic_allocator import (
    AllocatorProblem,
    AllocatorResult,
    evaluate,
    level_of,
)
from streamscale.planning.placement.gma_state import EPS, Objective, SearchState
from streamscale.settings import Setting

__all__ = ["MAX_OPERATIONS", "OBJECTIVE", "SEARCH", "Objective", "gma"]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
SEARCH = Setting("search", bool, True, "backtrack and repair beyond Algorithm 1 when it gets stuck")

#: The setting, declared once (the planner's schema takes it; defaults below read it).
MAX_OPERATIONS = Setting(
    "max_operations", int, 100_000, "search budget in placement operations", low=1
)

#: The setting, declared once (the planner's schema takes it; defaults below read it).
OBJECTIVE = Setting(
    "objective",
    str,
    "deviation",
    "GMA's objective (§IV.E)",
    choices=("deviation", "utilization"),
)

# Cumulative budget shares at which the two greedy passes stop; the repair gets the rest.
_PASS_SHARES = (0.3, 0.45)


def gma(
    problem: AllocatorProblem,
    *,
    objective: Objective = OBJECTIVE.default,
    max_operations: int = MAX_OPERATIONS.default,
    time_budget_s: float | None = None,
    clock: Callable[[], float] | None = None,
    thresholds: tuple[float, float] = (0.4, 0.8),
    search: bool = SEARCH.default,
) -> AllocatorResult:
    """Place every operator of ``problem`` with GMA (paper 002, §IV.E, Algorithm 1).

    Parameters
    ----------
    problem
        The operators, their traffic and the cluster with its existing usage.
    objective
        ``deviation``: minimise ``R_dev`` of node CPU loads plus that of link
        loads. ``utilization``: maximise planned ``R_utl`` (CPU plus bandwidth),
        ties broken by deviation. Planned ``R_utl`` reads the paper's formula on
        link usage: every feasible placement plans the same CPU, so it prefers
        sending the query's traffic between nodes. The reported
        ``Evaluation.bw_utilization`` is the query's traffic at its achieved
        throughput instead, which placement changes only through λ.
    max_operations
        Budget in candidate evaluations (one operator tried on one node).
    time_budget_s, clock
        Optional budget t_max in seconds, measured with ``clock()``.
    thresholds
        Upper bounds of the light and moderate levels.
    search
        False runs Algorithm 1 literally: one greedy descent, then the best
        effort for what it could not place (no backtracking, no repair).

    Returns
    -------
    AllocatorResult
        Every operator placed; ``feasible`` tells whether D_CPU and D_BW hold.

    Examples
    --------
    Two 4-core nodes that other work keeps 70 % and 10 % busy; operators ``a`` (120 % of a
    core) and ``b`` (80 %) exchange 100 Mbit/s. Of the four placements, ``a`` on ``n0``
    overloads it (400/400 > D_CPU = 0.9) and ``b`` on ``n0`` alone loads the nodes 0.9 and
    0.4 plus 0.1 of each link; both on ``n1`` (0.7 and 0.6, no traffic) deviates least.

    >>> from streamscale.planning.placement.elastic_allocator import (
    ...     AllocatorNode, AllocatorOperator, AllocatorProblem, Flow)
    >>> p = AllocatorProblem((AllocatorNode("n0", 400.0, reserved_cpu=280.0),
    ...                       AllocatorNode("n1", 400.0, reserved_cpu=40.0)),
    ...                      (AllocatorOperator("a", 120.0), AllocatorOperator("b", 80.0)),
    ...                      (Flow("a", "b", 100.0),))
    >>> r = gma(p)
    >>> dict(r.assignment), r.feasible, r.evaluation.node_cpu_load
    ({'a': 'n1', 'b': 'n1'}, True, (0.7, 0.6))
    """
    if objective not in ("deviation", "utilization"):
        raise ModelError("must be 'deviation' or 'utilization'", item=f"objective {objective}")
    if max_operations < 1:
        raise ModelError("max_operations must be >= 1", item="gma")
    if time_budget_s is not None and clock is None:
        raise ModelError("a time budget needs a clock callable", item="gma")
    state = _Search(problem, objective, max_operations, time_budget_s, clock, thresholds)
    return state.run() if search else state.run_literal()


class _Search(SearchState):
    """GMA's passes: greedy matching with backtracking, best effort, repair."""

    def run(self) -> AllocatorResult:
        # Pass 1 is the paper's matching; pass 2 repeats it collocating heavy flows;
        # what is left of the budget repairs the best-effort placement.
        first, second = _PASS_SHARES
        passes = (
            ("balance", self.order, max(1, int(self.max_ops * first))),
            ("collocate", self._connected_order(), max(1, int(self.max_ops * second))),
        )
        best_depth, best = -1, list(self.where)
        found = exhausted = proven_infeasible = False
        for mode, order, limit in passes:
            self.mode, self.order = mode, order
            status, depth, partial = self._dfs(limit)
            if depth >= best_depth:
                best_depth, best = depth, partial
            if status == "found":
                found = True
                break
            self._clear()
            if status == "proven":
                proven_infeasible = True
                break
            if self._out_of_budget():
                break
        if not found:
            self._best_effort(best)
            exhausted = not proven_infeasible
            if exhausted and not self._out_of_budget():
                exhausted = not self._repair()
        return self._result(exhausted=exhausted, proven_infeasible=proven_infeasible)

    def run_literal(self) -> AllocatorResult:
        """One greedy descent; operators left without a feasible node go to best effort."""
        for k in self.order:
            if self._out_of_budget():
                break
            cands = self._candidates(k)
            if not cands:
                break
            self._place(k, cands[0])
        complete = all(w >= 0 for w in self.where)
        if not complete:
            self._best_effort(list(self.where))
        return self._result(exhausted=False, proven_infeasible=False)

    def _result(self, *, exhausted: bool, proven_infeasible: bool) -> AllocatorResult:
        names = self.p.node_names
        assignment = {o.name: names[self.where[k]] for k, o in enumerate(self.p.operators)}
        return AllocatorResult(
            assignment,
            evaluate(self.p, assignment),
            operations=self.ops,
            best_effort=self._violators(),
            exhausted=exhausted,
            proven_infeasible=proven_infeasible,
        )

    def _dfs(self, limit: int) -> tuple[str, int, list[int]]:
        """Depth-first search in greedy order; ``found``, ``proven`` or ``budget``."""
        stack: list[tuple[list[int], int]] = []
        depth, best_depth = 0, -1
        best = list(self.where)
        while depth < self.m:
            if self.ops >= limit or self._out_of_budget():
                return "budget", best_depth, best
            if len(stack) == depth:
                stack.append((self._candidates(self.order[depth]), 0))
            if depth > best_depth:
                best_depth, best = depth, list(self.where)
            cands, idx = stack[depth]
            if idx < len(cands):
                stack[depth] = (cands, idx + 1)
                self._place(self.order[depth], cands[idx])
                if self.mode == "balance" and not self._viable(depth + 1):
                    self._unplace(self.order[depth])
                    continue
                depth += 1
                continue
            stack.pop()
            depth -= 1
            if depth < 0:
                return "proven", best_depth, best
            self._unplace(self.order[depth])
        return "found", self.m, list(self.where)

    def _viable(self, depth: int) -> bool:
        """Lookahead: the CPU still needed fits in what the nodes have left under D_CPU."""
        self.ops += 1
        rest = [self.demand[k] for k in self.order[depth:] if self.demand[k] > 0]
        if not rest:
            return True
        room = [max(0.0, lim - c) for lim, c in zip(self.cpu_lim, self.cpu, strict=True)]
        if max(rest) > max(room) or sum(rest) > sum(room):
            return False
        # Every operator yet to place must still have one node that takes it.
        return all(self._fits_somewhere(k) for k in self.order[depth:])

    def _fits_somewhere(self, k: int) -> bool:
        self.ops += 1
        for j in range(self.n):
            if self.demand[k] > 0 and self.cpu[j] + self.demand[k] > self.cpu_lim[j]:
                continue
            extra = self._traffic(k, j)
            if all(self.bw[p] + w <= self.bw_lim[p] for p, w in extra.items()):
                return True
        return False

    def _best_effort(self, partial: list[int]) -> None:
        """Algorithm 1, lines 11–13: finish the deepest partial placement.

        Each remaining operator still goes to its best feasible node when it has
        one; those with none are spread over the light subcluster (the lightest
        level present), least used node first.
        """
        for k in range(self.m):
            if self.where[k] >= 0:
                self._unplace(k)
        for k in self.order:
            if partial[k] >= 0:
                self._place(k, partial[k])
        for k in (k for k in self.order if self.where[k] < 0):
            cands = self._candidates(k)
            if cands:
                self._place(k, cands[0])
                continue
            levels = [level_of(self._usage(j), self.thresholds) for j in range(self.n)]
            lightest = min(levels)
            pool = [j for j in range(self.n) if levels[j] == lightest]
            self._place(k, min(pool, key=lambda j: (self._usage(j), j)))

    def _connected_order(self) -> list[int]:
        """Heaviest operator first, then always the one with most traffic to those taken."""
        conn = [0.0] * self.m
        left = set(range(self.m))
        order: list[int] = []
        while left:
            k = max(left, key=lambda k: (round(conn[k], 12), self.weight[k], -k))
            order.append(k)
            left.remove(k)
            for o, w in self.adj[k]:
                conn[o] += w
        return order

    def _neighbourhood(self, k: int) -> list[list[tuple[int, int]]]:
        """Moves of operator ``k``: alone, with one neighbour, or swapped with another."""
        a = self.where[k]
        out: list[list[tuple[int, int]]] = [[(k, j)] for j in range(self.n) if j != a]
        for o, _ in self.adj[k]:
            out.extend([(k, j), (o, j)] for j in range(self.n) if j not in (a, self.where[o]))
        out.extend(
            [(k, self.where[q]), (q, a)] for q in range(self.m) if self.where[q] not in (a, -1)
        )
        return out

    def _repair(self) -> bool:
        """Local search on a complete placement until no constraint is broken or the budget ends.

        Each step makes the move (an operator of an overloaded node or link alone,
        with a neighbour, or swapped with another) that lowers the weighted
        overload most; moved operators stay put for two steps. At a local minimum
        the weights of the constraints still broken grow (breakout), which
        reshapes the landscape instead of climbing at random — so the search stays
        deterministic. Keeps the least overloaded placement seen; True when it
        breaks no constraint.
        """
        self.w_cpu, self.w_bw = [1.0] * self.n, [1.0] * self.n
        best_v, best = self._violation(range(self.n)), list(self.where)
        tabu = [0] * self.m
        step = 0
        while best_v > EPS and not self._out_of_budget():
            step += 1
            bad = {i for i in range(self.n) if self._violation((i,)) > 0}
            movers = [
                k
                for k in range(self.m)
                if self.where[k] in bad or any(self.where[o] in bad for o, _ in self.adj[k])
            ]
            choice: tuple[float, int, list[tuple[int, int]]] | None = None
            for k in movers:
                if self._out_of_budget():
                    break
                for n_, moves in enumerate(self._neighbourhood(k)):
                    if any(tabu[q] >= step for q, _ in moves):
                        continue
                    self.ops += 1
                    delta = round(self._try(moves), 12)
                    if choice is None or (delta, k * 100_003 + n_) < choice[:2]:
                        choice = (delta, k * 100_003 + n_, moves)
            if choice is None:
                break
            if choice[0] >= 0:
                # A local minimum: weigh up what stays broken (breakout) instead of climbing.
                for i in bad:
                    if self.cpu[i] > self.cpu_lim[i]:
                        self.w_cpu[i] += 1.0
                    if self.bw[i] > self.bw_lim[i]:
                        self.w_bw[i] += 1.0
                continue
            self._move(choice[2])
            for q, _ in choice[2]:
                tabu[q] = step + 2
            real = self._violation(range(self.n))
            if real < best_v - EPS:
                best_v, best = real, list(self.where)
        self._clear()
        for k in self.order:
            self._place(k, best[k])
        return best_v <= EPS

    def _violators(self) -> tuple[str, ...]:
        """Operators on an overloaded node or sending over an overloaded link."""
        bad = {i for i in range(self.n) if self._violation((i,)) > 0}
        return tuple(
            o.name
            for k, o in enumerate(self.p.operators)
            if self.where[k] in bad or any(self.where[q] in bad for q, _ in self.adj[k])
        )
