"""TD (paper 001, §4): Example 2 and small hand-checked cases."""

from __future__ import annotations

import pytest

from streamscale.planning.placement.groups import GroupJob
from streamscale.planning.placement.top_down import top_down


def example2(nodes: int = 4) -> GroupJob:
    """Fig. 2: v1 10 tasks, v2 20, v3 10, v4 10; each group 40 %; 40 % spare per node.

    ⟨v1,v2⟩ and ⟨v2,v3⟩ carry about the same IMC, ⟨v3,v4⟩ much less.
    """
    return GroupJob.build(
        [("v1", 10, 40.0), ("v2", 20, 40.0), ("v3", 10, 40.0), ("v4", 10, 40.0)],
        [("v1", "v2", 100.0), ("v2", "v3", 99.0), ("v3", "v4", 20.0)],
        {f"n{i + 1}": 40.0 for i in range(nodes)},
    )


def links(alloc: object, a: int, b: int) -> int:
    counts = alloc.counts  # type: ignore[attr-defined]
    return sum(x * y for x, y in zip(counts[a], counts[b], strict=True))


def test_example2_td_collocates_100_links_of_v1_v2() -> None:
    res = top_down(example2())
    assert res.complete and res.respects_capacities()
    # Five v1 and ten v2 tasks on each of two nodes: 2·(5·10) = 100 links.
    assert links(res, 0, 1) == 100
    assert sorted(c for c in res.node_counts()["v1"].values()) == [5, 5]
    assert sorted(c for c in res.node_counts()["v2"].values()) == [10, 10]
    # v3 and v4 then pair up on the two remaining nodes.
    assert links(res, 2, 3) == 50
    assert res.collocated_links == 150
    assert res.gain == pytest.approx(100 * 100 / 200 + 20 * 50 / 100)


def test_fuses_a_pair_that_fits() -> None:
    job = GroupJob.build([("a", 2, 30.0), ("b", 3, 30.0)], [("a", "b", 12.0)], {"n1": 100.0})
    res = top_down(job)
    assert res.node_counts() == {"a": {"n1": 2}, "b": {"n1": 3}}
    assert res.gain == pytest.approx(12.0)


def test_splits_both_groups_in_balanced_slices() -> None:
    # σ = 10 + 5·2 = 20 per split; a 50 % node takes k = 2 splits (2 a + 4 b),
    # then fills the rest of the node with one more b only once a is exhausted.
    job = GroupJob.build(
        [("a", 4, 40.0), ("b", 8, 40.0)], [("a", "b", 32.0)], {"n1": 50.0, "n2": 50.0}
    )
    res = top_down(job)
    assert res.complete and res.respects_capacities()
    assert res.node_counts() == {"a": {"n1": 2, "n2": 2}, "b": {"n1": 4, "n2": 4}}
    assert res.collocated_links == 16


def test_fills_the_partner_nodes_by_expected_gain() -> None:
    # a is placed first with b (highest significance); c then goes where a is.
    job = GroupJob.build(
        [("a", 2, 20.0), ("b", 2, 20.0), ("c", 4, 40.0)],
        [("a", "b", 100.0), ("a", "c", 10.0)],
        {"n1": 60.0, "n2": 60.0},
    )
    res = top_down(job)
    assert res.complete and res.respects_capacities()
    assert res.node_counts()["a"] == {"n1": 2}
    assert res.node_counts()["c"] == {"n1": 2, "n2": 2}


def test_fuses_two_nodes_when_the_pair_is_placed_apart() -> None:
    # ⟨a,b⟩ and ⟨c,d⟩ each fill part of a node; ⟨b,c⟩ comes last and fuses them.
    job = GroupJob.build(
        [("a", 1, 10.0), ("b", 1, 10.0), ("c", 1, 10.0), ("d", 1, 10.0)],
        [("a", "b", 50.0), ("c", "d", 40.0), ("b", "c", 1.0)],
        {"n1": 40.0, "n2": 40.0},
    )
    res = top_down(job)
    assert res.complete and res.respects_capacities()
    # Equal nodes: the tasks move to the node of the pair's second group.
    assert res.node_counts() == {"a": {"n2": 1}, "b": {"n2": 1}, "c": {"n2": 1}, "d": {"n2": 1}}
    assert res.gain == pytest.approx(91.0)


def test_reports_failure_explicitly() -> None:
    job = GroupJob.build([("a", 1, 150.0)], [], {"n1": 100.0})
    res = top_down(job)
    assert not res.complete
    assert res.unplaced == (1,)
    assert res.assignment() == {}


def test_affinity_singles_are_complete_and_valid() -> None:
    res = top_down(example2(), singles="affinity")
    assert res.complete and res.respects_capacities()
    assert links(res, 0, 1) == 100


def test_assignment_names_every_unit_once() -> None:
    res = top_down(example2())
    units = res.assignment()
    assert len(units) == 50
    assert {u.split("#")[0] for u in units} == {"v1", "v2", "v3", "v4"}
    assert set(units.values()) <= {"n1", "n2", "n3", "n4"}


def test_max_links_split_gives_a_node_its_best_slice() -> None:
    # Balanced slices put 3 spout + 6 count on the first node (18 links);
    # the whole spout group with 6 count tasks fits too (24 links).
    job = GroupJob.build(
        [("spout", 4, 160.0), ("count", 8, 800.0)],
        [("spout", "count", 24.0)],
        {"n1": 800.0, "n2": 800.0},
    )
    balanced = top_down(job)
    most = top_down(job, split="max-links")
    assert balanced.node_counts()["spout"] == {"n1": 3, "n2": 1}
    assert most.node_counts()["spout"] == {"n1": 4}
    assert most.collocated_links == 24 > balanced.collocated_links == 20
    with pytest.raises(ValueError):
        top_down(job, split="nope")  # type: ignore[arg-type]


