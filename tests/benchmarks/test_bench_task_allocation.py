"""bench_task_allocation.py --smoke: TD/TL throughput and optimality on small jobs."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.conftest import Run, recorded


def test_smoke_prints_and_records_every_figure(run_bench: Run, tmp_path: Path) -> None:
    lines = run_bench("bench_task_allocation", "--smoke")
    assert [x["bench"] for x in lines] == [
        "td_per_s", "tl_per_s", "tl_imc_per_s", "td_over_tl", "optimality",
    ]  # fmt: skip
    for x in lines[:3]:
        assert x["value"] > 0 and len(x["windows"]) == 1
    assert lines[3]["value"] > 0
    opt = lines[4]
    assert opt["graphs"] == 20 and 0 <= opt["proven_optimal"] <= 20
    assert [x["bench"] for x in recorded(tmp_path, "task_allocation")] == [
        x["bench"] for x in lines
    ]
