"""bench_soak.py --smoke: the two-operator job on the tests' local[2] session, a few
batches, every figure sampled and the growth line, state checked against pandas."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.conftest import Run, recorded

FIGURES = (
    "driver_python_rss_mb", "driver_jvm_rss_mb", "jvm_heap_mb", "executor_rss_mb",
    "open_fds", "threads", "spark_checkpoint_bytes", "checkpoint_bytes", "state_bytes",
    "state_files", "output_bytes",
)  # fmt: skip


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_samples_every_figure_and_fits_the_growth(
    run_bench: Run, spark, tmp_path: Path
) -> None:
    lines = run_bench("bench_soak", "--smoke", "--batches", "16", spark=spark)
    assert lines and all(x["bench"] == "soak" and x["state"] == "local" for x in lines)
    *samples, growth = lines
    assert [s["batch"] for s in samples] == [0, 5, 10, 15]
    for s in samples:
        assert s["master"].startswith("local")
        assert s["driver_python_rss_mb"] > 50 and s["driver_jvm_rss_mb"] > 50
        assert s["jvm_heap_mb"] > 0 and s["open_fds"] > 10 and s["threads"] > 10
    assert samples[-1]["state_bytes"] > 0 and samples[-1]["state_files"] > 0
    assert samples[-1]["spark_checkpoint_bytes"] > 0
    assert growth["figure"] == "growth" and growth["batches"] >= 16
    assert growth["tuples"] > 0 and growth["batches_per_hour"] > 0
    assert growth["samples_after_warmup"] == 3
    for f in FIGURES:
        assert f"{f}_per_10k" in growth and f"{f}_pct_per_10k" in growth
    assert growth["control_errors"] == 0
    assert growth["state_equals_pandas"] is True
    assert len(recorded(tmp_path, "soak")) == len(lines)
