"""bench_agg_state.py: a small keyed table, one batch size, every layout."""

from __future__ import annotations

from tests.benchmarks.conftest import Run


def test_small_table_every_layout(run_bench: Run) -> None:
    lines = run_bench(
        "bench_agg_state", "--groups", "2000", "--shards", "2", "--batches", "1",
        "--rows", "100", "--traffic", "uniform", "--layouts", "blob,buckets-4",
    )  # fmt: skip
    assert [(x["bench"], x["layout"]) for x in lines] == [
        ("agg_state", "blob"), ("agg_state", "buckets-4"),
    ]  # fmt: skip
    assert lines[0]["written_over_blob"] == 1.0
    for x in lines:
        assert x["bytes_written_per_batch"] > 0
