"""bench_elasticutor.py --smoke: scheduler time, migration and shard balance."""

from __future__ import annotations

from tests.benchmarks.conftest import Run


def test_smoke_prints_every_figure(run_bench: Run) -> None:
    lines = run_bench("bench_elasticutor", "--smoke")
    kinds = [x["bench"] for x in lines]
    assert kinds == ["scheduler_time"] + ["migration"] * 2 + ["shard_balance"] * 4
    for x in lines:
        assert all(v is not None for v in x.values()), x
