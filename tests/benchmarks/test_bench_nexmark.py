"""bench_nexmark.py: Q1 and Q5 over a few thousand events on the tests' local[2] session,
Spark SQL and streamscale, the ratio beside each; and, with a fake run in place of Spark,
the fair order per query (rotated by one per repeat, the first engine again at the end),
the ratio within each repeat, the order-check and summary lines, and the one-line
``--repeats`` error."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.conftest import BENCH, Run, load

bench = load("bench_nexmark")

ENGINES = ["spark-sql", "streamscale", "streamscale-1batch"]
#: rows_per_s per (engine, repeat)
Rates = dict[tuple[str, int], float | None]


def _fake(rates: Rates) -> tuple[list[tuple[str, str, int]], Callable[[str, str, int], Any]]:
    """A run that records its calls and gives ``rates[(engine, repeat)]`` as rows_per_s."""
    calls: list[tuple[str, str, int]] = []

    def run(engine: str, q: str, repeat: int) -> dict[str, Any]:
        calls.append((engine, q, repeat))
        return {"bench": "nexmark", "query": q, "engine": engine,
                "rows_per_s": rates[(engine, repeat)], "batches": 3}  # fmt: skip

    return calls, run


def _rates(engines: list[str], repeats: int) -> Rates:
    """Distinct rates: 1000 × (engine's index + 1) + 10 × repeat; the order check's
    (repeat ``repeats``) 1.5 × the first run's."""
    rates: Rates = {
        (e, k): 1000.0 * (i + 1) + 10 * k for i, e in enumerate(engines) for k in range(repeats)
    }
    rates[(engines[0], repeats)] = 1.5 * 1000.0
    return rates


def test_the_engines_rotate_per_repeat_then_the_first_runs_again_alone() -> None:
    calls, run = _fake(_rates(ENGINES, 3))
    lines = list(bench.query_lines("q5", ENGINES, 3, run))
    a, b, c = ENGINES
    assert [e for e, _, _ in calls] == [a, b, c, b, c, a, c, a, b, a]
    assert [k for _, _, k in calls] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert {q for _, q, _ in calls} == {"q5"}
    runs = [x for x in lines if "figure" not in x and not x.get("order_check")]
    assert [(x["engine"], x["repeat"], x["position"]) for x in runs] == [
        (a, 0, 0), (b, 0, 1), (c, 0, 2), (b, 1, 0), (c, 1, 1), (a, 1, 2),
        (c, 2, 0), (a, 2, 1), (b, 2, 2)]  # fmt: skip
    (again,) = [x for x in lines if x.get("order_check")]
    assert (again["engine"], again["repeat"], again["position"]) == (a, 3, 0)
    assert again["rows_per_s"] == 1500.0 and again["ratio_vs_spark_sql"] == 1.0
    assert [x.get("figure") for x in lines[9:]] == [None, "order_check", *["summary"] * 3]


def test_the_ratio_is_against_the_spark_sql_line_of_the_same_repeat() -> None:
    rates = _rates(ENGINES, 2)
    _, run = _fake(rates)
    lines = list(bench.query_lines("q5", ENGINES, 2, run))
    for x in (x for x in lines if "figure" not in x and not x.get("order_check")):
        base = rates[("spark-sql", x["repeat"])]
        assert x["ratio_vs_spark_sql"] == round(x["rows_per_s"] / base, 3)
    # repeat 1 ran spark-sql last: streamscale's ratio still is against it
    (late,) = [x for x in lines if x.get("repeat") == 1 and x["engine"] == "streamscale"]
    assert late["position"] == 0 and late["ratio_vs_spark_sql"] == round(2010 / 1010, 3)


def test_the_order_check_puts_the_run_again_beside_the_first() -> None:
    _, run = _fake(_rates(ENGINES, 2))
    lines = list(bench.query_lines("q8", ENGINES, 2, run))
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    assert check == {"bench": "nexmark", "figure": "order_check", "query": "q8",
                     "engine": "spark-sql", "first": {"rows_per_s": 1000.0},
                     "again": {"rows_per_s": 1500.0},
                     "again_over_first": {"rows_per_s": 1.5}}  # fmt: skip


def test_the_summary_gives_median_min_max_over_the_repeats_only() -> None:
    rates = _rates(ENGINES, 3)
    rates[("streamscale", 1)] = None  # a run with no timed batch
    _, run = _fake(rates)
    lines = list(bench.query_lines("q4", ENGINES, 3, run))
    summary = {x["engine"]: x for x in lines if x.get("figure") == "summary"}
    assert list(summary) == ENGINES
    for engine, x in summary.items():
        assert (x["bench"], x["query"], x["repeats"]) == ("nexmark", "q4", 3)
        got = [rates[(engine, k)] for k in range(3)]
        finite = [v for v in got if v is not None]
        assert x["rows_per_s"] == {"median": statistics.median(finite), "min": min(finite),
                                   "max": max(finite)}  # fmt: skip
        ratios = [round(v / rates[("spark-sql", k)], 3) for k, v in enumerate(got) if v]
        assert x["ratio_vs_spark_sql"] == {"median": statistics.median(ratios),
                                           "min": min(ratios), "max": max(ratios)}  # fmt: skip
    assert summary["spark-sql"]["rows_per_s"]["median"] == 1010.0  # not the check's 1500
    (untimed,) = [x for x in lines if x.get("repeat") == 1 and x["engine"] == "streamscale"]
    assert untimed["rows_per_s"] is None and untimed["ratio_vs_spark_sql"] is None


def test_without_spark_sql_no_ratio_and_with_one_engine_no_order_check() -> None:
    engines = ["streamscale", "streamscale-1batch"]
    _, run = _fake(_rates(engines, 2))
    lines = list(bench.query_lines("q5", engines, 2, run))
    assert all(x["ratio_vs_spark_sql"] is None for x in lines if "figure" not in x)
    assert all("ratio_vs_spark_sql" not in x for x in lines if x.get("figure") == "summary")
    calls, run = _fake(_rates(["streamscale"], 2))
    lines = list(bench.query_lines("q1", ["streamscale"], 2, run))
    assert calls == [("streamscale", "q1", 0), ("streamscale", "q1", 1)]
    assert not [x for x in lines if x.get("order_check") or x.get("figure") == "order_check"]
    assert [x.get("figure") for x in lines] == [None, None, "summary"]


def test_a_repeat_is_given_before_the_next_one_runs() -> None:
    calls, run = _fake(_rates(ENGINES[:2], 2))
    lines = bench.query_lines("q1", ENGINES[:2], 2, run)
    first = next(lines)
    assert (first["engine"], first["repeat"], first["position"]) == ("spark-sql", 0, 0)
    assert [k for _, _, k in calls] == [0, 0]


def test_engine_lines_and_the_engines_of_a_query() -> None:
    common = {"events": 10, "files": 2, "rate": 5.0, "harness": "h"}
    got = {"rows": 7, "rows_per_s": 1234.6, "batches": 2}
    line = bench.engine_line("q1", "streamscale", got, common)
    assert list(line)[:6] == ["bench", "query", "engine", "rows_per_s", "ratio_vs_spark_sql",
                              "rows"]  # fmt: skip
    assert line["rows_per_s"] == 1235 and got["rows_per_s"] == 1234.6
    untimed = bench.engine_line("q1", "streamscale", {"rows_per_s": math.nan}, common)
    assert untimed["rows_per_s"] is None
    assert bench.engines_of("q1", ENGINES) == ENGINES[:2]
    assert bench.engines_of("q5", ENGINES) == ENGINES


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_bad_repeats_are_one_line_and_exit_2_before_anything_runs(
    repeats: str, tmp_path: Path
) -> None:
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results")}
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_nexmark.py"), "--repeats", repeats],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == f"bench_nexmark: --repeats: must be 1 to 20, got {repeats}\n"
    assert proc.stdout == ""
    assert not (tmp_path / "results").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_two_queries_on_both_engines(run_bench: Run, spark) -> None:
    zone = spark.conf.get("spark.sql.session.timeZone")
    lines = run_bench(
        "bench_nexmark", "--events", "3000", "--files", "3", "--queries", "q1,q5",
        "--engines", "spark-sql,streamscale", spark=spark,
    )  # fmt: skip
    lines = [x for x in lines if "figure" not in x and not x.get("order_check")]
    assert [(x["bench"], x["query"], x["engine"], x["repeat"], x["position"]) for x in lines] == [
        ("nexmark", q, e, 0, i) for q in ("q1", "q5")
        for i, e in enumerate(("spark-sql", "streamscale"))
    ]  # fmt: skip
    for x in lines:
        assert x["events"] == 3000 and x["rows_per_s"] > 0
    assert [x["ratio_vs_spark_sql"] for x in lines[::2]] == [1.0, 1.0]
    assert all(x["ratio_vs_spark_sql"] > 0 for x in lines[1::2])
    assert spark.conf.get("spark.sql.session.timeZone") == zone  # the session as it was
