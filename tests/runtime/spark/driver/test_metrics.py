"""Batch records: imbalance, rates, JSONL lines and the live table (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamscale.runtime.spark.driver.metrics import (
    MetricsWriter,
    build_record,
    imbalance,
    live_table,
)
from streamscale.runtime.spark.driver.operator import BatchStats, TaskStats


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
