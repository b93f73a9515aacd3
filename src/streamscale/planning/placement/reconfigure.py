"""TD-RC: re-plan a running task allocation when its costs change markedly.

Paper 001, §6 and §7.4 (Fig. 9): the monitor aggregates each group's
processing cost and each edge's IMC; when successive measurements differ
markedly the allocator runs again (drain, reassign, resume). As the input
rate falls, costs fall with it and a re-plan fuses more tasks per node, so
the IMC gain stays high where an allocation planned once for the peak rate
loses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamscale.errors import ModelError
from streamscale.planning.placement.groups import GroupJob, TaskAllocation
from streamscale.planning.placement.top_down import top_down

__all__ = ["Reconfiguration", "cost_change", "reconfigure"]


@dataclass(frozen=True, slots=True)
class Reconfiguration:
    """The allocation to run under the new costs, and why.

    ``gain_kept`` is φ of the running allocation under the new costs;
    ``gain_new`` that of the re-plan (equal to ``gain_kept`` when none ran).
    ``planned_for`` is the job the allocation was planned for: pass it back
    as ``planned_for`` next time, so slow drifts add up to a re-plan.
    """

    allocation: TaskAllocation
    planned_for: GroupJob
    replanned: bool
    reason: str
    change: float
    gain_kept: float
    gain_new: float


def cost_change(old: GroupJob, new: GroupJob, *, floor: float = 1e-9) -> float:
    """Largest relative change of a group's cost or an edge's IMC between two jobs.

    Groups and edges are matched by name; one present in only one job, or a
    different task count or node set, counts as an infinite change.
    """
    if old.nodes != new.nodes or old.capacities != new.capacities:
        return float("inf")
    before = {g.name: (g.tasks, g.cost) for g in old.groups}
    worst = 0.0
    for g in new.groups:
        if g.name not in before or before[g.name][0] != g.tasks:
            return float("inf")
        worst = max(worst, _rel(before[g.name][1], g.cost, floor))
    if len(before) != len(new.groups):
        return float("inf")
    edges = {(e.src, e.dst): e.imc for e in old.edges}
    if len(edges) != len(new.edges):
        return float("inf")
    for e in new.edges:
        if (e.src, e.dst) not in edges:
            return float("inf")
        worst = max(worst, _rel(edges[e.src, e.dst], e.imc, floor))
    return worst


def _rel(a: float, b: float, floor: float) -> float:
    return abs(b - a) / max(abs(a), floor)


def reconfigure(
    current: TaskAllocation,
    job: GroupJob,
    *,
    threshold: float = 0.2,
    allocator: Callable[[GroupJob], TaskAllocation] = top_down,
    min_improvement: float = 0.0,
    planned_for: GroupJob | None = None,
) -> Reconfiguration:
    """Decide whether new costs warrant re-planning, and re-plan (TD-RC, paper 001 §6).

    Parameters
    ----------
    current
        The running allocation (its job holds the costs it was planned for).
    job
        The same job with the newly measured costs.
    threshold
        Relative change in any cost or IMC that triggers a re-plan.
    allocator
        The allocator to re-plan with (TD by default).
    min_improvement
        A re-plan is adopted only if its gain beats the running allocation's
        by this fraction — or if the running one no longer fits the nodes.
    planned_for
        The job the running allocation was planned for (default
        ``current.job``); changes are measured against it.

    Returns
    -------
    Reconfiguration
        The allocation to run now; re-planning never returns an allocation
        that leaves a task unplaced when the running one still fits.

    Examples
    --------
    The job of :func:`~streamscale.planning.placement.top_down.top_down`'s example runs split
    over two nodes (gain 7). At half the input rate every cost and IMC halves (a change of
    50 % > 20 %): the running allocation would gain 3.5, the re-plan fits all five tasks on
    ``n0`` and gains 4 + 3 = 7. A 10 % drift in one IMC keeps the running allocation.

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> half = GroupJob.build([("A", 2, 30.0), ("B", 2, 30.0), ("C", 1, 20.0)],
    ...                       [("A", "B", 4.0), ("B", "C", 3.0)], {"n0": 100.0, "n1": 100.0})
    >>> r = reconfigure(top_down(job), half, threshold=0.2)
    >>> r.replanned, r.gain_kept, r.gain_new, r.allocation.node_counts()
    (True, 3.5, 7.0, {'A': {'n0': 2}, 'B': {'n0': 2}, 'C': {'n0': 1}})
    >>> drift = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                        [("A", "B", 8.8), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> r = reconfigure(top_down(job), drift, threshold=0.2)
    >>> r.replanned, r.reason, round(r.change, 3)
    (False, 'change below threshold', 0.1)
    """
    if not threshold >= 0:
        raise ModelError(f"threshold must be >= 0, got {threshold}", item="threshold")
    base = planned_for if planned_for is not None else current.job
    change = cost_change(base, job)
    same_shape = current.job.tasks == job.tasks and current.job.nodes == job.nodes
    kept = TaskAllocation.of(job, current.counts, current.algorithm) if same_shape else None
    fits = kept is not None and kept.complete and kept.respects_capacities()
    gain_kept = kept.gain if kept is not None else 0.0
    if fits and change <= threshold:
        assert kept is not None
        return Reconfiguration(
            kept, base, False, "change below threshold", change, gain_kept, gain_kept
        )
    new = allocator(job)
    if not fits:
        reason = "running allocation no longer fits" if kept is not None else "job changed shape"
        return Reconfiguration(new, job, True, reason, change, gain_kept, new.gain)
    assert kept is not None
    if new.complete and new.gain > gain_kept * (1 + min_improvement):
        return Reconfiguration(
            new, job, True, "cost change; re-plan gains more", change, gain_kept, new.gain
        )
    # The running allocation is re-validated for these costs: measure from here.
    return Reconfiguration(
        kept, job, False, "cost change; re-plan gains no more", change, gain_kept, new.gain
    )
