"""bench_soak.py --smoke: the two-operator job on the tests' local[2] session, a few
batches, every figure sampled, the metrics file rotated, the growth line with its fits,
targets and verdicts, state checked against pandas."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.conftest import Run, load, recorded

FIGURES = (
    "driver_python_rss_mb", "driver_jvm_rss_mb", "jvm_heap_mb", "executor_rss_mb",
    "executor_heap_mb", "first_executor_rss_mb", "first_executor_heap_mb", "open_fds",
    "threads", "spark_checkpoint_bytes", "checkpoint_bytes", "state_bytes_per_key",
)  # fmt: skip


def test_targets_scale_with_the_batches_and_met_reads_every_one() -> None:
    soak = load("bench_soak")
    assert soak.targets(5000) == {
        "batches": 5000, "plan_changes": 250, "executor_changes": 50,
        "growth_per_10k_max": 5.0, "ci95_high_max": 10.0, "state_exact": True,
    }  # fmt: skip
    assert soak.targets(1000)["plan_changes"] == 50
    assert soak.targets(1000)["executor_changes"] == 10
    fit = {"per_10k": 4.9, "ci95_low": -0.2, "ci95_high": 9.9}
    line = {"batches": 5000, "plan_changes": 250, "executor_changes": 50,
            "growth": {"a": fit, "b": fit}, "state_exact": True}  # fmt: skip
    assert soak.met(line, soak.targets(5000))["all"] is True
    for change, fails in (
        ({"batches": 4999}, "batches"),
        ({"plan_changes": 249}, "plan_changes"),
        ({"executor_changes": 49}, "executor_changes"),
        ({"state_exact": False}, "state_exact"),
        ({"growth": {"a": fit, "b": {**fit, "ci95_high": 10.1}}}, "growth"),
        ({"growth": {"a": fit, "b": {**fit, "per_10k": 5.1}}}, "growth"),
        ({"growth": {"a": fit, "b": {"per_10k": None, "ci95_low": None, "ci95_high": None}}},
         "growth"),
    ):  # fmt: skip
        verdict = soak.met({**line, **change}, soak.targets(5000))
        assert verdict[fails] is False and verdict["all"] is False
        assert sum(not v for v in verdict.values()) == 2  # that one and "all"


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_samples_every_figure_and_fits_the_growth(
    run_bench: Run, spark, tmp_path: Path
) -> None:
    lines = run_bench("bench_soak", "--smoke", "--batches", "16", spark=spark)
    assert lines and all(x["bench"] == "soak" and x["state"] == "local" for x in lines)
    *samples, growth = lines
    # every second batch; a batch Spark had started when the 16th committed commits too
    # (run()'s contract), and is sampled when it is the 16th's successor
    assert [s["batch"] for s in samples] in ([0, 2, 4, 6, 8, 10, 12, 14],
                                             [0, 2, 4, 6, 8, 10, 12, 14, 16])  # fmt: skip
    for s in samples:
        assert s["master"].startswith("local")
        assert s["driver_python_rss_mb"] > 50 and s["driver_jvm_rss_mb"] > 50
        assert s["jvm_heap_mb"] > 0 and s["open_fds"] > 10 and s["threads"] > 10
        assert s["executor_heap_mb"] is None  # local mode: no executor JVM to read
        assert s["executors"] == len(s["executor_rss"]) <= 1
    last = samples[-1]
    assert last["state_bytes"] > 0 and last["state_files"] > 0
    assert last["spark_checkpoint_bytes"] > 0
    assert 0 < last["distinct_keys"] <= 200  # --smoke: 200 keys
    assert last["state_bytes_per_key"] == pytest.approx(last["state_bytes"] / last["distinct_keys"])
    assert [s["tuples"] for s in samples] == sorted(s["tuples"] for s in samples)
    assert growth["figure"] == "growth" and growth["batches"] >= 16
    assert growth["tuples"] >= last["tuples"] > 0
    assert growth["batches_per_hour"] > 0
    assert growth["samples"] == len(samples) and growth["samples_after_warmup"] == len(samples) - 1
    assert set(growth["growth"]) == set(FIGURES)
    for f in ("driver_python_rss_mb", "open_fds", "threads", "checkpoint_bytes"):
        fit = growth["growth"][f]
        assert set(fit) == {"per_10k", "ci95_low", "ci95_high"}
        assert fit["ci95_low"] <= fit["per_10k"] <= fit["ci95_high"]
    assert growth["growth"]["executor_heap_mb"]["per_10k"] is None
    # local mode: nothing requested or released; --smoke's metrics file: 0.02 MB, 2 kept
    assert growth["executor_changes"] == growth["executors_added"] + growth["executors_released"]
    assert growth["executor_changes"] == 0
    assert growth["metrics_rotations"] >= 1 and 2 <= growth["metrics_files"] <= 3
    assert growth["metrics_bytes_max"] <= 3 * 0.02 * 2**20 + 16_000  # and one line
    assert growth["control_errors"] == 0
    assert growth["state_exact"] is True
    assert growth["targets"] == load("bench_soak").targets(16)
    want = growth["targets"]
    assert growth["met"]["batches"] is (growth["batches"] >= 16)
    assert growth["met"]["plan_changes"] is (growth["plan_changes"] >= want["plan_changes"])
    assert growth["met"]["executor_changes"] is True  # 0 of 0
    assert growth["met"]["growth"] is False  # a figure without a fit: local has no heap
    assert growth["met"]["all"] is False
    assert len(recorded(tmp_path, "soak")) == len(lines)
