"""TD-RC: re-plan on a marked cost change (paper 001, §6, Fig. 9)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.planning.placement.groups import GroupJob, TaskAllocation
from streamscale.planning.placement.reconfigure import cost_change, reconfigure
from streamscale.planning.placement.top_down import top_down
from streamscale.planning.random_jobs import random_job


def job(scale: float = 1.0) -> GroupJob:
    return GroupJob.build(
        [("a", 4, 120.0), ("b", 4, 120.0)],
        [("a", "b", 40.0)],
        {"n1": 100.0, "n2": 100.0, "n3": 100.0},
    ).scaled(scale)


def test_cost_change() -> None:
    assert cost_change(job(), job()) == 0.0
    assert cost_change(job(), job(0.5)) == pytest.approx(0.5)
    other = GroupJob.build([("a", 4, 120.0)], [], {"n1": 100.0, "n2": 100.0, "n3": 100.0})
    assert math.isinf(cost_change(job(), other))
    assert math.isinf(cost_change(job(), job().with_capacities([100.0, 100.0, 90.0])))


def test_small_change_keeps_the_allocation() -> None:
    cur = top_down(job())
    step = reconfigure(cur, job(0.9), threshold=0.2)
    assert not step.replanned and step.reason == "change below threshold"
    assert step.allocation.counts == cur.counts
    assert step.planned_for == job()


def test_lower_rate_replans_to_fuse_more() -> None:
    cur = top_down(job())
    step = reconfigure(cur, job(0.4), threshold=0.2)
    assert step.replanned
    assert step.gain_new > step.gain_kept
    assert step.allocation.complete and step.allocation.respects_capacities()
    # At 40 % the whole job (96 %) fits one node: every link collocated.
    assert step.allocation.gain == pytest.approx(40.0 * 0.4)


def test_overload_forces_a_replan() -> None:
    cur = top_down(job(0.4))
    step = reconfigure(cur, job(), threshold=10.0)
    assert step.replanned and step.reason == "running allocation no longer fits"
    assert step.allocation.respects_capacities()


def test_drift_adds_up_against_the_planned_costs() -> None:
    cur = top_down(job())
    s1 = reconfigure(cur, job(0.85), threshold=0.2)
    assert not s1.replanned
    s2 = reconfigure(s1.allocation, job(0.7), threshold=0.2, planned_for=s1.planned_for)
    assert s2.change == pytest.approx(0.3)
    assert s2.replanned or s2.reason == "cost change; re-plan gains no more"


def test_threshold_validated() -> None:
    with pytest.raises(ModelError):
        reconfigure(top_down(job()), job(), threshold=-1.0)


@given(seed=st.integers(0, 10_000), factor=st.floats(0.2, 1.5))
def test_never_keeps_an_overloaded_allocation(seed: int, factor: float) -> None:
    base = random_job(seed)
    cur = top_down(base)
    new = base.scaled(factor)
    step = reconfigure(cur, new, threshold=0.2)
    kept = TaskAllocation.of(new, cur.counts, "td")
    if not step.replanned:
        assert step.allocation.counts == cur.counts
        assert kept.respects_capacities()
    elif kept.respects_capacities():
        assert step.gain_new > step.gain_kept
    if step.allocation.complete:
        assert step.allocation.respects_capacities()
