"""bench_datapath.py --smoke: streamscale's keyed path and Spark's SQL aggregation on one
small batch, on the tests' local[2] session, and the ratio line."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_prints_each_path_and_the_ratio(run_bench: Run, spark) -> None:
    lines = run_bench("bench_datapath", "--smoke", spark=spark)
    paths = [x for x in lines if "path" in x]
    assert [x["path"] for x in paths] == ["elastic", "spark-sql"]
    for x in paths:
        assert x["bench"] == "datapath" and x["rows"] == 2000 and x["batches"] >= 1
        assert x["rows_per_s"] > 0 and x["seconds_min"] <= x["seconds"] <= x["seconds_max"]
    (ratios,) = [x for x in lines if x.get("figure") == "ratios"]
    assert set(ratios["elastic_over"]) == {"spark-sql"} and ratios["elastic_over"]["spark-sql"] > 0
