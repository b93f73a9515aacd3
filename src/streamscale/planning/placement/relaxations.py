"""Relaxing the assumptions of the group model (paper 001, §5).

* :func:`gcd_granularity` — tasks too coarse to fit: re-cut every group into
  tasks of the greatest common divisor d of the group costs and node
  capacities, so tasks of all groups are equal and pack nodes exactly.
* :func:`split_skewed` — skewed groups: cut a group whose tasks cost unequal
  amounts into subgroups of near-equal task cost (within a margin), so Eq. 1
  holds within each; :meth:`SkewSplit.assignment` maps the subgroup tasks of
  an allocation back to the original tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from streamscale.errors import ModelError
from streamscale.model import unit_id
from streamscale.planning.placement.groups import Group, GroupEdge, GroupJob, TaskAllocation

__all__ = ["SkewSplit", "gcd_granularity", "split_skewed"]


def gcd_granularity(job: GroupJob, *, quantum: float = 1.0, max_tasks: int = 1000) -> GroupJob:
    """The job with every group cut into tasks of the cost GCD d (paper 001, §5).

    Group costs and node capacities are taken in whole multiples of
    ``quantum`` (% of a core; the paper's worst case is d = 1 %, one-percent
    tasks), d is their greatest common divisor and a group of cost pc_v gets
    pc_v/d tasks, so every task of every group costs d and tasks pack nodes
    exactly: the allocation succeeds whenever the cluster's capacity holds the
    job. When some group would need more than ``max_tasks`` tasks the job is
    returned unchanged (no relaxation within the bound).

    Examples
    --------
    Costs 60, 60, 40 and capacities 100 have the GCD 20: every task then costs 20 %.

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> g = gcd_granularity(job)
    >>> g.tasks, g.task_cost
    ((3, 3, 2), (20.0, 20.0, 20.0))
    """
    if not quantum > 0:
        raise ModelError(f"quantum must be > 0, got {quantum}", item="quantum")
    values = [round(g.cost / quantum) for g in job.groups if g.cost > 0]
    values += [math.floor(c / quantum) for c in job.capacities if c >= quantum]
    values = [v for v in values if v > 0]
    if not values:
        return job
    d = reduce(math.gcd, values) * quantum
    tasks = [max(1, round(g.cost / d)) if g.cost > 0 else g.tasks for g in job.groups]
    if max(tasks) > max_tasks:
        return job
    groups = tuple(Group(g.name, k, g.cost) for g, k in zip(job.groups, tasks, strict=True))
    return GroupJob(groups, job.edges, job.nodes, job.capacities)


@dataclass(frozen=True, slots=True)
class SkewSplit:
    """A job whose skewed groups were cut into near-uniform subgroups.

    ``members[subgroup]`` = (original group, original task indices).
    """

    job: GroupJob
    members: Mapping[str, tuple[str, tuple[int, ...]]]

    def assignment(self, alloc: TaskAllocation) -> dict[str, str]:
        """Original unit id ``f"{group}#{i}"`` → node, from an allocation of :attr:`job`."""
        out: dict[str, str] = {}
        for g, row in zip(alloc.job.groups, alloc.counts, strict=True):
            group, tasks = self.members[g.name]
            it = iter(tasks)
            for n, x in enumerate(row):
                for _ in range(x):
                    out[unit_id(group, next(it))] = alloc.job.nodes[n]
        return out


def split_skewed(
    job: GroupJob, task_costs: Mapping[str, Sequence[float]], *, margin: float = 0.2
) -> SkewSplit:
    """Cut groups into subgroups of near-equal task cost (paper 001, §5).

    A linear scan over a group's tasks by descending cost opens a subgroup at
    a task and keeps adding tasks while their cost stays within ``margin``
    (relative) of the subgroup's first one. An edge's IMC is shared among
    subgroup pairs in proportion to the product of their cost shares (a
    task's traffic is taken to follow its load); groups with no costs in
    ``task_costs``, or that stay in one piece, keep their name.

    Examples
    --------
    ``A``'s tasks cost 20 and 40 (more than 20 % apart): two subgroups, and the
    ``A``–``B`` IMC of 8 splits 2 : 1 with the cost shares.

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> s = split_skewed(job, {"A": [20.0, 40.0]}, margin=0.2)
    >>> [(g.name, g.tasks, g.cost) for g in s.job.groups[:2]], s.members["A/0"]
    ([('A/0', 1, 40.0), ('A/1', 1, 20.0)], ('A', (1,)))
    >>> [round(e.imc, 3) for e in s.job.edges]
    [5.333, 2.667, 6.0]
    """
    if not 0 <= margin < 1:
        raise ModelError(f"margin must be in [0, 1), got {margin}", item="margin")
    groups: list[Group] = []
    members: dict[str, tuple[str, tuple[int, ...]]] = {}
    share: dict[str, list[tuple[str, float]]] = {}
    for g in job.groups:
        costs = task_costs.get(g.name)
        if costs is None:
            groups.append(g)
            members[g.name] = (g.name, tuple(range(g.tasks)))
            share[g.name] = [(g.name, 1.0)]
            continue
        if len(costs) != g.tasks or any(c < 0 for c in costs):
            raise ModelError(f"need {g.tasks} costs >= 0", item=f"group {g.name}")
        order = sorted(range(g.tasks), key=lambda t: -costs[t])
        runs: list[list[int]] = []
        for t in order:
            if runs and costs[t] >= (1 - margin) * costs[runs[-1][0]]:
                runs[-1].append(t)
            else:
                runs.append([t])
        total = sum(costs)
        share[g.name] = []
        for k, run in enumerate(runs):
            name = g.name if len(runs) == 1 else f"{g.name}/{k}"
            cost = sum(costs[t] for t in run)
            groups.append(Group(name, len(run), cost))
            members[name] = (g.name, tuple(sorted(run)))
            frac = cost / total if total > 0 else len(run) / g.tasks
            share[g.name].append((name, frac))
    edges = [
        GroupEdge(a, b, e.imc * fa * fb)
        for e in job.edges
        for a, fa in share[e.src]
        for b, fb in share[e.dst]
    ]
    return SkewSplit(GroupJob(tuple(groups), tuple(edges), job.nodes, job.capacities), members)
