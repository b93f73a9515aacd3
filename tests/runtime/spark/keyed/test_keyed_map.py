"""Dead-letter and sink files of one batch, found by name (no Spark)."""

from __future__ import annotations

from pathlib import Path

from streamscale.runtime.spark.keyed.keyed_map import (
    clear_dead_letters,
    count_dead_letters,
    prefixed,
)


def _touch(d: Path, name: str, lines: int = 1) -> None:
    (d / name).write_text("{}\n" * lines)


def test_one_batch_is_found_by_its_prefix_not_its_neighbours(tmp_path: Path) -> None:
    for name, n in [("batch-1-op-part-0.jsonl", 2), ("batch-1-op-part-1.jsonl", 1),
                    ("batch-10-op-part-0.jsonl", 5), ("batch-1-other-part-0.jsonl", 3),
                    ("batch-1-op-part-2.tmp", 4)]:  # fmt: skip
        _touch(tmp_path, name, n)
    got = sorted(Path(p).name for p in prefixed(str(tmp_path), "batch-1-op-part-", ".jsonl"))
    assert got == ["batch-1-op-part-0.jsonl", "batch-1-op-part-1.jsonl"]
    assert count_dead_letters(str(tmp_path), 1, "op") == 3
    assert count_dead_letters(str(tmp_path), 1) == 6  # every operator of batch 1
    assert count_dead_letters(str(tmp_path)) == 11  # every batch
    clear_dead_letters(str(tmp_path), 1, "op")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["batch-1-other-part-0.jsonl", "batch-10-op-part-0.jsonl"]
    assert prefixed(str(tmp_path / "missing"), "batch-") == []
