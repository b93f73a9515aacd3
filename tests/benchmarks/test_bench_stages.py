"""bench_stages.py's smallest configuration prints and records one line per engine, chain
length and repeat, the pass's first configuration again at its end, and the summaries,
into the results directory it is given (never the repository's); the pass order and the
ratios, without Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.conftest import load

BENCH = Path(__file__).parents[2] / "benchmarks"


def test_passes_alternate_and_repeat_their_first_configuration() -> None:
    stages = load("bench_stages")
    configs = [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert stages.pass_order(configs, 0) == [*configs, (1, "a")]
    assert stages.pass_order(configs, 1) == [(2, "b"), (2, "a"), (1, "b"), (1, "a"), (2, "b")]
    assert stages.pass_order(configs, 2) == stages.pass_order(configs, 0)


def _line(engine: str, n: int, median: float, repeat: int, **kw: Any) -> dict[str, Any]:
    return {"bench": "stages", "engine": engine, "operators": n, "rows_per_batch": 50,
            "repeat": repeat, "median_s": median, "batches": 10, **kw}  # fmt: skip


def test_ratios_within_a_pass_and_their_median_and_range_over_repeats() -> None:
    stages = load("bench_stages")
    measured = []
    for r, (one, three, spark3) in enumerate([(1.0, 0.9, 1.8), (0.5, 0.6, 1.0), (0.8, 0.8, 1.0)]):
        lines = [
            _line("streamscale", 1, one, r),
            _line("streamscale", 3, three, r),
            _line("spark-sql", 1, 0.5, r),
            _line("spark-sql", 3, spark3, r),
            _line("streamscale", 1, one * 0.5, r, again=True),
        ]
        stages.ratios(lines)
        assert lines[1]["ratio_vs_one_operator"] == round(three / one, 3)
        assert lines[3]["streamscale_over_spark"] == round(three / spark3, 3)
        assert lines[4]["again_over_first"] == 0.5 and "ratio_vs_one_operator" not in lines[4]
        measured += lines
    got = {(x["engine"], x["operators"]): x for x in stages.summaries(measured)}
    three = got[("streamscale", 3)]
    assert three["figure"] == "summary" and three["repeats"] == 3
    assert three["ratio_vs_one_operator"] == {"median": 1.0, "min": 0.9, "max": 1.2}
    assert got[("spark-sql", 3)]["streamscale_over_spark"] == {
        "median": 0.6, "min": 0.5, "max": 0.8,
    }  # fmt: skip
    assert got[("streamscale", 1)]["again_over_first"]["median"] == 0.5
    assert got[("streamscale", 1)]["median_s"] == {"median": 0.8, "min": 0.5, "max": 1.0}


@pytest.mark.spark
def test_smallest_configuration_prints_and_records_its_lines(tmp_path: Path) -> None:
    repo_results = BENCH / "results" / "stages.jsonl"
    before = repo_results.read_bytes() if repo_results.exists() else None
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results")}
    args = ["--rows", "50", "--operators", "1,2", "--batches", "3", "--repeats", "1",
            "--engines", "streamscale,spark-sql"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_stages.py"), *args],
        cwd=BENCH, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    every = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    lines = [x for x in every if x.get("figure") != "summary"]
    assert [(x["engine"], x["operators"]) for x in lines] == [
        ("streamscale", 1), ("spark-sql", 1), ("streamscale", 2), ("spark-sql", 2),
        ("streamscale", 1),
    ]  # fmt: skip
    assert [x.get("again", False) for x in lines] == [False] * 4 + [True]
    for x in lines:
        assert x["bench"] == "stages" and x["rows_per_batch"] == 50 and x["repeat"] == 0
        assert x["median_s"] > 0 and x["batches"] >= 1
        assert x["min_s"] <= x["median_s"] <= x["max_s"]
        assert x["quick"] is False and "fewer than a full run's 10" in x["note"]
    scored = lines[:4]
    ones = {x["engine"]: x for x in scored if x["operators"] == 1}
    assert all(x["ratio_vs_one_operator"] == 1.0 for x in ones.values())
    for x in scored:
        if x["operators"] == 2:
            want = x["median_s"] / ones[x["engine"]]["median_s"]
            assert x["ratio_vs_one_operator"] == pytest.approx(want, abs=2e-3)
    spark2 = next(x for x in scored if x["engine"] == "spark-sql" and x["operators"] == 2)
    assert "append" in spark2["spark_mode"] and spark2["spark_refused"].startswith("update mode")
    ours2 = next(x for x in scored if x["engine"] == "streamscale" and x["operators"] == 2)
    assert spark2["streamscale_over_spark"] == pytest.approx(
        ours2["median_s"] / spark2["median_s"], abs=2e-3
    )
    assert lines[4]["again_over_first"] > 0
    summary = [x for x in every if x.get("figure") == "summary"]
    assert len(summary) == 4 and all(x["repeats"] == 1 for x in summary)
    s2 = next(x for x in summary if x["engine"] == "spark-sql" and x["operators"] == 2)
    assert s2["streamscale_over_spark"]["median"] == spark2["streamscale_over_spark"]
    recorded = [
        json.loads(x) for x in (tmp_path / "results" / "stages.jsonl").read_text().splitlines()
    ]
    assert [x.get("median_s") for x in recorded] == [x.get("median_s") for x in every]
    assert len({x["run"] for x in recorded}) == 1
    assert all(x["command"].startswith("python benchmarks/bench_stages.py") for x in recorded)
    after = repo_results.read_bytes() if repo_results.exists() else None
    assert after == before
