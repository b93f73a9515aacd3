"""The random job generator of paper 001, §7.3."""

from __future__ import annotations

import networkx as nx
import pytest

from streamscale.planning.random_jobs import random_job, random_jobs


def test_class_of_jobs() -> None:
    for job in random_jobs(200, seed=11):
        assert 3 <= len(job.groups) <= 7
        assert job.total_tasks == 17
        assert job.total_cost == pytest.approx(500.0)
        for g in job.groups:
            assert g.cost == pytest.approx(500.0 * g.tasks / 17)
        assert job.capacities == (100.0,) * 8
        assert all(5.0 <= e.imc <= 20.0 for e in job.edges)
        dag = nx.DiGraph([(e.src, e.dst) for e in job.edges])
        dag.add_nodes_from(g.name for g in job.groups)
        assert nx.is_directed_acyclic_graph(dag)
        assert nx.is_weakly_connected(dag)
        out = [dag.out_degree(g.name) for g in job.groups]
        assert out[-1] == 0 and all(1 <= d <= 3 for d in out[:-1])


def test_fanout_distribution() -> None:
    counts = {1: 0, 2: 0, 3: 0}
    for job in random_jobs(400, seed=3, groups=(7, 7)):
        names = [g.name for g in job.groups]
        for n in names[:4]:  # ≥ 3 later groups: fan-out not truncated
            counts[sum(1 for e in job.edges if e.src == n)] += 1
    total = sum(counts.values())
    assert 0.64 < counts[1] / total < 0.76
    assert 0.19 < counts[2] / total < 0.31
    assert counts[3] / total < 0.09


def test_seeded() -> None:
    assert random_job(7) == random_job(7)
    assert list(random_jobs(3, seed=2)) == list(random_jobs(3, seed=2))
    assert random_job(7) != random_job(8)


@pytest.mark.parametrize("split", ["multinomial", "compositions"])
def test_both_splits_keep_the_class(split: str) -> None:
    for job in random_jobs(100, seed=5, split=split):  # type: ignore[arg-type]
        assert 3 <= len(job.groups) <= 7 and job.total_tasks == 17
        assert all(g.tasks >= 1 for g in job.groups)


def test_split_spread_matches_its_distribution() -> None:
    # Five groups of 17 tasks. multinomial: 1 + Mult(12, 1/5) per group, variance
    # 12 · 1/5 · 4/5 = 1.92. compositions (uniform over the C(16, 4) cuts): variance
    # (n − k)·n·(k − 1) / (k²·(k + 1)) = 12·17·4 / (25·6) = 5.44.
    def variance(split: str) -> float:
        sizes = [
            g.tasks
            for job in random_jobs(600, seed=9, groups=(5, 5), split=split)  # type: ignore[arg-type]
            for g in job.groups
        ]
        mean = sum(sizes) / len(sizes)
        assert mean == pytest.approx(17 / 5)
        return sum((x - mean) ** 2 for x in sizes) / len(sizes)

    assert variance("multinomial") == pytest.approx(1.92, rel=0.12)
    assert variance("compositions") == pytest.approx(5.44, rel=0.12)


def test_unknown_split_names_itself() -> None:
    from streamscale.errors import ModelError

    with pytest.raises(ModelError, match="unknown split"):
        random_job(1, split="even")  # type: ignore[arg-type]


def test_tree_shape_gives_children_by_the_fanout() -> None:
    # Every group but the first has exactly one parent, an earlier group, and the
    # parents take children in order: a tree of |V| − 1 edges, 1–3 children each.
    children = {1: 0, 2: 0, 3: 0}
    for job in random_jobs(400, seed=4, groups=(7, 7), shape="tree"):
        names = [g.name for g in job.groups]
        tree = nx.DiGraph([(e.src, e.dst) for e in job.edges])
        assert len(job.edges) == len(names) - 1 and nx.is_arborescence(tree)
        assert [tree.in_degree(n) for n in names] == [0] + [1] * 6
        assert all(names.index(e.src) < names.index(e.dst) for e in job.edges)
        parents = [names.index(e.src) for e in job.edges]
        assert parents == sorted(parents)
        degrees = [tree.out_degree(n) for n in names if tree.out_degree(n)]
        assert all(1 <= d <= 3 for d in degrees)
        for d in degrees[:-1]:  # the last parent's fan-out may be truncated
            children[d] += 1
        assert job.total_tasks == 17 and job.total_cost == pytest.approx(500.0)
    total = sum(children.values())
    assert 0.63 < children[1] / total < 0.77
    assert 0.18 < children[2] / total < 0.32
    with pytest.raises(Exception, match="unknown shape"):
        random_job(1, shape="ring")  # type: ignore[arg-type]
