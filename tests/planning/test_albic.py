"""ALBIC collocation (paper 003, §4.3.2); the adaptation loop (§4.1) is the live policy's
(tests/control/test_policies_placement.py)."""

from __future__ import annotations

import pytest

from streamscale.planning.balancing.albic import albic, collocation_candidates, split_sets
from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import collocation_factor, load_distance, migrations


def _pipeline(n: int = 4, per_op: int = 8) -> KeyGroupProblem:
    # up/i sends mostly to down/i (one-to-one), a little to every other down group.
    groups = [f"up/{i}" for i in range(per_op)] + [f"down/{i}" for i in range(per_op)]
    asg = [i % n for i in range(per_op)] + [(i + 1) % n for i in range(per_op)]
    traffic = []
    for i in range(per_op):
        for j in range(per_op):
            traffic.append((i, per_op + j, 100.0 if i == j else 1.0))
    return KeyGroupProblem.build(
        groups, [f"n{j}" for j in range(n)], [1.0] * (2 * per_op), asg, traffic=traffic
    )


def test_scores_select_one_to_one_pairs() -> None:
    p = _pipeline()
    pairs = collocation_candidates(p, score_factor=1.0)
    assert {(a, b) for _, a, b in pairs} == {(i, 8 + i) for i in range(8)}
    assert collocation_candidates(p, score_factor=100.0) == []


def test_split_sets_respects_max_partition_load() -> None:
    p = _pipeline()
    parts = split_sets(p, [list(range(16))], max_partition_load=3.5)
    assert all(p.load[s].sum() < 3.5 for s in parts)
    assert sorted(g for s in parts for g in s) == sorted(set(g for s in parts for g in s))


def test_one_new_pair_per_round_and_collocation_grows() -> None:
    p = _pipeline(n=2, per_op=10)  # a pair is 20 % of a node, under maxPartitionLoad (25 %)
    sets: tuple[tuple[int, ...], ...] = ()
    before = collocation_factor(p)
    for _ in range(6):
        res = albic(p, collocated=sets, max_migrations=3, time_limit_s=2, seed=0)
        assert migrations(p, res.assignment) <= 3
        assert res.extra["new_pairs"] <= 1
        for s in res.collocated:
            assert len(set(res.assignment[list(s)])) == 1
        p = p.replace(assignment=res.assignment)
        sets = res.collocated
    assert collocation_factor(p) > before
    assert len(sets) >= 4


def _chance_pair() -> KeyGroupProblem:
    # s0→t0 and s1→t1 carry the traffic (qualifying pairs), each pair on one node
    # by chance. A = 2.2, B = 2.0: moving s0 or t0 alone balances exactly.
    return KeyGroupProblem.build(
        ["s0", "t0", "s1", "t1", "f0", "f1", "f2", "f3"],
        ["A", "B"],
        [0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 0.8],
        [0, 0, 1, 1, 0, 0, 1, 1],
        operators=["s", "t", "s", "t", "f", "f", "f", "f"],
        traffic=[(0, 1, 10.0), (2, 3, 10.0), (0, 3, 0.1), (2, 1, 0.1)],
    )


def test_chance_collocations_are_protected() -> None:
    p = _chance_pair()
    kept = albic(p, max_migrations=1, new_pairs=0)
    assert kept.assignment[0] == kept.assignment[1] and kept.assignment[2] == kept.assignment[3]
    # Unprotected, the exact MILP balances by splitting the pair on A.
    split = albic(p, max_migrations=1, new_pairs=0, protect_existing=False)
    assert split.assignment[0] != split.assignment[1]
    assert load_distance(p, split.assignment) == pytest.approx(0.0)


def test_many_pairs_fit_their_share_of_the_budget() -> None:
    # 10 one-to-one pairs on 2 nodes, every pair split at the start (up/i on i % 2,
    # down/i on (i + 1) % 2): collocating one pair moves one key group.
    p = _pipeline(n=2, per_op=10)
    # maxLoadDistance 15 %: one key group is 10 % of a node's load, so a pin fits
    kw = {"max_migrations": 6, "max_load_distance_pct": 15.0, "time_limit_s": 2, "seed": 0}
    one = albic(p, **kw)
    many = albic(p, new_pairs=None, pair_share=0.5, **kw)
    assert one.extra["new_pairs"] == 1
    # half of 6 moves for pairs: three pairs, each collocated once moved
    assert many.extra["new_pairs"] == 3
    assert migrations(p, many.assignment) <= 6
    for s in many.collocated:
        assert len(set(many.assignment[list(s)])) == 1
    together = sum(many.assignment[i] == many.assignment[10 + i] for i in range(10))
    assert together >= 3
    assert collocation_factor(p, many.assignment) > collocation_factor(p, one.assignment)


def test_pairs_keep_nodes_within_max_load_distance() -> None:
    # up0, up1 and a filler on a; down0, down1 and a filler on b: 3 units each. Any pin
    # moves one unit onto a node; within 5 % of the mean (cap 3.15) none fits, within
    # 40 % (cap 4.2) the first goes to a (tie), the second to b, the less loaded then.
    p = KeyGroupProblem.build(
        ["up0", "up1", "fa", "down0", "down1", "fb"],
        ["a", "b"],
        [1.0] * 6,
        [0, 0, 0, 1, 1, 1],
        operators=["up", "up", "f", "down", "down", "f"],
        traffic=[(0, 3, 100.0), (1, 4, 90.0)],
    )
    kw = {"max_migrations": 8, "new_pairs": None, "pair_share": 0.5,
          "max_partition_load_pct": 80.0, "seed": 0}  # fmt: skip
    tight = albic(p, max_load_distance_pct=5.0, **kw)
    assert tight.extra["new_pairs"] == 0
    loose = albic(p, max_load_distance_pct=40.0, **kw)
    assert loose.extra["new_pairs"] == 2
    assert sorted(map(sorted, loose.collocated)) == [[0, 3], [1, 4]]
    a = loose.assignment
    assert a[0] == a[3] == 0 and a[1] == a[4] == 1
    with pytest.raises(ValueError, match="pair_share"):
        albic(p, new_pairs=None, pair_share=1.5)
