"""Backtracking completion of naive, TL and TD (paper 001, §2.2), checked by hand and by enumeration."""

from __future__ import annotations

import itertools
import random

import pytest

from streamscale.planning.placement.backtrack import backtrack
from streamscale.planning.placement.groups import GroupJob, TaskAllocation
from streamscale.planning.placement.naive_pairs import naive_pairs
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down
from tests.planning.test_optimal import brute_force

# Tasks cost 33 % (A), 30 % (B) and 40 % (C); an A–B link carries 8/4 = 2 MB/s, a B–C
# link 6/2 = 3. Every per-node split of the 166 % over two 100 % nodes, by hand:
# {A, B} + {A, B, C} and {A, B, C} + ... overflow (103 %); {A, A, B} (96) + {B, C} (70)
# gains 2·2 + 3 = 7; {B, B, C} (100) + {A, A} (66) gains 2·3 = 6; {A, B, B} (93) +
# {A, C} (73) gains 2·2 = 4; {A, A, C} (106) does not fit. So the optimum is 7.
#
# TD as printed: s(A,B) = 8/126 > s(B,C) = 6/100, so A–B comes first; it does not fit
# one node (126 %), σ = 33 + 30·⌊2/2⌋ = 63, k = ⌊100/63⌋ = 1: one A and one B on n0,
# then the rest (63 %) fits n1. B–C: B is placed, mode "second" on B's nodes: k =
# ⌊37/40⌋ = 0, C goes to R, and Algorithm 3 stops because 40 > 37 on every node.
# TL (significance, either pair order) ends the same way: (A0,B0) on n0, then the next
# pair of A–B needs 63 > 37 and goes to n1 (diagonal) — and C meets 37 % everywhere.
GAP = GroupJob.build(
    [("A", 2, 66.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    [("A", "B", 8.0), ("B", "C", 6.0)],
    {"n0": 100.0, "n1": 100.0},
)


def test_the_gap_instance_by_enumeration() -> None:
    assert brute_force(GAP) == pytest.approx(7.0)


@pytest.mark.parametrize("literal", [False, True])
def test_td_single_pass_leaves_c_unplaced_as_printed(literal: bool) -> None:
    res = top_down(GAP, literal=literal, backtrack=False)
    assert res.node_counts() == {"A": {"n0": 1, "n1": 1}, "B": {"n0": 1, "n1": 1}, "C": {}}
    assert res.unplaced == (0, 0, 1) and not res.complete


def test_tl_single_pass_leaves_c_unplaced_as_printed() -> None:
    res = task_level(GAP, backtrack=False)
    assert res.unplaced == (0, 0, 1) and not res.complete


@pytest.mark.parametrize(
    "alloc",
    [
        lambda: top_down(GAP),
        lambda: top_down(GAP, literal=True),
        lambda: top_down(GAP, literal=True, no_split="to-r"),
        lambda: task_level(GAP),
        lambda: task_level(GAP, order="storm"),
    ],
    ids=["td", "td-literal", "td-literal-to-r", "tl", "tl-storm"],
)
def test_td_and_tl_complete_the_gap_instance(alloc: object) -> None:
    res = alloc()  # type: ignore[operator]
    assert res.complete and res.respects_capacities()
    assert res.gain <= brute_force(GAP) + 1e-9


def test_td_keeps_its_pair_and_reaches_the_optimum() -> None:
    # Keeping n0's A and B, the search adds the second A there (96 %) and puts C beside
    # the second B on n1 (70 %): links A–B 2·1 + B–C 1, gain 2·2 + 3 = 7.
    res = top_down(GAP)
    assert res.node_counts() == {"A": {"n0": 2}, "B": {"n0": 1, "n1": 1}, "C": {"n1": 1}}
    assert res.loads == pytest.approx((96.0, 70.0))
    assert res.gain == pytest.approx(7.0) and res.collocated_links == 3


def test_naive_is_complete_without_backtracking() -> None:
    # B–C links first (3 MB/s): B, B, C fill n0 (100 %), both A go to n1: gain 6.
    for bt in (False, True):
        res = naive_pairs(GAP, backtrack=bt)
        assert res.node_counts() == {"A": {"n1": 2}, "B": {"n0": 2}, "C": {"n0": 1}}
        assert res.gain == pytest.approx(6.0)


def test_a_completable_allocation_is_kept_and_only_the_leftovers_added() -> None:
    job = GroupJob.build(
        [("a", 2, 60.0), ("b", 1, 50.0), ("c", 3, 30.0)],
        [("a", "b", 4.0)],
        {"n0": 100.0, "n1": 100.0},
    )
    # a on n0 and n1 (30 % each), b on n1: c (10 % each) fits beside either.
    got = backtrack(job, [[1, 1], [0, 1], [0, 0]])
    assert got is not None
    assert got[0] == [1, 1] and got[1] == [0, 1] and sum(got[2]) == 3
    assert TaskAllocation.of(job, got, "x").respects_capacities()


def test_none_when_no_complete_allocation_exists() -> None:
    job = GAP.with_capacities([100.0, 60.0])
    assert brute_force(job) < 0
    assert backtrack(job, [[1, 1], [1, 1], [0, 0]]) is None
    assert not top_down(job).complete and not task_level(job).complete
    assert not naive_pairs(job).complete


def test_gives_up_explicitly_past_its_step_bound() -> None:
    assert backtrack(GAP, [[1, 1], [1, 1], [0, 0]], max_steps=1) is None
    with pytest.raises(ValueError, match="max_steps"):
        backtrack(GAP, [[0, 0]] * 3, max_steps=0)


def _feasible_by_enumeration(job: GroupJob) -> bool:
    return brute_force(job) >= 0


def test_finds_a_complete_allocation_exactly_when_enumeration_does() -> None:
    rng = random.Random(11)
    seen = {True: 0, False: 0}
    for _ in range(300):
        ng = rng.randint(1, 4)
        groups = [
            (f"g{i}", rng.randint(1, 3), float(rng.choice([0, 20, 35, 50, 70, 90])))
            for i in range(ng)
        ]
        edges = [(f"g{i}", f"g{j}", 5.0) for i, j in itertools.combinations(range(ng), 2)]
        caps = {f"n{k}": float(rng.choice([0, 40, 60, 100])) for k in range(rng.randint(1, 3))}
        job = GroupJob.build(groups, edges, caps)
        empty = [[0] * len(job.nodes) for _ in job.groups]
        got = backtrack(job, empty)
        feasible = _feasible_by_enumeration(job)
        seen[feasible] += 1
        assert (got is not None) == feasible
        if got is not None:
            alloc = TaskAllocation.of(job, got, "x")
            assert alloc.complete and alloc.respects_capacities()
            # Take some tasks back out: the search puts them back and moves nothing else.
            partial = [[rng.randint(0, x) for x in row] for row in got]
            again = backtrack(job, partial)
            assert again is not None
            for r1, r2 in zip(partial, again, strict=True):
                assert all(y >= x for x, y in zip(r1, r2, strict=True))
            assert TaskAllocation.of(job, again, "x").complete
    assert min(seen.values()) >= 50
