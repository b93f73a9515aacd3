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
    ng, nn = len(job.groups), len(job.nodes)
    pc_g = job.task_cost
    first_task: list[int] = []
    group_of: list[int] = []
    for g, k in enumerate(job.tasks):
        first_task.append(len(group_of))
        group_of.extend([g] * k)
    pc = [pc_g[g] for g in group_of]
    node = [-1] * len(group_of)
    on_node: list[set[int]] = [set() for _ in range(nn)]
    init = list(job.capacities)
    cap = list(init)
    singles: list[int] = []
    last_pair: tuple[int, int] | None = None
    last_node = -1

    def fits(cost: float, n: int) -> bool:
        return cost <= cap[n] + EPS * max(1.0, init[n])

    for e in group_pair_order(job, priority):
        a, b = job.ends[e]
        ta = range(first_task[a], first_task[a] + job.tasks[a])
        tb = range(first_task[b], first_task[b] + job.tasks[b])
        for tm, tn in task_pairs(ta, tb, order, rng):
            nm, nnode = node[tm], node[tn]
            if nm < 0 or nnode < 0:
                # pickNode (Algorithm 2)
                if nm >= 0:
                    n = nm
                elif nnode >= 0:
                    n = nnode
                elif last_pair != (a, b) or last_node < 0 or not fits(pc[tm] + pc[tn], last_node):
                    n = top_node(cap)
                else:
                    n = last_node
                last_pair, last_node = (a, b), n
                cm = 0.0 if nm >= 0 else pc[tm]
                cn = 0.0 if nnode >= 0 else pc[tn]
                if fits(cm + cn, n):
                    for t, placed in ((tm, nm), (tn, nnode)):
                        if placed < 0:
                            node[t] = n
                            on_node[n].add(t)
                    cap[n] -= cm + cn
                else:
                    singles.extend(t for t, placed in ((tm, nm), (tn, nnode)) if placed < 0)
            elif nm != nnode:
                # Both placed apart: fuse the less capable node into the other.
                src, dst = nm, nnode
                if init[src] >= init[dst]:
                    src, dst = dst, src
                used = init[src] - cap[src]
                if fits(used, dst):
                    cap[dst] -= used
                    cap[src] = init[src]
                    for t in on_node[src]:
                        node[t] = dst
                    on_node[dst] |= on_node[src]
                    on_node[src] = set()

    counts = [[0] * nn for _ in range(ng)]
    for t, n in enumerate(node):
        if n >= 0:
            counts[group_of[t]][n] += 1
    # Tasks of broken pairs (and of groups in no pair) are the single tasks R.
    free = [job.tasks[g] - sum(counts[g]) for g in range(ng)]
    if not allocate_single_tasks(job, counts, cap, free) and backtrack:
        counts = backtrack_search(job, counts) or counts
    name = "tl" if priority == "significance" else "tl-imc"
    return TaskAllocation.of(job, counts, name)
