"""COLA baseline (paper 003, §5.3): recursive METIS partitioning from scratch."""

from __future__ import annotations

import numpy as np

from streamscale.planning.balancing.cola import cola, metis_split
from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import collocation_factor, load_distance_pct


def _pairs(k: int = 16, n: int = 4) -> KeyGroupProblem:
    # key group 2i talks only to 2i+1, and they start on different nodes.
    traffic = [(2 * i, 2 * i + 1, 100.0) for i in range(k // 2)]
    return KeyGroupProblem.build(
        [f"g{i}" for i in range(k)],
        [f"n{j}" for j in range(n)],
        [1.0] * k,
        np.arange(k) % n,
        traffic=traffic,
    )


def test_metis_split_keeps_heavy_edges_inside_parts() -> None:
    p = _pairs()
    parts = metis_split(p, list(range(16)), 2, seed=0)
    assert sorted(g for part in parts for g in part) == list(range(16))
    side = {g: i for i, part in enumerate(parts) for g in part}
    assert all(side[2 * i] == side[2 * i + 1] for i in range(8))


def test_cola_collocates_and_balances_from_scratch() -> None:
    p = _pairs()
    assert collocation_factor(p) == 0.0
    res = cola(p, seed=0)
    assert collocation_factor(p, res.assignment) == 100.0
    assert load_distance_pct(p, res.assignment) == 0.0
    for s in res.collocated:
        assert len(set(res.assignment[list(s)].tolist())) == 1
