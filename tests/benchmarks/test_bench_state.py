"""bench_state.py: a small state on each backend (local, local-full, S3 on moto)."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.conftest import Run, recorded


def test_small_state_on_every_backend(run_bench: Run, tmp_path: Path) -> None:
    lines = run_bench(
        "bench_state", "--keys", "2000", "--shards", "4", "--batches", "2",
        "--backends", "local,local-full,s3",
    )  # fmt: skip
    assert [(x["bench"], x["backend"]) for x in lines] == [
        ("state", "local"), ("state", "local-full"), ("state", "s3"),
    ]  # fmt: skip
    for x in lines:
        assert x["keys"] == 2000 and x["touched_fraction"] == 0.01
    assert len(recorded(tmp_path, "state")) == 3
