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


@pytest.mark.spark
@pytest.mark.slow
def test_the_smallest_run_prints_a_line_per_policy_the_oracle_and_the_ratios(
    tmp_path: Path,
) -> None:
    if not java_available():
        pytest.skip("Java is not available")
    out = tmp_path / "out"
    proc = _run(tmp_path, "--trace", str(TRACE), "--minutes", "0.25", "--warmup", "6",
                "--policies", "elastic", "--startup", "emulated", "--startup-delay", "2",
                "--workers", "1", "--worker-cores", "2", "--executor-cores", "1",
                "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x.get("policy", x.get("figure")) for x in lines] == ["elastic", "oracle", "ratios"]
    assert all(x["bench"] == "trace" and x["startup"] == "emulated" for x in lines)
    assert all(x["trace"] == "occupancy_6005.csv" and x["minutes"] == 0.25 for x in lines)
    elastic, oracle, ratios = lines
    assert elastic["scored_tuples"] > 0 and 0.0 <= elastic["slo_tuples"] <= 1.0
    assert elastic["core_seconds"] > 0 and oracle["core_seconds"] > 0
    assert oracle["oracle_startup_s"] == 2.0
    assert ratios["core_seconds_vs_oracle"] == pytest.approx(
        elastic["core_seconds"] / oracle["core_seconds"]
    )
    # what the script printed is what it recorded, and the picture was drawn
    recorded = (tmp_path / "results" / "trace.jsonl").read_text().splitlines()
    assert [json.loads(x)["bench"] for x in recorded] == ["trace"] * 3
    assert (out / "timeline-emulated.png").stat().st_size > 10_000
