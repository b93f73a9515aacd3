"""The naive fusion-style task allocator.

Paper 001, §3.1: break the job into task pairs, take them by descending
task-link IMC, and push each onto the current node of a list sorted by
descending capacity, moving to the next node when it is full. A pair with
one task already placed tries to join that task's node; a pair with both
placed is skipped; a pair that fits nowhere is broken and its tasks are
placed last (here with allocateSingleTasks, Algorithm 3).
"""

from __future__ import annotations

import numpy as np

from streamscale.planning.placement.groups import EPS, GroupJob, TaskAllocation
from streamscale.planning.placement.task_level import (
    PairOrder,
    allocate_single_tasks,
    group_pair_order,
    task_pairs,
)

__all__ = ["naive_pairs"]


def naive_pairs(
    job: GroupJob, *, order: PairOrder = "diagonal", seed: int | None = None
) -> TaskAllocation:
    """The naive algorithm (paper 001, §3.1, with its "already placed" refinement).

    Parameters
    ----------
    job
        The group job.
    order
        Order of the task pairs within one group pair (all have the same IMC).
    seed
        Seed for ``order="random"``.
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
            if nm >= 0 or nb >= 0:
                placed, t = (nm, tn) if nm >= 0 else (nb, tm)
                if fits(pc[t], placed):
                    node[t] = placed
                    cap[placed] -= pc[t]
                continue
            cost = pc[tm] + pc[tn]
            # The current node first, then the ones after it, then any earlier one.
            for n in (*nodes[cur:], *nodes[:cur]):
                if fits(cost, n):
                    node[tm] = node[tn] = n
                    cap[n] -= cost
                    pos = nodes.index(n)
                    cur = max(cur, pos)
                    break
    counts = [[0] * nn for _ in range(ng)]
    for t, n in enumerate(node):
        if n >= 0:
            counts[group_of[t]][n] += 1
    free = [job.tasks[g] - sum(counts[g]) for g in range(ng)]
    allocate_single_tasks(job, counts, cap, free)
    return TaskAllocation.of(job, counts, "naive")
