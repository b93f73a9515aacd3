"""The result contract's final rows, on hand-written batches (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from streamscale.nexmark.results import finalize


def _write(parts: Path, batch: int, rows: list[tuple[int, int, int]]) -> None:
    d = parts / f"batch_id={batch}"
    d.mkdir(parents=True)
    frame = pd.DataFrame(rows, columns=["wend", "auction", "num"])
    frame.to_parquet(d / "part-0.parquet", index=False)


def test_top_keeps_each_windows_rows_at_its_highest_value(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    # window 10: auction 1 leads with 2, then 2 ties it in batch 1 and 3 passes both with
    # 3 in batch 2 (1's and 2's rows at 2 are superseded); window 12: 1 and 4 tie at 1,
    # emitted in different batches, both kept
    _write(parts, 0, [(10, 1, 2), (12, 1, 1)])
    _write(parts, 1, [(10, 2, 2)])
    _write(parts, 2, [(10, 3, 3), (12, 4, 1)])
    got = finalize("q5", parts, tmp_path / "out", mode="top", key=("wend", "num"))
    assert got.values.tolist() == [[1, 1], [3, 3], [4, 1]]
    assert pd.read_parquet(tmp_path / "out" / "result.parquet").equals(got)
