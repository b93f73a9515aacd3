"""Smoke test of ``streamscale reproduce task-allocation`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments.task_allocation import run


@pytest.mark.slow
def test_tiny_reproduction_writes_results(tmp_path: Path) -> None:
    run(tmp_path, quick=True, seed=3, graphs=6, noisy_graphs=3, window_s=0.02)
    saved = json.loads((tmp_path / "results.json").read_text())
    opt = saved["optimality"]
    assert opt["graphs"] == 6
    for key in ("naive_pct", "tl_pct", "td_pct"):
        assert 0.0 < opt[key] <= 100.0 + 1e-9
    thr = saved["throughput"]
    assert thr["td_per_s"] > 0 and thr["tl_per_s"] > 0
    assert len(saved["task_count"]["rows"]) == 7
    assert len(saved["varying_rate"]["rows"]) == 12
    md = (tmp_path / "results.md").read_text()
    assert "93.1" in md and "Fig. 4(b)" in md
    for png in ("optimality.png", "micro.png", "throughput.png"):
        assert (tmp_path / png).stat().st_size > 0
