"""bench_pipeline.py --smoke: elastic and static for a few seconds on the tests' local[2]
session, their lines, the ratio and the efficiency line."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_prints_each_policy_the_ratio_and_the_efficiency(run_bench: Run, spark) -> None:
    lines = run_bench("bench_pipeline", "--smoke", spark=spark)
    runs = [x for x in lines if x["bench"] == "pipeline"]
    assert sorted(x["policy"] for x in runs) == ["elastic", "static"]
    for x in runs:
        assert "error" not in x, x
        assert x["alpha"] == 1.0 and x["omega"] == 0.0 and x["batches"] >= 1
        assert x["throughput"] >= 0 and x["duration_s"] == 4.0
    (ratio,) = [x for x in lines if x["bench"] == "pipeline_ratio"]
    assert {"elastic_over_static", "elastic_over_spark_native", "elastic_over_rc"} <= set(ratio)
    (eff,) = [x for x in lines if x["bench"] == "pipeline_efficiency"]
    assert eff["configurations"] == 1 and eff["target"] == 0.9
