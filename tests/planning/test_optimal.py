"""Exact optimum with CP-SAT (paper 001, §7.3): both models agree with brute force."""

from __future__ import annotations

import itertools

import pytest

from streamscale.planning.placement.groups import GroupJob, imc_gain
from streamscale.planning.placement.optimal import node_patterns, optimal
from streamscale.planning.placement.top_down import top_down
from streamscale.planning.random_jobs import random_jobs
from tests.planning.test_top_down import example2


def brute_force(job: GroupJob) -> float:
    """Best φ over every per-node count matrix (tiny jobs only)."""
    nn = len(job.nodes)
    per_group = []
    for t in job.tasks:
        per_group.append([c for c in itertools.product(range(t + 1), repeat=nn) if sum(c) == t])
    best = -1.0
    for counts in itertools.product(*per_group):
        loads = [
            sum(job.task_cost[g] * counts[g][n] for g in range(len(counts))) for n in range(nn)
        ]
        if all(ld <= c + 1e-9 for ld, c in zip(loads, job.capacities, strict=True)):
            best = max(best, imc_gain(job, counts))
    return best


TINY = GroupJob.build(
    [("a", 2, 40.0), ("b", 3, 45.0), ("c", 2, 50.0)],
    [("a", "b", 12.0), ("b", "c", 9.0), ("a", "c", 4.0)],
    {"n1": 70.0, "n2": 70.0, "n3": 50.0},
)


@pytest.mark.parametrize("method", ["patterns", "counts"])
def test_matches_brute_force(method: str) -> None:
    res = optimal(TINY, method=method)  # type: ignore[arg-type]
    assert res.proven_optimal and res.status == "OPTIMAL"
    assert res.allocation.complete and res.allocation.respects_capacities()
    assert res.allocation.gain == pytest.approx(brute_force(TINY), rel=1e-6)
    assert res.bound >= res.allocation.gain - 1e-6


# Three equal nodes of 60: a and b fit together on one node (2 x 16.5 + 2 x 0.5 = 34), so
# the optimum collocates both of a's tasks with both of b's: gain 1.0 x 4 / (2 x 2) = 1.0.
# The counts model once ordered equal nodes by load with coefficients of ~1e11 and CP-SAT
# proved 0.5.
EQUAL_NODES = GroupJob.build(
    [("a", 2, 33.0), ("b", 2, 1.0), ("c", 3, 83.5), ("d", 2, 0.0)],
    [("a", "b", 1.0)],
    {"n0": 60.0, "n1": 60.0, "n2": 60.0},
)


@pytest.mark.parametrize("method", ["patterns", "counts"])
def test_equal_nodes_keep_the_optimum(method: str) -> None:
    res = optimal(EQUAL_NODES, method=method)  # type: ignore[arg-type]
    assert res.proven_optimal and res.allocation.respects_capacities()
    assert brute_force(EQUAL_NODES) == pytest.approx(1.0)
    assert res.allocation.gain == pytest.approx(1.0, rel=1e-6)


def test_example2_optimum_is_at_least_td() -> None:
    # proven in ~1 s on a quiet machine; a CI run at a load average above 20 hit 10 s
    res = optimal(example2(), time_limit_s=120.0)
    assert res.proven_optimal
    assert res.allocation.gain >= top_down(example2()).gain - 1e-9


def test_never_below_td_on_random_jobs() -> None:
    for job in random_jobs(15, seed=5):
        res = optimal(job)
        assert res.proven_optimal and res.allocation.complete
        assert res.allocation.respects_capacities()
        assert res.allocation.gain >= top_down(job).gain - 1e-6


def test_infeasible_is_explicit() -> None:
    job = GroupJob.build([("a", 3, 180.0)], [], {"n1": 100.0, "n2": 100.0})
    for method in ("patterns", "counts"):
        res = optimal(job, method=method)  # type: ignore[arg-type]
        assert res.status == "INFEASIBLE"
        assert not res.proven_optimal
        assert not res.allocation.complete and res.allocation.unplaced == (3,)


def test_patterns_respect_capacity_and_limit() -> None:
    pats = node_patterns(TINY, 70.0, limit=1000)
    assert pats is not None and (0, 0, 0) not in pats
    for p in pats:
        assert sum(TINY.task_cost[g] * p[g] for g in range(3)) <= 70.0 + 1e-9
    assert node_patterns(TINY, 70.0, limit=3) is None


@pytest.mark.parametrize("method", ["patterns", "counts"])
def test_zero_capacity_nodes_take_nothing_costly(method: str) -> None:
    job = GroupJob.build(
        [("a", 1, 0.0), ("b", 4, 1.2e-7), ("c", 1, 100.0 / 3)],
        [("a", "b", 1.0)],
        {"n0": 0.0, "n1": 0.0, "n2": 60.0, "n3": 60.0},
    )
    res = optimal(job, method=method)  # type: ignore[arg-type]
    assert res.proven_optimal and res.allocation.respects_capacities()
    where = res.allocation.node_counts()
    assert list(where["b"].values()) == [4] and set(where["b"]) <= {"n2", "n3"}
    assert where["a"] == {next(iter(where["b"])): 1}
    # Exact fits stay feasible: three tasks of 100/3 % fill a 100 % node.
    full = GroupJob.build([("t", 3, 100.0)], [], {"n1": 100.0})
    assert optimal(full, method=method).allocation.complete  # type: ignore[arg-type]
