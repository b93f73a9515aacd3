"""bench_pipeline.py --smoke --repeats 2: elastic and static for a few seconds on the
tests' local[2] session, their lines per repeat, the ratio and the efficiency line per
repeat, the order check and the summary lines; and the fair order and the summary by
hand."""

from __future__ import annotations

import statistics

import pytest

from tests.benchmarks.conftest import Run, load

bench = load("bench_pipeline")


def test_the_order_rotates_by_one_per_repeat_then_repeats_the_first_alone() -> None:
    a, b, c = ("elastic", 1.0, 0.0), ("static", 1.0, 0.0), ("elastic", 0.5, 2.0)
    assert bench.run_order([a, b, c], 3) == [[a, b, c], [b, c, a], [c, a, b], [a]]
    assert bench.run_order([a, b], 1) == [[a, b], [a]]
    assert bench.run_order([a], 2) == [[a], [a]]


def test_summary_gives_median_min_max_per_configuration() -> None:
    el, st = ("elastic", 1.0, 0.0), ("static", 1.0, 2.0)
    th, p99, eff = [300.0, 100.0, 250.0], [40.0, 90.0, 55.0], [0.8, 0.6, 0.9]
    runs = [
        {el: {"throughput": t, "p99_ms": p, "efficiency": e, "cores": 2},
         st: {"throughput": t / 2, "p99_ms": None}}
        for t, p, e in zip(th, p99, eff, strict=True)
    ]  # fmt: skip
    runs[1][st] = {"error": "planner failed"}  # a run with no figures
    runs[2][el]["efficiency"] = float("nan")
    s_el, s_st = bench.summary_lines(runs, [el, st])
    assert (s_el["figure"], s_el["policy"], s_el["alpha"], s_el["omega"], s_el["repeats"]) == (
        "summary", "elastic", 1.0, 0.0, 3)  # fmt: skip
    for key, values in (("throughput", th), ("p99_ms", p99), ("efficiency", eff[:2])):
        assert s_el[key] == {"median": statistics.median(values), "min": min(values),
                             "max": max(values)}  # fmt: skip
    assert s_el["throughput"]["median"] == 250.0 and "cores" not in s_el
    assert (s_st["policy"], s_st["omega"], s_st["repeats"]) == ("static", 2.0, 3)
    assert s_st["throughput"] == {"median": 137.5, "min": 125.0, "max": 150.0}
    assert "p99_ms" not in s_st and "efficiency" not in s_st


def test_the_order_check_puts_again_beside_first() -> None:
    first = {"throughput": 200.0, "p99_ms": 50.0, "efficiency": 0.9}
    line = bench.order_check_line(first, {"throughput": 150.0, "p99_ms": 100.0})
    assert line == {"figure": "order_check", "first": {"throughput": 200.0, "p99_ms": 50.0},
                    "again": {"throughput": 150.0, "p99_ms": 100.0},
                    "again_over_first": {"throughput": 0.75, "p99_ms": 2.0}}  # fmt: skip
    bad = bench.order_check_line({"throughput": 0.0, "p99_ms": 50.0}, {"error": "x"})
    assert bad["again_over_first"] == {"throughput": None, "p99_ms": None}


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_bad_repeats_are_one_line_before_spark_starts(
    repeats: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--repeats", repeats]) == 2
    out = capsys.readouterr()
    assert out.err == f"bench_pipeline: --repeats: must be 1 to 20, got {repeats}\n"
    assert out.out == ""


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_prints_each_policy_the_ratio_and_the_efficiency(run_bench: Run, spark) -> None:
    lines = run_bench("bench_pipeline", "--smoke", "--repeats", "2", spark=spark)
    runs = [x for x in lines if x["bench"] == "pipeline" and "figure" not in x]
    kept = [x for x in runs if not x.get("order_check")]
    assert [(x["policy"], x["repeat"], x["position"]) for x in kept] == [
        ("elastic", 0, 0), ("static", 0, 1), ("static", 1, 0), ("elastic", 1, 1)]  # fmt: skip
    for x in runs:
        assert "error" not in x, x
        assert x["alpha"] == 1.0 and x["omega"] == 0.0 and x["batches"] >= 1
        assert x["throughput"] >= 0 and x["duration_s"] == 4.0
    ratios = [x for x in lines if x["bench"] == "pipeline_ratio"]
    assert [x["repeat"] for x in ratios] == [0, 1]
    keys = {"elastic_over_static", "elastic_over_spark_native", "elastic_over_rc"}
    assert all(keys <= set(ratio) for ratio in ratios)
    effs = [x for x in lines if x["bench"] == "pipeline_efficiency"]
    assert [(x["repeat"], x["configurations"], x["target"]) for x in effs] == [
        (0, 1, 0.9), (1, 1, 0.9)]  # fmt: skip
    (again,) = [x for x in runs if x.get("order_check")]
    assert (again["policy"], again["repeat"], again["position"]) == ("elastic", 2, 0)
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    assert check["first"]["throughput"] == kept[0]["throughput"]
    assert check["again"]["p99_ms"] == again["p99_ms"]
    summary = {x["policy"]: x for x in lines if x.get("figure") == "summary"}
    assert sorted(summary) == ["elastic", "static"]
    assert summary["static"]["repeats"] == 2 and summary["static"]["omega"] == 0.0
    got = sorted(x["throughput"] for x in kept if x["policy"] == "static")
    assert summary["static"]["throughput"]["min"] == got[0]
    assert summary["static"]["throughput"]["max"] == got[1]
