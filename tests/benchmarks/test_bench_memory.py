"""bench_memory.py --smoke: the micro-benchmark for 45 s on the tests' local[2] session,
RSS samples and the growth line."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_samples_and_prints_the_growth(run_bench: Run, spark) -> None:
    lines = run_bench("bench_memory", "--smoke", spark=spark)
    assert all(x["bench"] == "memory" for x in lines)
    samples = [x for x in lines if x.get("sample")]
    assert len(samples) >= 2
    for s in samples:
        assert s["python_rss_mb"] > 50 and s["jvm_rss_mb"] > 50 and s["batches"] >= 1
    growth = lines[-1]
    assert growth["figure"] == "rss_growth" and "error" not in growth
    assert growth["batches"] >= 1 and growth["target"] == 0.10
    assert isinstance(growth["met"], bool) and growth["driver_rss_mb"][0] > 0
