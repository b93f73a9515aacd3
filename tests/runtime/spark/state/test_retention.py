"""What a long run keeps of its output: the metrics log rotates, dead letters are pruned
oldest batch first and counted, and the settings route through --param; hand-checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import parse_params
from streamscale.runtime.spark.driver.metrics import MetricsWriter
from streamscale.runtime.spark.state.retention import OUTPUT_SETTINGS, prune_dead_letters


def test_the_metrics_log_rotates_keeps_the_newest_lines_in_order_and_stays_bounded(
    tmp_path,
) -> None:
    from streamscale.runtime.spark.state.retention import metrics_files, read_metrics

    path = tmp_path / "metrics.jsonl"
    line = json.dumps({"batch_id": 0, "pad": "x" * 80})  # 106 bytes; 109 as written below
    w = MetricsWriter(path, max_mb=1000 / 2**20, keep=2)  # rotate past 1,000 bytes
    for i in range(100):
        w.write(line.replace('"batch_id": 0', f'"batch_id": {i:3d}'))
    files = metrics_files(path)
    # each file takes lines until it passes 1,000 bytes: 10 lines (1,090 bytes), then rotates
    assert [f.name for f in files] == ["metrics.jsonl.2", "metrics.jsonl.1"]
    assert all(f.stat().st_size == 1090 for f in files) and not path.exists()
    ids = [r["batch_id"] for r in read_metrics(path)]
    assert ids == list(range(80, 100))  # the newest 20, oldest first; nothing else kept
    w.write(line)
    assert len(read_metrics(path)) == 21 and path.exists()
    MetricsWriter(tmp_path / "k0.jsonl", max_mb=1e-6, keep=0).write(line)
    assert metrics_files(tmp_path / "k0.jsonl") == []


def _letters(d: Path, batch: int, lines: int, width: int = 99) -> None:
    # each line is `width` bytes plus its newline
    (d / f"batch-{batch}-calc-part-0.jsonl").write_text(("x" * width + "\n") * lines)


def test_dead_letters_beyond_the_limit_go_oldest_batch_first_and_are_counted(
    tmp_path: Path,
) -> None:
    for b, n in [(3, 2), (1, 4), (12, 3), (2, 1)]:  # 100 bytes a line
        _letters(tmp_path, b, n)
    (tmp_path / "notes.txt").write_text("x" * 10_000)  # not a dead-letter file: untouched
    # 1,000 bytes in 10 lines: down to 600 bytes removes batch 1 (400 B, 4 lines)
    assert prune_dead_letters(tmp_path, 600) == 4
    assert sorted(p.name for p in tmp_path.glob("batch-*")) == [
        "batch-12-calc-part-0.jsonl", "batch-2-calc-part-0.jsonl", "batch-3-calc-part-0.jsonl"
    ]  # fmt: skip
    # down to 300: batch 2 (100 B) and batch 3 (200 B) go — by batch number, not name order
    assert prune_dead_letters(tmp_path, 300) == 1 + 2
    assert [p.name for p in tmp_path.glob("batch-*")] == ["batch-12-calc-part-0.jsonl"]
    assert prune_dead_letters(tmp_path, 300) == 0 and (tmp_path / "notes.txt").exists()
    assert prune_dead_letters(tmp_path / "missing", 1) == 0


def test_output_settings_route_through_param_and_are_parsed_once() -> None:
    assert OUTPUT_SETTINGS.parse({}) == {
        "metrics_max_mb": 64.0, "metrics_keep": 4, "dead_letters_max_mb": 1024.0,
    }  # fmt: skip
    got = parse_params("static", {"metrics_keep": "2", "dead_letters_max_mb": "0.5"})
    assert got.output["metrics_keep"] == 2 and got.output["dead_letters_max_mb"] == 0.5
    with pytest.raises(StreamscaleError, match="metrics_keep"):
        parse_params("static", {"metrics_kep": "2"})  # the known names are listed
    with pytest.raises(StreamscaleError):
        parse_params("static", {"dead_letters_max_mb": "0"})
