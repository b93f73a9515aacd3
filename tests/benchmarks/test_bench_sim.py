"""bench_sim.py: a second of the simulated 32-node micro-benchmark, per policy."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.conftest import Run, recorded


def test_one_simulated_second_prints_and_records_both_policies(
    run_bench: Run, tmp_path: Path
) -> None:
    lines = run_bench("bench_sim", "--seconds", "1")
    assert [x["figure"] for x in lines] == [
        "sim_wall_per_sim_s[static]",
        "sim_wall_per_sim_s[elastic]",
    ]
    for x in lines:
        assert x["bench"] == "sim" and x["sim_s"] == 1.0
        assert x["wall_s"] > 0 and x["ratio"] > 0 and x["throughput"] > 0
        assert 0 <= x["policy_share"] <= 1
    assert [x["figure"] for x in recorded(tmp_path, "sim")] == [x["figure"] for x in lines]
