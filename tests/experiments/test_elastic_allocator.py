"""Smoke test of ``streamscale reproduce elastic-allocator`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamscale.experiments.elastic_allocator import (
    ALGORITHMS,
    DEFINITIONS,
    METRICS,
    run_config,
)
from streamscale.experiments.elastic_allocator_feasibility import (
    cp_sat_feasible,
    exhaustive_feasible,
    exhaustive_optimum,
    objective_gap,
    random_instance,
)
from streamscale.experiments.elastic_allocator_setup import setting
from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorOperator,
    AllocatorProblem,
)
from streamscale.planning.placement.gma import gma


@pytest.mark.slow
def test_tiny_reproduction_writes_results(tmp_path: Path) -> None:
    res = run_config(
        tmp_path,
        seed=2,
        rates=(200, 1200),
        repetitions=2,
        tiny=6,
        medium=2,
        time_limit_s=2.0,
        gap=4,
    )
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["runs"]) == 2 * len(ALGORITHMS)
    for row in saved["runs"]:
        assert row["algorithm"] in ALGORITHMS and row["rate"] in (200, 1200)
        assert all(row[m] >= 0.0 for m in METRICS)
    assert saved["feasibility"]["tiny"]["instances"] == 6
    assert len(saved["paired"]) == 2 * 2
    assert res["feasibility"]["tiny"]["gma_missed"] == 0
    assert (tmp_path / "utilization.png").stat().st_size > 0
    assert (tmp_path / "deviation.png").stat().st_size > 0
    md = (tmp_path / "results.md").read_text()
    assert "Fig. 4" in md and DEFINITIONS in md
    assert all(0.0 <= row["link_utilization"] <= 1.0 for row in saved["runs"])
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert heads == saved["headline"]
    assert {h["variant"] for h in heads} == {"literal", "tuned"}


def test_setting_carries_running_queries() -> None:
    low, high = setting(200.0, 5), setting(1200.0, 5)
    assert [n.name for n in low.nodes] == [n.name for n in high.nodes]
    # the running queries add load that grows with the rate, and hold slots
    assert sum(n.reserved_cpu for n in high.nodes) > sum(n.reserved_cpu for n in low.nodes)
    assert sum(n.slots for n in low.nodes) == 30 - 14
    assert len(low.operators) == 10


def test_oracles_agree_on_small_instances() -> None:
    rng = np.random.default_rng(4)
    for _ in range(15):
        p = random_instance(rng, 3, 4)
        assert cp_sat_feasible(p, time_limit_s=5.0) == exhaustive_feasible(p)


def test_exhaustive_optimum_hand_checked() -> None:
    # Two equal idle nodes, two 30 % operators, no flows: one per node gives
    # loads 0.3, 0.3 (R_dev 0); both on one node 0.6, 0 (R_dev ≈ 0.42).
    nodes = tuple(AllocatorNode(f"n{i}", 100.0, bandwidth_mbps=100.0) for i in range(2))
    ops = (AllocatorOperator("a", 30.0), AllocatorOperator("b", 30.0))
    p = AllocatorProblem(nodes, ops, ())
    assert exhaustive_optimum(p) == pytest.approx(0.0)


def test_gma_never_beats_the_exhaustive_optimum() -> None:
    rng = np.random.default_rng(7)
    for _ in range(12):
        p = random_instance(rng, 2, 4)
        opt = exhaustive_optimum(p)
        res = gma(p)
        assert (opt is None) <= (not res.feasible)  # no feasible placement: GMA finds none
        if res.feasible:
            ev = res.evaluation
            assert opt is not None and ev.cpu_deviation + ev.bw_deviation >= opt - 1e-9
    g = objective_gap(6, 3)
    for v in ("gma", "gma-literal"):
        assert g[v]["at_optimum"] <= g[v]["feasible"] <= g["with_feasible_placement"]
