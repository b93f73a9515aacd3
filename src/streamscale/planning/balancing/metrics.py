"""Metrics of a key-group allocation (paper 003, §4.3.1 and §5).

* load distance: the largest deviation of a node's load from its share of
  the mean load L̄ (upper deviation over every node, lower deviation over
  N_keep only, as constraints (3)–(4) of the MILP define δ);
* load index: current average system load ÷ the load right after
  initialisation;
* collocation factor: share of key-group-to-key-group traffic that stays on
  one node;
* migrations: key groups whose node changed, and their migration cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamscale.planning.balancing.keygroups import KeyGroupProblem

__all__ = [
    "AllocationMetrics",
    "collocation_factor",
    "evaluate",
    "load_distance",
    "load_distance_pct",
    "load_index",
    "migration_cost",
    "migrations",
]


def load_distance(
    problem: KeyGroupProblem, assignment: np.ndarray | None = None, *, keep_only: bool = False
) -> float:
    """δ of the allocation: max over nodes of the deviation from w_n·L̄ (load units).

    Nodes in N_r count only when above their share (they have no lower bound);
    with ``keep_only`` they do not count at all (the balance of the nodes that stay).
    """
    loads = problem.node_loads(assignment)
    target = problem.capacity * problem.mean_load
    dev = loads - target
    up = float(dev[problem.keep].max() if keep_only else dev.max()) if dev.size else 0.0
    low = float((-dev[problem.keep]).max())
    return max(up, low, 0.0)


def load_distance_pct(
    problem: KeyGroupProblem, assignment: np.ndarray | None = None, *, keep_only: bool = False
) -> float:
    """Load distance as a percentage of the mean node load L̄."""
    mean = problem.mean_load
    d = load_distance(problem, assignment, keep_only=keep_only)
    return 0.0 if mean <= 0 else 100.0 * d / mean


def collocation_factor(problem: KeyGroupProblem, assignment: np.ndarray | None = None) -> float:
    """Percentage of the traffic between key groups whose two ends share a node."""
    a = problem.assignment if assignment is None else assignment
    tr = problem.traffic
    total = float(tr[:, 2].sum()) if tr.size else 0.0
    if total <= 0:
        return 0.0
    src, dst = tr[:, 0].astype(np.int64), tr[:, 1].astype(np.int64)
    local = float(tr[a[src] == a[dst], 2].sum())
    return 100.0 * local / total


def migrations(problem: KeyGroupProblem, assignment: np.ndarray) -> int:
    """Key groups whose node differs from the current allocation."""
    return int((np.asarray(assignment) != problem.assignment).sum())


def migration_cost(problem: KeyGroupProblem, assignment: np.ndarray) -> float:
    """Σ c_k over the key groups that move (constraint (2) of the MILP)."""
    moved = np.asarray(assignment) != problem.assignment
    return float(problem.cost[moved].sum())


def load_index(current_total_load: float, initial_total_load: float) -> float:
    """Average system load now ÷ right after initialisation (paper 003, §5)."""
    return 0.0 if initial_total_load <= 0 else current_total_load / initial_total_load


@dataclass(frozen=True, slots=True)
class AllocationMetrics:
    load_distance: float
    load_distance_pct: float
    collocation_pct: float
    migrations: int
    migration_cost: float


def evaluate(problem: KeyGroupProblem, assignment: np.ndarray) -> AllocationMetrics:
    """Every metric of ``assignment`` relative to ``problem``'s current allocation."""
    return AllocationMetrics(
        load_distance(problem, assignment),
        load_distance_pct(problem, assignment),
        collocation_factor(problem, assignment),
        migrations(problem, assignment),
        migration_cost(problem, assignment),
    )
