"""Task-level task allocation: taskLevel (TL), TL-IMC and allocateSingleTasks.

Paper 001, §3.2, Algorithms 1–3. TL walks the task pairs of every group pair
in priority order — relative significance s = imc/(pc_i + pc_j) for ``tl``,
plain task-link IMC for ``tl-imc`` — keeps filling the node of the last group
pair (``pickNode``), fuses the nodes of a pair whose tasks are both placed
when the roomier node can absorb the other, and places the tasks of broken
pairs last with ``allocateSingleTasks``. It costs O(|T|² log |T|²).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from streamscale.planning.placement.backtrack import backtrack as backtrack_search
from streamscale.planning.placement.groups import EPS, GroupJob, TaskAllocation
from streamscale.settings import Setting

__all__ = [
    "ORDER",
    "PairOrder",
    "Priority",
    "allocate_single_tasks",
    "fit_count",
    "group_pair_order",
    "task_level",
    "task_pairs",
    "top_node",
]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
ORDER = Setting(
    "order",
    str,
    "diagonal",
    "task pairing order: diagonal, storm (task-id order, the paper's) or random",
    choices=("diagonal", "storm", "random"),
)

Priority = Literal["significance", "imc"]
PairOrder = Literal["diagonal", "storm", "random"]


def top_node(cap: Sequence[float]) -> int:
    """The node with the most spare capacity (the first one on a tie): N.top()."""
    best, best_cap = 0, cap[0]
    for n in range(1, len(cap)):
        if cap[n] > best_cap:
            best, best_cap = n, cap[n]
    return best


def fit_count(capacity: float, cost: float) -> int | float:
    """How many items of ``cost`` fit in ``capacity`` (∞ for free items)."""
    if cost <= 0:
        return float("inf")
    if capacity < 0:
        return 0
    q = capacity / cost
    return int(q + EPS) if q < 1e15 else float("inf")


def group_pair_order(job: GroupJob, priority: Priority = "significance") -> list[int]:
    """Edges by descending priority; ties keep the job's edge order.

    ``significance`` is Eq. 2 of paper 001; ``imc`` is the IMC of one task
    link, the order task-level fusion heuristics use (§3.1).
    """
    if priority == "significance":
        key: Callable[[int], float] = job.significance
    elif priority == "imc":
        key = job.link_imc.__getitem__
    else:
        raise ValueError(f"unknown priority {priority!r}")
    return sorted(range(len(job.edges)), key=lambda e: -key(e))


def task_pairs(
    first: Sequence[int], second: Sequence[int], order: PairOrder, rng: np.random.Generator | None
) -> Iterator[tuple[int, int]]:
    """Every (t_m, t_n) of a group pair once.

    The paper fixes no order within a group pair ("There is no ordering
    within task pairs", paper 001, §3.2, Example 1). ``storm`` is the literal
    reading: pairs sorted by task id, i.e. row-major (t_m, t_n) with t_m the
    outer loop, as Storm numbers tasks component by component. ``diagonal``
    walks (m, (m + s) mod |second|) for s = 0, 1, … so that consecutive pairs
    share no task (a tuned order that favours TL), and ``random`` shuffles
    with ``rng``.
    """
    nf, ns = len(first), len(second)
    if order == "storm":
        for m in range(nf):
            for n in range(ns):
                yield first[m], second[n]
        return
    if order not in ("diagonal", "random"):
        raise ValueError(f"unknown pair order {order!r}")
    if order == "random":
        assert rng is not None
        for idx in rng.permutation(nf * ns):
            m, n = divmod(int(idx), ns)
            yield first[m], second[n]
        return
    for s in range(ns):
        for m in range(nf):
            yield first[m], second[(m + s) % ns]


def allocate_single_tasks(
    job: GroupJob,
    counts: MutableSequence[MutableSequence[int]],
    cap: MutableSequence[float],
    free: MutableSequence[int],
) -> bool:
    """allocateSingleTasks (paper 001, §3.2, Algorithm 3), on task counts.

    Places the unplaced tasks (``free[g]`` of group g), heaviest first, each
    on the node with the most spare capacity; stops at the first task that
    fits nowhere. Updates ``counts``, ``cap`` and ``free`` in place and tells
    whether every task was placed.
    """
    pc = job.task_cost
    for g in sorted((g for g in range(len(free)) if free[g]), key=lambda g: -pc[g]):
        cost = pc[g]
        row = counts[g]
        while free[g]:
            n = top_node(cap)
            if cost > cap[n] + EPS * max(1.0, job.capacities[n]):
                return False
            # Tasks of a group are interchangeable, so a run of them goes to this
            # node for as long as it stays the roomiest one.
            second = max((c for i, c in enumerate(cap) if i != n), default=-1.0)
            run: int | float = free[g]
            if cost > 0:
                if second >= 0:
                    lead = (cap[n] - second) / cost
                    run = min(run, max(1, math.ceil(lead) if lead < run else run))
                run = min(run, max(1, fit_count(cap[n], cost)))
            run = int(run)
            row[n] += run
            cap[n] -= run * cost
            free[g] -= run
    return True


def task_level(
    job: GroupJob,
    *,
    priority: Priority = "significance",
    order: PairOrder = ORDER.default,
    seed: int | None = None,
    backtrack: bool = True,
) -> TaskAllocation:
    """taskLevel (paper 001, §3.2, Algorithms 1–3).

    Parameters
    ----------
    job
        The group job.
    priority
        ``significance`` (TL) or ``imc`` (TL-IMC, the variant §7 evaluates).
    order
        Order of the task pairs within one group pair: ``storm`` (task-id
        order, the literal reading), ``diagonal`` (tuned) or a seeded
        ``random`` permutation.
    seed
        Seed for ``order="random"``.
    backtrack
        When a single task fits nowhere after Algorithm 3, search for a
        complete allocation that keeps as many of TL's placements as it can
        (§2.2's "backtrack and try a different allocation"; see
        :func:`~streamscale.planning.placement.backtrack.backtrack`). False is
        the single pass as printed.

    Returns
    -------
    TaskAllocation
        Complete, or with ``unplaced`` tasks when no complete allocation
        exists (or a single task fits nowhere and ``backtrack`` is False).

    Examples
    --------
    Groups ``A`` and ``B`` have two tasks of 30 % each, ``C`` one of 40 %; an ``A``–``B``
    task link carries 8/4 = 2 MB/s and a ``B``–``C`` link 6/2 = 3. The five tasks (160 %)
    need both nodes of 100 %; trying all 18 count vectors shows that the best gain is 7 (e.g.
    one ``A`` and one ``B`` per node, ``C`` beside one ``B``: 2 + 2 + 3).

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> a = task_level(job)
    >>> a.node_counts(), a.gain, a.complete
    ({'A': {'n0': 1, 'n1': 1}, 'B': {'n0': 1, 'n1': 1}, 'C': {'n0': 1}}, 7.0, True)

    TL takes the ``A``–``B`` pairs first (significance 8/120 > 6/100). TL-IMC takes the
    ``B``–``C`` links first (3 MB/s > 2) and puts both ``B`` tasks beside ``C``, which
    leaves ``n0`` no room for an ``A`` task:

    >>> task_level(job, priority="imc").gain
    6.0
    """
    rng = np.random.default_rng(seed) if order == "random" else None
    first_task = [sum(job.tasks[:g]) for g in range(len(job.groups))]
    packing = _Packing.of(job)
    for e in group_pair_order(job, priority):
        a, b = job.ends[e]
        ta = range(first_task[a], first_task[a] + job.tasks[a])
        tb = range(first_task[b], first_task[b] + job.tasks[b])
        for tm, tn in task_pairs(ta, tb, order, rng):
            packing.take((a, b), tm, tn)
    counts = packing.counts(len(job.groups))
    # Tasks of broken pairs (and of groups in no pair) are the single tasks R.
    free = [job.tasks[g] - sum(counts[g]) for g in range(len(job.groups))]
    if not allocate_single_tasks(job, counts, packing.cap, free) and backtrack:
        counts = backtrack_search(job, counts) or counts
    name = "tl" if priority == "significance" else "tl-imc"
    return TaskAllocation.of(job, counts, name)


@dataclass
class _Packing:
    """Algorithms 1–2's running state over one :func:`task_level` pass: each task's group
    and node (``-1``: not placed), the tasks on each node, the capacity left and the last
    pair's node (pickNode keeps filling it)."""

    group_of: list[int]
    pc: list[float]
    init: list[float]
    cap: list[float]
    node: list[int]
    on_node: list[set[int]]
    last_pair: tuple[int, int] | None = None
    last_node: int = -1

    @classmethod
    def of(cls, job: GroupJob) -> _Packing:
        group_of = [g for g, k in enumerate(job.tasks) for _ in range(k)]
        nn = len(job.nodes)
        return cls(
            group_of=group_of,
            pc=[job.task_cost[g] for g in group_of],
            init=list(job.capacities),
            cap=list(job.capacities),
            node=[-1] * len(group_of),
            on_node=[set() for _ in range(nn)],
        )

    def fits(self, cost: float, n: int) -> bool:
        return cost <= self.cap[n] + EPS * max(1.0, self.init[n])

    def take(self, pair: tuple[int, int], tm: int, tn: int) -> None:
        """Tasks ``tm`` and ``tn`` of group pair ``pair``: place the unplaced ones together
        (pickNode, Algorithm 2), or fuse their two nodes when both are placed apart."""
        nm, nt = self.node[tm], self.node[tn]
        if nm < 0 or nt < 0:
            self._place(pair, tm, tn)
        elif nm != nt:
            self._fuse(nm, nt)

    def _place(self, pair: tuple[int, int], tm: int, tn: int) -> None:
        nm, nt = self.node[tm], self.node[tn]
        if nm >= 0:
            n = nm
        elif nt >= 0:
            n = nt
        elif (
            pair != self.last_pair
            or self.last_node < 0
            or not self.fits(self.pc[tm] + self.pc[tn], self.last_node)
        ):
            n = top_node(self.cap)
        else:
            n = self.last_node
        self.last_pair, self.last_node = pair, n
        cost = (0.0 if nm >= 0 else self.pc[tm]) + (0.0 if nt >= 0 else self.pc[tn])
        if self.fits(cost, n):  # else the pair is broken: its unplaced tasks are singles
            for t, placed in ((tm, nm), (tn, nt)):
                if placed < 0:
                    self.node[t] = n
                    self.on_node[n].add(t)
            self.cap[n] -= cost

    def _fuse(self, src: int, dst: int) -> None:
        """Both placed apart: fuse the less capable node into the other when it fits."""
        if self.init[src] >= self.init[dst]:
            src, dst = dst, src
        used = self.init[src] - self.cap[src]
        if self.fits(used, dst):
            self.cap[dst] -= used
            self.cap[src] = self.init[src]
            for t in self.on_node[src]:
                self.node[t] = dst
            self.on_node[dst] |= self.on_node[src]
            self.on_node[src] = set()

    def counts(self, groups: int) -> list[list[int]]:
        """Placed tasks per group and node."""
        out = [[0] * len(self.cap) for _ in range(groups)]
        for t, n in enumerate(self.node):
            if n >= 0:
                out[self.group_of[t]][n] += 1
        return out
