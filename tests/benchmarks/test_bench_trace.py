"""``benchmarks/bench_trace.py`` in its smallest configuration, and its refusals.

The script runs as a user runs it (a subprocess), its lines recorded into a temporary
directory (``STREAMSCALE_RESULTS_DIR``), never into the repository's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.runtime.spark.cluster.cluster import java_available
from streamscale.runtime.spark.sources.rate_trace import read_rate_trace

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_trace.py"
TRACE = Path(__file__).parents[2] / "src" / "streamscale" / "data" / "traces" / "occupancy_6005.csv"


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results"),
           "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "nope.csv"], "bench_trace: nope.csv: no such trace file"),
        (["--trace", str(TRACE), "--window", "2030-01-01,1"], "bench_trace: occupancy_6005.csv"),
        (["--trace", str(TRACE), "--policies", "fast"], "bench_trace: fast: unknown policy"),
        (["--trace", str(TRACE), "--startup", "warm"], "bench_trace: warm: unknown mode"),
        (["--trace", str(TRACE), "--peak-rate", "0"], "bench_trace: peak rate: must be > 0"),
        (
            [
                "--trace",
                str(TRACE),
                "--policies",
                "spark-dynamic,restart-ds2",
                "--startup=emulated",
            ],
            "bench_trace: spark-dynamic,restart-ds2: no emulated start-up",
        ),
    ],
)
def test_bad_input_is_one_line_before_spark_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = _run(tmp_path, *args, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1
    assert proc.stdout == "" and not (tmp_path / "results").exists()


def test_an_unknown_deployment_and_bad_repeats_are_one_line(tmp_path: Path) -> None:
    for args, message in (
        (["--deployment", "hours"], "bench_trace: hours: unknown deployment"),
        (["--repeats", "0"], "bench_trace: --repeats: must be 1 to 20"),
        (["--minutes", "-1"], "bench_trace: --minutes: must be > 0"),
    ):
        proc = _run(tmp_path, "--trace", str(TRACE), *args, timeout=60)
        assert proc.returncode == 2 and proc.stderr.startswith(message), proc.stderr
        assert proc.stderr.count("\n") == 1 and not (tmp_path / "results").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_the_smallest_run_prints_a_line_per_policy_the_oracle_the_ratios_and_a_summary(
    tmp_path: Path,
) -> None:
    if not java_available():
        pytest.skip("Java is not available")
    out = tmp_path / "out"
    # an hour of the minutes deployment in 30 s: c = 120, a 1 s trigger, a 5 s target
    proc = _run(tmp_path, "--trace", str(TRACE), "--deployment", "minutes",
                "--window", "2015-09-11 05:52:00,1", "--minutes", "0.5", "--warmup", "6",
                "--policies", "elastic", "--startup", "emulated",
                "--workers", "1", "--worker-cores", "2", "--executor-cores", "1",
                "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    kinds = [x.get("figure", x.get("policy")) for x in lines]
    assert kinds == ["elastic", "oracle", "ratios", "summary"]
    assert all(x["bench"] == "trace" and x["startup"] == "emulated" for x in lines)
    assert all(x["trace"] == "occupancy_6005.csv" and x["minutes"] == 0.5 for x in lines)
    elastic, oracle, ratios, summary = lines
    # the deployment's constants, compressed with the replay (c = 3,600 s / 30 s)
    assert elastic["deployment"] == "minutes" and elastic["time_scale"] == pytest.approx(120.0)
    assert elastic["real_trigger_s"] == 120.0 and elastic["real_target_s"] == 600.0
    assert elastic["config"]["trigger_s"] == pytest.approx(1.0)
    assert elastic["config"]["latency_target_ms"] == pytest.approx(5000.0)
    assert oracle["oracle_startup_s"] == pytest.approx(0.5)
    assert elastic["real_startup_s"] == pytest.approx(60.0)
    assert elastic["scored_tuples"] > 0 and 0.0 <= elastic["slo_tuples"] <= 1.0
    assert elastic["core_seconds"] > 0 and oracle["core_seconds"] > 0
    assert elastic["core_hours"] == pytest.approx(elastic["core_seconds"] * 120.0 / 3600.0)
    assert ratios["core_seconds_vs_oracle"] == pytest.approx(
        elastic["core_seconds"] / oracle["core_seconds"]
    )
    # the split of the run's core-seconds adds up to what it was billed
    ex = elastic["excess"]
    parts = ["rounding", "foresight", "startup_overshoot", "holding", "headroom"]
    floor_cs = elastic["core_seconds"] - sum(ex[f"{k}_core_s"] for k in parts) + ex["under_core_s"]
    load = read_rate_trace(TRACE, window="2015-09-11 05:52:00,1", minutes=0.5, peak_rate=300.0)
    fractional = load.offered(0.0, load.length_s) * elastic["config"]["cost_ms"] / 1000.0
    assert floor_cs == pytest.approx(fractional, rel=0.1)
    assert summary["repeats"] == 1
    assert summary["slo_tuples"]["median"] == elastic["slo_tuples"]
    # the forecast read the file's days before the window, and nothing of it
    history = (out / "history.csv").read_text().splitlines()
    assert history[0] == "timestamp,value" and history[-1] < "2015-09-11 05:52:00"
    recorded = (tmp_path / "results" / "trace.jsonl").read_text().splitlines()
    assert [json.loads(x)["bench"] for x in recorded] == ["trace"] * 4
    assert (out / "timeline-emulated.png").stat().st_size > 10_000
