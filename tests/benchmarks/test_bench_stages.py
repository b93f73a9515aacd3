"""bench_stages.py's smallest configuration prints and records one line per engine and
chain length, into the results directory it is given (never the repository's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"

pytestmark = pytest.mark.spark


def test_smallest_configuration_prints_and_records_its_lines(tmp_path: Path) -> None:
    repo_results = BENCH / "results" / "stages.jsonl"
    before = repo_results.read_bytes() if repo_results.exists() else None
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results")}
    args = ["--rows", "50", "--operators", "1,2", "--batches", "3",
            "--engines", "streamscale,spark-sql"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_stages.py"), *args],
        cwd=BENCH, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert [(x["engine"], x["operators"]) for x in lines] == [
        ("streamscale", 1), ("spark-sql", 1), ("streamscale", 2), ("spark-sql", 2),
    ]  # fmt: skip
    for x in lines:
        assert x["bench"] == "stages" and x["rows_per_batch"] == 50
        assert x["median_s"] > 0 and x["batches"] >= 1
        assert x["min_s"] <= x["median_s"] <= x["max_s"]
    ones = {x["engine"]: x for x in lines if x["operators"] == 1}
    assert all(x["ratio_vs_one_operator"] == 1.0 for x in ones.values())
    for x in lines:
        if x["operators"] == 2:
            want = x["median_s"] / ones[x["engine"]]["median_s"]
            assert x["ratio_vs_one_operator"] == pytest.approx(want, abs=2e-3)
    spark2 = next(x for x in lines if x["engine"] == "spark-sql" and x["operators"] == 2)
    assert "append" in spark2["spark_mode"] and spark2["spark_refused"].startswith("update mode")
    recorded = [
        json.loads(x) for x in (tmp_path / "results" / "stages.jsonl").read_text().splitlines()
    ]
    assert [x["median_s"] for x in recorded] == [x["median_s"] for x in lines]
    assert all(x["command"].startswith("python benchmarks/bench_stages.py") for x in recorded)
    after = repo_results.read_bytes() if repo_results.exists() else None
    assert after == before
