"""Smoke test of ``streamscale reproduce elastic-allocator`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamscale.experiments.elastic_allocator import ALGORITHMS, METRICS, run_config
from streamscale.experiments.elastic_allocator_feasibility import (
    cp_sat_feasible,
    exhaustive_feasible,
    random_instance,
)
from streamscale.experiments.elastic_allocator_setup import setting


@pytest.mark.slow
def test_tiny_reproduction_writes_results(tmp_path: Path) -> None:
    res = run_config(
        tmp_path, seed=2, rates=(200, 1200), repetitions=2, tiny=6, medium=2, time_limit_s=2.0
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
    assert "Fig. 4" in (tmp_path / "results.md").read_text()


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
