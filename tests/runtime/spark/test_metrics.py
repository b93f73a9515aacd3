"""Batch records: imbalance, rates, JSONL lines and the live table (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamscale.runtime.spark.metrics import MetricsWriter, build_record, imbalance, live_table
from streamscale.runtime.spark.operator import BatchStats, TaskStats


def test_imbalance_is_max_over_mean() -> None:
    assert imbalance([1.0, 1.0, 2.0]) == pytest.approx(1.5)
    assert imbalance([]) == 1.0
    assert imbalance([0.0, 0.0]) == 1.0


def test_record_and_jsonl(tmp_path: Path) -> None:
    tasks = tuple(
        TaskStats(
            partition=p,
            unit=f"op[0]#{p}",
            host="h",
            busy_s=b,
            rows=50,
            out_rows=50,
            shards={p: (50, b, 10, 50)},
            latencies_ms=np.arange(1, 101, dtype=np.float32) * (p + 1),
        )
        for p, b in enumerate((0.2, 0.6))
    )
    rec, lat = build_record(
        BatchStats(4, 0.5, tasks, dead_letters=1, partitions=2),
        time=10.0,
        since_previous_s=2.0,
        cores=2,
        policy="elastic",
    )
    assert (rec.rows, rec.tasks, rec.cores) == (100, 2, 2)
    assert rec.input_rate == pytest.approx(50.0) and rec.processing_rate == pytest.approx(200.0)
    assert rec.delta == pytest.approx(1.5)
    assert rec.busy_s == pytest.approx(0.8)
    assert rec.latency_p50_ms == pytest.approx(float(np.percentile(lat, 50)))
    assert rec.extra["per_task"]["op[0]#1"]["shards"] == [1]
    w = MetricsWriter(tmp_path / "m" / "metrics.jsonl")
    w.write(rec)
    w.write(rec)
    lines = (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["batch_id"] == 4
    assert live_table([rec]).row_count == 1


def test_the_metrics_log_rotates_keeps_the_newest_lines_in_order_and_stays_bounded(
    tmp_path,
) -> None:
    from streamscale.runtime.spark.metrics import METRICS_SETTINGS, metrics_files, read_metrics

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
    assert METRICS_SETTINGS.parse({}) == {"metrics_max_mb": 64.0, "metrics_keep": 4}
    MetricsWriter(tmp_path / "k0.jsonl", max_mb=1e-6, keep=0).write(line)
    assert metrics_files(tmp_path / "k0.jsonl") == []
