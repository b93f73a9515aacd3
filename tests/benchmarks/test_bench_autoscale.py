"""bench_autoscale.py --smoke: a light surge on a one-worker loopback cluster, elastic and
static-peak scored, the ratio line, the order check and the summary lines; and the fair
order and the summary by hand."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.benchmarks.conftest import Run, load

bench = load("bench_autoscale")


def test_the_order_rotates_by_one_per_repeat_then_repeats_the_first_alone() -> None:
    configs = [("real", "elastic"), ("real", "static-peak"), ("emulated", "elastic")]
    assert bench.run_order(configs, 3) == [
        [("real", "elastic"), ("real", "static-peak"), ("emulated", "elastic")],
        [("real", "static-peak"), ("emulated", "elastic"), ("real", "elastic")],
        [("emulated", "elastic"), ("real", "elastic"), ("real", "static-peak")],
        [("real", "elastic")],
    ]
    assert bench.run_order(["a", "b", "c"], 4)[3] == ["a", "b", "c"]  # the rotation wraps
    assert bench.run_order(["a"], 2) == [["a"], ["a"]]  # one configuration: no order check
    assert bench.run_order([], 3) == []


def test_summary_gives_median_min_max_over_the_scored_repeats() -> None:
    slo, cs, peak = [0.9, 0.97, 0.8], [70.0, 90.0, 60.0], [200.0, 240.0, 180.0]
    runs = [
        {("real", "elastic"): {"slo_tuples": s, "core_seconds": c},
         ("real", "static-peak"): {"slo_tuples": 1.0, "core_seconds": p}}
        for s, c, p in zip(slo, cs, peak, strict=True)
    ]  # fmt: skip
    runs.append({("real", "elastic"): {"policy": "elastic", "error": "died"},
                 ("real", "static-peak"): {"slo_tuples": 0.5, "core_seconds": 100.0}})  # fmt: skip
    vs_peak = [c / p for c, p in zip(cs, peak, strict=True)]
    ratio_runs = [{"real": {"figure": "ratios", "targets": "t", "met": True,
                            "oracle_core_seconds_vs_static_peak": {"2-core": 0.5},
                            "core_seconds_vs_static_peak": v}} for v in vs_peak]  # fmt: skip
    configs = [("real", "elastic"), ("real", "static-peak")]
    el, sp = bench.summary_lines(runs, ratio_runs, configs)
    assert (el["figure"], el["policy"], el["startup"], el["repeats"]) == (
        "summary", "elastic", "real", 3)  # fmt: skip
    assert el["slo_tuples"] == {"median": 0.9, "min": 0.8, "max": 0.97}
    assert el["core_seconds"] == {"median": statistics.median(cs), "min": 60.0, "max": 90.0}
    assert el["core_seconds_vs_static_peak"] == {
        "median": statistics.median(vs_peak), "min": min(vs_peak), "max": max(vs_peak)}  # fmt: skip
    assert "met" not in el and "oracle_core_seconds_vs_static_peak" not in el
    assert sp["repeats"] == 4 and "core_seconds_vs_static_peak" not in sp
    assert sp["core_seconds"] == {"median": statistics.median([*peak, 100.0]), "min": 100.0,
                                  "max": 240.0}  # fmt: skip
    assert sp["slo_tuples"] == {"median": 1.0, "min": 0.5, "max": 1.0}


def test_the_order_check_puts_again_beside_first() -> None:
    line = bench.order_check_line({"slo_tuples": 0.8, "core_seconds": 100.0},
                                  {"slo_tuples": 0.6, "core_seconds": 125.0, "p99_ms": 3})  # fmt: skip
    assert line == {
        "figure": "order_check",
        "first": {"slo_tuples": 0.8, "core_seconds": 100.0},
        "again": {"slo_tuples": 0.6, "core_seconds": 125.0},
        "again_over_first": {"slo_tuples": pytest.approx(0.75), "core_seconds": 1.25},
    }
    failed = bench.order_check_line({"slo_tuples": 0.0, "core_seconds": 10.0}, {"error": "x"})
    assert failed["again_over_first"] == {"slo_tuples": None, "core_seconds": None}


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_bad_repeats_are_one_line_before_spark_starts(
    repeats: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--repeats", repeats]) == 2
    err = capsys.readouterr().err
    assert err == f"bench_autoscale: --repeats: must be 1 to 20, got {repeats}\n"


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_scores_both_policies_and_prints_the_ratios(run_script: Run, tmp_path: Path) -> None:
    lines = run_script("bench_autoscale", "--smoke", "--out", str(tmp_path / "out"), timeout=900)
    assert all(x["bench"] == "autoscale" for x in lines)
    runs = [x for x in lines if "figure" not in x and not x.get("order_check")]
    assert sorted(x["policy"] for x in runs) == ["elastic", "static-peak"]
    assert [(x["repeat"], x["position"]) for x in runs] == [(0, 0), (0, 1)]
    for x in runs:
        assert 0 <= x["slo_tuples"] <= 1 and x["core_seconds"] > 0
        assert x["cost_kind"] == "wall" and x["emulated_cores"] == 4
    (ratios,) = [x for x in lines if x.get("figure") == "ratios"]
    assert ratios["core_seconds_vs_static_peak"] > 0 and ratios["repeat"] == 0
    (again,) = [x for x in lines if x.get("order_check")]
    assert (again["policy"], again["repeat"]) == ("elastic", 1)
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    first = next(x for x in runs if x["policy"] == "elastic")
    assert check["first"]["core_seconds"] == first["core_seconds"]
    assert check["again"]["core_seconds"] == again["core_seconds"]
    summary = {x["policy"]: x for x in lines if x.get("figure") == "summary"}
    assert sorted(summary) == ["elastic", "static-peak"]
    assert summary["elastic"]["repeats"] == 1
    assert summary["elastic"]["core_seconds"]["median"] == first["core_seconds"]
    assert (tmp_path / "out" / "timeline.json").exists()
