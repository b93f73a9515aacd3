"""bench_placement.py --smoke --repeats 2: spark-default and elastic on a two-worker
loopback cluster, each keyed operator with as many instances as fit the cores, the ratio
line per repeat, the order check and the summary lines; and the fair order and the
summary by hand."""

from __future__ import annotations

import statistics

import pytest

from tests.benchmarks.conftest import Run, load

bench = load("bench_placement")


def test_the_order_rotates_by_one_per_repeat_then_repeats_the_first_alone() -> None:
    policies = ["spark-default", "static", "albic"]
    assert bench.run_order(policies, 3) == [
        ["spark-default", "static", "albic"],
        ["static", "albic", "spark-default"],
        ["albic", "spark-default", "static"],
        ["spark-default"],
    ]
    assert bench.run_order(policies[:2], 1) == [policies[:2], ["spark-default"]]
    assert bench.run_order(["albic"], 2) == [["albic"], ["albic"]]


def test_summary_gives_median_min_max_per_policy() -> None:
    tput, hit, remote = [100.0, 130.0, 90.0], [0.5, 1.0, 0.75], [400, 100, 250]
    runs = [
        {"spark-default": {"throughput": t + 1000, "placement_hit": None,
                           "remote_shuffle_bytes": r * 10, "batches": 7},
         "albic": {"throughput": t, "placement_hit": h, "remote_shuffle_bytes": r}}
        for t, h, r in zip(tput, hit, remote, strict=True)
    ]  # fmt: skip
    runs[1]["albic"]["throughput"] = float("nan")  # a run with no scored batch
    default, albic = bench.summary_lines(runs, ["spark-default", "albic"])
    assert (albic["figure"], albic["policy"], albic["repeats"]) == ("summary", "albic", 3)
    finite = [100.0, 90.0]
    assert albic["throughput"] == {"median": statistics.median(finite), "min": min(finite),
                                   "max": max(finite)}  # fmt: skip
    assert albic["placement_hit"] == {"median": statistics.median(hit), "min": min(hit),
                                      "max": max(hit)}  # fmt: skip
    assert albic["remote_shuffle_bytes"] == {"median": 250, "min": 100, "max": 400}
    assert default["repeats"] == 3 and "placement_hit" not in default
    assert default["throughput"]["median"] == statistics.median([t + 1000 for t in tput])
    assert "batches" not in default


def test_the_order_check_puts_again_beside_first() -> None:
    first = {"throughput": 200.0, "placement_hit": 1.0, "remote_shuffle_bytes": 9}
    line = bench.order_check_line(first, {"throughput": 150.0, "placement_hit": 0.5})
    assert line == {"figure": "order_check",
                    "first": {"throughput": 200.0, "placement_hit": 1.0},
                    "again": {"throughput": 150.0, "placement_hit": 0.5},
                    "again_over_first": {"throughput": 0.75, "placement_hit": 0.5}}  # fmt: skip
    none = bench.order_check_line({"throughput": 200.0, "placement_hit": None},
                                  {"throughput": float("nan"), "placement_hit": None})  # fmt: skip
    assert none["again_over_first"] == {"throughput": None, "placement_hit": None}


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_bad_repeats_are_one_line_before_spark_starts(
    repeats: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--repeats", repeats]) == 2
    err = capsys.readouterr().err
    assert err == f"bench_placement: --repeats: must be 1 to 20, got {repeats}\n"


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_runs_both_policies_and_the_ratio(run_script: Run) -> None:
    lines = run_script("bench_placement", "--smoke", "--repeats", "2", timeout=900)
    runs = [x for x in lines if x["bench"] == "placement" and "figure" not in x
            and not x.get("order_check")]  # fmt: skip
    assert [(x["policy"], x["repeat"], x["position"]) for x in runs] == [
        ("spark-default", 0, 0), ("elastic", 0, 1), ("elastic", 1, 0),
        ("spark-default", 1, 1)]  # fmt: skip
    for x in runs:
        assert x["batches"] >= 1 and x["throughput"] > 0
        assert x["remote_shuffle_bytes"] + x["local_shuffle_bytes"] > 0
        if x["policy"] == "spark-default":
            assert x["tasks_pinned"] == 0 and x["placement_hit"] is None
        else:
            assert x["tasks_pinned"] > 0 and 0 <= x["placement_hit"] <= 1
    ratios = [x for x in lines if x["bench"] == "placement-ratio"]
    assert [(x["policy"], x["repeat"]) for x in ratios] == [("elastic", 0), ("elastic", 1)]
    assert all(x["target_hit"] == 0.99 for x in ratios)
    (again,) = [x for x in lines if x.get("order_check")]
    assert (again["policy"], again["repeat"], again["position"]) == ("spark-default", 2, 0)
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    assert check["first"]["throughput"] == runs[0]["throughput"]
    assert check["again"]["throughput"] == again["throughput"]
    summary = {x["policy"]: x for x in lines if x.get("figure") == "summary"}
    assert sorted(summary) == ["elastic", "spark-default"]
    assert all(x["repeats"] == 2 for x in summary.values())
    got = sorted(x["throughput"] for x in runs if x["policy"] == "elastic")
    assert summary["elastic"]["throughput"]["min"] == got[0]
    assert summary["elastic"]["throughput"]["max"] == got[1]
