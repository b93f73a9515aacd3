"""bench_nexmark.py: Q1 and Q5 over a few thousand events on the tests' local[2] session,
Spark SQL and streamscale, the ratio beside each."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_two_queries_on_both_engines(run_bench: Run, spark) -> None:
    zone = spark.conf.get("spark.sql.session.timeZone")
    lines = run_bench(
        "bench_nexmark", "--events", "3000", "--files", "3", "--queries", "q1,q5",
        "--engines", "spark-sql,streamscale", spark=spark,
    )  # fmt: skip
    assert [(x["bench"], x["query"], x["engine"]) for x in lines] == [
        ("nexmark", q, e) for q in ("q1", "q5") for e in ("spark-sql", "streamscale")
    ]
    for x in lines:
        assert x["events"] == 3000 and x["rows_per_s"] > 0
    assert [x["ratio_vs_spark_sql"] for x in lines[::2]] == [1.0, 1.0]
    assert all(x["ratio_vs_spark_sql"] > 0 for x in lines[1::2])
    assert spark.conf.get("spark.sql.session.timeZone") == zone  # the session as it was
