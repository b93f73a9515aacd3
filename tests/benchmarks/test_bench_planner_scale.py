"""bench_planner_scale.py: one small size, one decision, not recorded (--no-record)."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.conftest import Run, recorded


def test_one_small_size_prints_its_lines(run_bench: Run, tmp_path: Path) -> None:
    lines = run_bench("bench_planner_scale", "--size", "8x64", "--repeats", "1", "--operators", "2")
    assert lines and all(x["bench"].startswith("planner_scale") for x in lines), lines
    assert {x["executors"] for x in lines} == {8}
    assert len(recorded(tmp_path, "planner_scale")) == len(lines)
    assert run_bench("bench_planner_scale", "--size", "8x64", "--repeats", "1", "--no-record")
    assert len(recorded(tmp_path, "planner_scale")) == len(lines)