def test_literal_second_mode_fills_only_the_best_partner_node() -> None:
    # ⟨a,b⟩ splits into (a1, b1) on n1 and n2 (90 % each); c (4 tasks of 5 %)
    # then joins a's nodes, 2 tasks fit on each. Algorithm 5 as written fills
    # only the first (n1) and leaves the other 2 to R, which puts them on the
    # empty n3; the default also fills n2.
    job = GroupJob.build(
        [("a", 2, 60.0), ("b", 2, 120.0), ("c", 4, 20.0)],
        [("a", "b", 100.0), ("a", "c", 10.0)],
        {"n1": 100.0, "n2": 100.0, "n3": 100.0},
    )
    tuned, literal = top_down(job), top_down(job, literal=True)
    assert [list(r) for r in tuned.counts] == [[1, 1, 0], [1, 1, 0], [2, 2, 0]]
    assert [list(r) for r in literal.counts] == [[1, 1, 0], [1, 1, 0], [2, 0, 2]]
    assert links(tuned, 0, 2) == 4 and links(literal, 0, 2) == 2
    # The rule alone: literal TD with every partner node filled, tuned TD with only one.
    assert top_down(job, literal=True, partners="all").counts == tuned.counts
    assert top_down(job, partners="best").counts == literal.counts
    with pytest.raises(ValueError):
        top_down(job, partners="nope")  # type: ignore[arg-type]


def test_spare_fill_alone_separates_literal_from_tuned_in_mode_both() -> None:
    # a (3 × 10 %) and b (8 × 10 %) do not fit one 100 % node (110 %); r = ⌊8/3⌋ = 2,
    # σ = 10 + 2·10 = 30, k = 3: a3 b6 on n1 (90 %), and a is exhausted. The spare
    # fill adds one more b there (100 %); without it b's last two go to R and
    # Algorithm 3 puts them on the roomiest node, n2. One link carries 24/24 = 1 MB/s.
    job = GroupJob.build(
        [("a", 3, 30.0), ("b", 8, 80.0)], [("a", "b", 24.0)], {"n1": 100.0, "n2": 100.0}
    )
    fill, no_fill = top_down(job), top_down(job, spare=False)
    assert [list(r) for r in fill.counts] == [[3, 0], [7, 1]]
    assert [list(r) for r in no_fill.counts] == [[3, 0], [6, 2]]
    assert fill.gain == pytest.approx(21.0) and no_fill.gain == pytest.approx(18.0)
    assert top_down(job, literal=True).counts == no_fill.counts
    assert top_down(job, literal=True, spare=True).counts == fill.counts


@pytest.mark.parametrize("literal", [False, True])
def test_a_node_that_takes_no_balanced_split_gets_part_of_one(literal: bool) -> None:
    # σ = 10 + 10·⌊12/1⌋ = 130 > 100: k = 0, where Algorithm 5 as printed
    # recurses on the same node for ever. "partial": a1 with ⌊(100 − 10)/10⌋ = 9
    # b tasks on n1 (9 links); the last 3 b go to R, and Algorithm 3 puts them on
    # the roomiest node, n2. "to-r": the whole pair goes to R, Algorithm 3 takes
    # a first (equal task costs keep group order) onto n1, then b's tasks go to
    # the roomiest node one at a time: n2, then n1 and n2 in turn, 6 + 6 (6 links).
    job = GroupJob.build(
        [("a", 1, 10.0), ("b", 12, 120.0)], [("a", "b", 12.0)], {"n1": 100.0, "n2": 100.0}
    )
    partial = top_down(job, literal=literal)
    to_r = top_down(job, literal=literal, no_split="to-r")
    assert [list(r) for r in partial.counts] == [[1, 0], [9, 3]]
    assert [list(r) for r in to_r.counts] == [[1, 0], [6, 6]]
    assert partial.gain == pytest.approx(9.0) and to_r.gain == pytest.approx(6.0)
    with pytest.raises(ValueError):
        top_down(job, no_split="nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("literal", [False, True])
def test_three_tasks_a_node_as_in_section_7_3(literal: bool) -> None:
    # §7.3's class: 30 % tasks on 100 % nodes, three to a node. a (1 task) and
    # b (3 tasks) do not fit one node (120 %); r = 3, σ = 30 + 3·30 = 120 > 100,
    # so k = 0 at once. "partial": a with ⌊70/30⌋ = 2 b on n1, 2 links of
    # 30/3 = 10 MB/s; b's last task alone on n2. "to-r": Algorithm 3 puts a on
    # n1, then b on n2, n1, n2 (roomiest first, the first of equals): 1 link.
    job = GroupJob.build(
        [("a", 1, 30.0), ("b", 3, 90.0)],
        [("a", "b", 30.0)],
        {
            "n1": 100.0,
            "n2": 100.0,
        },
    )
    partial = top_down(job, literal=literal)
    to_r = top_down(job, literal=literal, no_split="to-r")
    assert [list(r) for r in partial.counts] == [[1, 0], [2, 1]]
    assert [list(r) for r in to_r.counts] == [[1, 0], [1, 2]]
    assert partial.gain == pytest.approx(20.0) and to_r.gain == pytest.approx(10.0)
    assert partial.respects_capacities() and to_r.respects_capacities()


def test_literal_example2_matches_the_paper() -> None:
    res = top_down(example2(), literal=True)
    assert res.complete and links(res, 0, 1) == 100 and links(res, 2, 3) == 50
