"""The naive fusion-style task allocator.

Paper 001, §3.1: break the job into task pairs, take them by descending
task-link IMC, and push each onto the current node of a list sorted by
descending capacity, moving to the next node when it is full. A pair with
both tasks placed is skipped; a pair that fits nowhere is broken and its
tasks are placed last (here with allocateSingleTasks, Algorithm 3).

What happens to a pair with one task already placed is the difference
between the algorithm as §3.1 first states it and the refinement the same
section adds ("we can improve the algorithm by checking if one of a pair's
tasks is already allocated. If so, we try to collocate the second task"):

* ``refine=False`` (as first stated): the placed task is ignored and the
  other one is pushed onto the current node like any pair, so tasks shared
  by several pairs rarely end up beside their partners;
* ``refine=True`` (the default): the other task joins its partner's node if
  it fits. With it, naive is TL-IMC (§3.2) without ``pickNode`` and node
  fusion, and on paper 001's §7.3 jobs it scores within a point of TL-IMC
  (``task_allocation_ablation.jsonl``).
"""

from __future__ import annotations

import numpy as np

from streamscale.planning.placement.backtrack import backtrack as backtrack_search
from streamscale.planning.placement.groups import EPS, GroupJob, TaskAllocation
from streamscale.planning.placement.task_level import (
    ORDER,
    PairOrder,
    allocate_single_tasks,
    group_pair_order,
    task_pairs,
)
from streamscale.settings import Setting

__all__ = ["REFINE", "naive_pairs"]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
REFINE = Setting(
    "refine",
    bool,
    True,
    "a pair with one task placed puts the other beside it (§3.1's refinement)",
)


def naive_pairs(
    job: GroupJob,
    *,
    order: PairOrder = ORDER.default,
    refine: bool = REFINE.default,
    seed: int | None = None,
    backtrack: bool = True,
) -> TaskAllocation:
    """The naive algorithm (paper 001, §3.1).

    Parameters
    ----------
    job
        The group job.
    order
        Order of the task pairs within one group pair (all have the same IMC).
    refine
        True: a pair with one task placed tries to put the other beside it
        (§3.1's refinement); False: the algorithm as first stated, which
        pushes the unplaced task onto the current node.
    seed
        Seed for ``order="random"``.
    backtrack
        When a task fits nowhere at the end, search for a complete allocation
        that keeps as many of naive's placements as it can (§2.2; see
        :func:`~streamscale.planning.placement.backtrack.backtrack`). False
        leaves the task unplaced.

    Examples
    --------
    Groups ``A`` and ``B`` have two tasks of 30 % each, ``C`` one of 40 %; an ``A``–``B``
    task link carries 8/4 = 2 MB/s and a ``B``–``C`` link 6/2 = 3. The five tasks (160 %)
    need both nodes of 100 %; trying all 18 count vectors shows that the best gain is 7 (e.g.
    one ``A`` and one ``B`` per node, ``C`` beside one ``B``: 2 + 2 + 3).
    Naive fills ``n0`` pair by pair, highest task-link IMC first: the two ``B``–``C`` links
    (3 MB/s each), which leaves no room there for an ``A`` task, so it reaches 6.

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> a = naive_pairs(job)
    >>> a.node_counts(), a.gain
    ({'A': {'n1': 2}, 'B': {'n0': 2}, 'C': {'n0': 1}}, 6.0)
    """
    rng = np.random.default_rng(seed) if order == "random" else None
    ng, nn = len(job.groups), len(job.nodes)
    nodes = sorted(range(nn), key=lambda n: -job.capacities[n])
    cap = list(job.capacities)
    first_task: list[int] = []
    group_of: list[int] = []
    for g, k in enumerate(job.tasks):
        first_task.append(len(group_of))
        group_of.extend([g] * k)
    pc = [job.task_cost[g] for g in group_of]
    node = [-1] * len(group_of)
    cur = 0

    def fits(cost: float, n: int) -> bool:
        return cost <= cap[n] + EPS * max(1.0, job.capacities[n])

    for e in group_pair_order(job, "imc"):
        a, b = job.ends[e]
        ta = range(first_task[a], first_task[a] + job.tasks[a])
        tb = range(first_task[b], first_task[b] + job.tasks[b])
        for tm, tn in task_pairs(ta, tb, order, rng):
            nm, nb = node[tm], node[tn]
            if nm >= 0 and nb >= 0:
                continue
            if refine and (nm >= 0 or nb >= 0):
                placed, t = (nm, tn) if nm >= 0 else (nb, tm)
                if fits(pc[t], placed):
                    node[t] = placed
                    cap[placed] -= pc[t]
                continue
            todo = [t for t in (tm, tn) if node[t] < 0]
            cost = sum(pc[t] for t in todo)
            # The current node first, then the ones after it, then any earlier one.
            for n in (*nodes[cur:], *nodes[:cur]):
                if fits(cost, n):
                    for t in todo:
                        node[t] = n
                    cap[n] -= cost
                    pos = nodes.index(n)
                    cur = max(cur, pos)
                    break
    counts = [[0] * nn for _ in range(ng)]
    for t, n in enumerate(node):
        if n >= 0:
            counts[group_of[t]][n] += 1
    free = [job.tasks[g] - sum(counts[g]) for g in range(ng)]
    if not allocate_single_tasks(job, counts, cap, free) and backtrack:
        counts = backtrack_search(job, counts) or counts
    return TaskAllocation.of(job, counts, "naive")
