"""bench_skew.py --smoke: static and elastic under skew on a one-worker loopback cluster,
and the ratio line with its bounds."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_runs_both_policies_and_prints_the_ratio(run_script: Run) -> None:
    lines = run_script("bench_skew", "--smoke", timeout=600)
    assert all(x["bench"] == "skew" for x in lines)
    *runs, ratio = lines
    assert [x["policy"] for x in runs] == ["static", "elastic"]
    for x in runs:
        assert x["alpha"] == 1.0 and x["cost_kind"] == "wall" and x["throughput"] >= 0
    assert ratio["figure"] == "ratio" and 0 < ratio["hot_key_share"] < 1
    assert ratio["hot_key_ceiling_tps"] > 0 and "elastic_vs_static" in ratio
