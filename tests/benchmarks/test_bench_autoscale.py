"""bench_autoscale.py --smoke: a light surge on a one-worker loopback cluster, elastic and
static-peak scored, and the ratio line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_scores_both_policies_and_prints_the_ratios(run_script: Run, tmp_path: Path) -> None:
    lines = run_script("bench_autoscale", "--smoke", "--out", str(tmp_path / "out"), timeout=600)
    assert all(x["bench"] == "autoscale" for x in lines)
    *runs, ratios = lines
    assert sorted(x["policy"] for x in runs) == ["elastic", "static-peak"]
    for x in runs:
        assert 0 <= x["slo_tuples"] <= 1 and x["core_seconds"] > 0
        assert x["cost_kind"] == "wall" and x["emulated_cores"] == 4
    assert ratios["figure"] == "ratios" and ratios["core_seconds_vs_static_peak"] > 0
    assert (tmp_path / "out" / "timeline.json").exists()
