"""ALBIC collocation (paper 003, §4.3.2) and the adaptation loop (§4.1, Algorithm 1)."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.planning.balancing.adaptation import adapt
from streamscale.planning.balancing.albic import albic, collocation_candidates, split_sets
from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import collocation_factor, load_distance, migrations
from streamscale.planning.balancing.milp import solve_milp


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


def test_adapt_releases_empty_removed_nodes_and_scales_in() -> None:
    # 4 nodes, small uneven load: the loop marks nodes for removal, drains them, then
    # releases them. Node loads a 0.17, b 0.23, c 0.2, d 0.2.
    loads = [0.05, 0.15, 0.1, 0.1, 0.12, 0.08, 0.1, 0.1]
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(8)], ["a", "b", "c", "d"], loads, np.arange(8) % 4
    )

    def bal(q: KeyGroupProblem):
        return solve_milp(q, max_migrations=2, time_limit_s=2, deterministic_limit=0.05)

    out = adapt(p, bal, node_capacity=1.0)
    # Load 0.8: ⌈0.8 / 0.7⌉ = 2 nodes stay; the two least loaded under the tentative
    # allocation (Algorithm 1 decides scaling from it) go.
    tent = [sum(loads[g] for g in range(8) if out.tentative.assignment[g] == j) for j in range(4)]
    least = sorted(range(4), key=lambda j: (tent[j], j))[:2]
    assert sorted(out.marked) == sorted(p.nodes[j] for j in least) and not out.added
    stay = tuple(n for n in p.nodes if n not in out.marked)
    q = out.problem.replace(assignment=out.result.assignment)
    out_marked = out.marked
    released: list[str] = []
    for _ in range(6):
        out = adapt(q, bal, node_capacity=1.0)
        released += out.released
        nxt = out.problem.replace(assignment=out.result.assignment)
        assert (
            sum(1 for g in range(8) if q.nodes[q.assignment[g]] != nxt.nodes[nxt.assignment[g]])
            <= 2
        )  # the per-period budget
        for g in range(8):  # nothing moves into a node being drained
            if nxt.removing[nxt.assignment[g]]:
                assert nxt.nodes[nxt.assignment[g]] == q.nodes[q.assignment[g]]
        q = nxt
    # The marked nodes were drained and released, the others stay and hold everything.
    assert sorted(released) == sorted(out_marked) and tuple(q.nodes) == stay
    assert not q.removing.any()
    # Balance: the least load distance any allocation on the two nodes left reaches,
    # by brute force.
    load = np.array(q.load)
    best = min(
        abs(float(load[[g for g in range(8) if mask >> g & 1]].sum()) - load.sum() / 2)
        for mask in range(2**8)
    )
    node_loads = [float(load[q.assignment == j].sum()) for j in range(2)]
    assert max(abs(x - load.sum() / 2) for x in node_loads) == pytest.approx(best, abs=1e-9)


def test_adapt_scales_out_only_when_balancing_cannot_fix_overload() -> None:
    # Imbalanced but enough capacity: balancing fixes it, no scale-out.
    p = KeyGroupProblem.build([f"g{i}" for i in range(4)], ["a", "b"], [0.4] * 4, [0, 0, 0, 1])
    bal = lambda q: solve_milp(q, time_limit_s=2, deterministic_limit=0.05)  # noqa: E731
    out = adapt(p, bal, node_capacity=1.0, spare_nodes=["x"])
    assert not out.added
    # Overloaded everywhere: scale out onto the spare node.
    p2 = KeyGroupProblem.build([f"g{i}" for i in range(4)], ["a", "b"], [0.6] * 4, [0, 0, 1, 1])
    out2 = adapt(p2, bal, node_capacity=1.0, spare_nodes=["x"])
    assert out2.added == ("x",)
    assert (out2.result.assignment == 2).any()


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
    kw = {"max_migrations": 8, "new_pairs": None, "max_partition_load_pct": 80.0, "seed": 0}
    tight = albic(p, max_load_distance_pct=5.0, **kw)
    assert tight.extra["new_pairs"] == 0
    loose = albic(p, max_load_distance_pct=40.0, **kw)
    assert loose.extra["new_pairs"] == 2
    assert sorted(map(sorted, loose.collocated)) == [[0, 3], [1, 4]]
    a = loose.assignment
    assert a[0] == a[3] == 0 and a[1] == a[4] == 1
    with pytest.raises(ValueError, match="pair_share"):
        albic(p, new_pairs=None, pair_share=1.5)
