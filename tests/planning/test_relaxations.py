"""Relaxations of paper 001, §5."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.errors import ModelError
from streamscale.planning.placement.groups import GroupJob
from streamscale.planning.placement.relaxations import gcd_granularity, split_skewed
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down


def test_gcd_granularity_makes_coarse_tasks_fit() -> None:
    # Two 60 % tasks and one 80 % task cannot share two 100 % nodes; 20 %
    # tasks (the GCD of 120, 80 and 100) pack them exactly.
    job = GroupJob.build(
        [("a", 2, 120.0), ("b", 1, 80.0)], [("a", "b", 10.0)], {"n1": 100.0, "n2": 100.0}
    )
    assert not top_down(job).complete
    finer = gcd_granularity(job)
    assert finer.tasks == (6, 4)
    assert finer.task_cost == pytest.approx((20.0, 20.0))
    res = top_down(finer)
    assert res.complete and res.respects_capacities()


def test_gcd_cuts_every_task_to_size_d() -> None:
    # gcd(50, 100) = 50: fifty 1 % tasks become one task of d = 50 %.
    job = GroupJob.build([("a", 50, 50.0)], [], {"n1": 100.0})
    assert gcd_granularity(job).tasks == (1,)
    odd = GroupJob.build([("a", 1, 37.0), ("b", 1, 41.0)], [], {"n1": 100.0})
    finer = gcd_granularity(odd)
    assert finer.tasks == (37, 41)
    assert finer.task_cost == pytest.approx((1.0, 1.0))
    # 41 one-percent tasks exceed max_tasks = 10: no relaxation within the bound.
    assert gcd_granularity(odd, max_tasks=10) is odd
    with pytest.raises(ModelError):
        gcd_granularity(odd, quantum=0.0)


@pytest.mark.parametrize("seed", range(40))
def test_gcd_jobs_always_fit_when_capacity_holds_them(seed: int) -> None:
    # §5: equal tasks of size d pack nodes exactly, so TL and TD place every
    # task whenever Σ capacity ≥ Σ cost (whole percentages, coarse tasks).
    rng = np.random.default_rng(seed)
    ng, nn = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    caps = {f"n{i}": float(rng.integers(3, 11) * 10) for i in range(nn)}
    total = sum(caps.values())
    costs = rng.dirichlet(np.ones(ng)) * total * rng.uniform(0.6, 1.0)
    groups = [(f"g{i}", 1, float(max(1, int(c)))) for i, c in enumerate(costs)]
    edges = [(f"g{i}", f"g{i + 1}", float(rng.uniform(1, 10))) for i in range(ng - 1)]
    finer = gcd_granularity(GroupJob.build(groups, edges, caps))
    d = finer.task_cost[0]
    assert finer.task_cost == pytest.approx((d,) * ng)
    for res in (top_down(finer), task_level(finer), task_level(finer, order="storm")):
        assert res.complete and res.respects_capacities()


def test_split_skewed_groups_and_map_back() -> None:
    job = GroupJob.build(
        [("a", 4, 100.0), ("b", 2, 20.0)], [("a", "b", 40.0)], {"n1": 100.0, "n2": 100.0}
    )
    split = split_skewed(job, {"a": [45.0, 5.0, 44.0, 6.0]}, margin=0.2)
    names = [g.name for g in split.job.groups]
    assert names == ["a/0", "a/1", "b"]
    assert split.members["a/0"] == ("a", (0, 2))
    assert split.members["a/1"] == ("a", (1, 3))
    assert split.job.groups[0].cost == pytest.approx(89.0)
    assert sum(e.imc for e in split.job.edges) == pytest.approx(40.0)
    alloc = top_down(split.job)
    assert alloc.complete and alloc.respects_capacities()
    units = split.assignment(alloc)
    assert set(units) == {"a#0", "a#1", "a#2", "a#3", "b#0", "b#1"}


def test_split_skewed_validates() -> None:
    job = GroupJob.build([("a", 2, 10.0)], [], {"n1": 100.0})
    with pytest.raises(ModelError, match="group a"):
        split_skewed(job, {"a": [1.0]})
    assert [g.name for g in split_skewed(job, {"a": [5.0, 5.0]}).job.groups] == ["a"]
