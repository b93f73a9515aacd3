"""bench_skew.py --smoke --repeats 2: static and elastic under skew on a one-worker
loopback cluster, the ratio line with its bounds per repeat, the order check and the
summary lines; and the fair order and the summary by hand."""

from __future__ import annotations

import statistics

import pytest

from tests.benchmarks.conftest import Run, load

bench = load("bench_skew")


def test_the_order_rotates_by_one_per_repeat_then_repeats_the_first_alone() -> None:
    configs = [(1.0, "static"), (1.0, "elastic"), (2.0, "static")]
    assert bench.run_order(configs, 3) == [
        [(1.0, "static"), (1.0, "elastic"), (2.0, "static")],
        [(1.0, "elastic"), (2.0, "static"), (1.0, "static")],
        [(2.0, "static"), (1.0, "static"), (1.0, "elastic")],
        [(1.0, "static")],
    ]
    assert bench.run_order(configs[:2], 1) == [configs[:2], [(1.0, "static")]]
    assert bench.run_order([(1.0, "static")], 2) == [[(1.0, "static")]] * 2


def test_summary_gives_median_min_max_per_policy_and_alpha() -> None:
    static, elastic = [100.0, 120.0, 90.0], [180.0, 150.0, 210.0]
    runs = [
        {(1.0, "static"): {"throughput": s, "cores": 4},
         (1.0, "elastic"): {"throughput": e, "cores": 4},
         (0.5, "static"): {"throughput": 400.0 + s}}
        for s, e in zip(static, elastic, strict=True)
    ]  # fmt: skip
    runs[2][(1.0, "static")]["throughput"] = float("nan")  # a run with no scored batch
    ratio_runs = [{1.0: {"figure": "ratio", "elastic_vs_static": e / s, "hot_key_share": 0.1}}
                  for s, e in zip(static, elastic, strict=True)]  # fmt: skip
    configs = [(1.0, "static"), (1.0, "elastic"), (0.5, "static")]
    st, el, half = bench.summary_lines(runs, ratio_runs, configs)
    assert (st["figure"], st["policy"], st["alpha"], st["repeats"]) == (
        "summary", "static", 1.0, 3)  # fmt: skip
    assert st["throughput"] == {"median": statistics.median([100.0, 120.0]), "min": 100.0,
                                "max": 120.0}  # fmt: skip
    assert el["throughput"] == {"median": 180.0, "min": 150.0, "max": 210.0}
    ratios = [e / s for s, e in zip(static, elastic, strict=True)]
    assert el["elastic_vs_static"] == {
        "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}  # fmt: skip
    assert "elastic_vs_static" not in st and "hot_key_share" not in el
    assert (half["alpha"], half["throughput"]["median"]) == (0.5, 500.0)
    assert "elastic_vs_static" not in half


def test_the_order_check_puts_again_beside_first() -> None:
    line = bench.order_check_line({"throughput": 200.0, "cores": 4}, {"throughput": 150.0})
    assert line == {"figure": "order_check", "first": {"throughput": 200.0},
                    "again": {"throughput": 150.0}, "again_over_first": {"throughput": 0.75}}  # fmt: skip
    nan = bench.order_check_line({"throughput": 200.0}, {"throughput": float("nan")})
    assert nan["again_over_first"] == {"throughput": None}


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_bad_repeats_are_one_line_before_spark_starts(
    repeats: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--repeats", repeats]) == 2
    assert capsys.readouterr().err == f"bench_skew: --repeats: must be 1 to 20, got {repeats}\n"


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_runs_both_policies_and_prints_the_ratio(run_script: Run) -> None:
    lines = run_script("bench_skew", "--smoke", "--repeats", "2", timeout=900)
    assert all(x["bench"] == "skew" for x in lines)
    runs = [x for x in lines if "figure" not in x and not x.get("order_check")]
    assert [(x["policy"], x["repeat"], x["position"]) for x in runs] == [
        ("static", 0, 0), ("elastic", 0, 1), ("elastic", 1, 0), ("static", 1, 1)]  # fmt: skip
    for x in runs:
        assert x["alpha"] == 1.0 and x["cost_kind"] == "wall" and x["throughput"] >= 0
    ratios = [x for x in lines if x.get("figure") == "ratio"]
    assert [x["repeat"] for x in ratios] == [0, 1]
    for ratio in ratios:
        assert 0 < ratio["hot_key_share"] < 1
        assert ratio["hot_key_ceiling_tps"] > 0 and "elastic_vs_static" in ratio
    (again,) = [x for x in lines if x.get("order_check")]
    assert (again["policy"], again["repeat"], again["position"]) == ("static", 2, 0)
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    assert check["first"]["throughput"] == runs[0]["throughput"]
    assert check["again"]["throughput"] == again["throughput"]
    summary = {x["policy"]: x for x in lines if x.get("figure") == "summary"}
    assert sorted(summary) == ["elastic", "static"]
    assert summary["static"]["repeats"] == 2 and "elastic_vs_static" in summary["elastic"]
    got = sorted(x["throughput"] for x in runs if x["policy"] == "static")
    assert summary["static"]["throughput"]["min"] == got[0]
    assert summary["static"]["throughput"]["max"] == got[1]
