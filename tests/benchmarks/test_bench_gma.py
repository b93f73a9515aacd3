"""bench_gma.py --smoke: GMA's placements on the paper's setting and random instances."""

from __future__ import annotations

from tests.benchmarks.conftest import Run


def test_smoke_prints_the_setting_and_every_scale(run_bench: Run) -> None:
    lines = run_bench("bench_gma", "--smoke")
    setting, *scale = lines
    assert setting["bench"] == "gma_setting" and setting["placements"] == 2
    assert setting["gma_median_ms"] > 0 and 0 <= setting["gma_feasible_share"] <= 1
    assert [(x["bench"], x["nodes"], x["units"]) for x in scale] == [
        ("gma_scale", 10, 20), ("gma_scale", 20, 50), ("gma_scale", 50, 100),
    ]  # fmt: skip
    for x in scale:
        assert x["instances"] == 1 and x["median_ms"] > 0
        assert 0 <= x["feasible_share"] <= 1 and 0 <= x["exhausted_share"] <= 1
