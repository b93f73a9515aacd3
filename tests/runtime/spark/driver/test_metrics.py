"""Batch records: imbalance, the job's figures, JSONL lines and the live table (no Spark)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from streamscale.runtime.spark.driver.graph import SinkOut
from streamscale.runtime.spark.driver.graph_batch import LINE_FIELDS, GraphBatch, batch_figures
from streamscale.runtime.spark.driver.metrics import MetricsWriter, imbalance, live_table
from streamscale.runtime.spark.driver.operator import BatchStats, TaskStats


def test_imbalance_is_max_over_mean() -> None:
    assert imbalance([1.0, 1.0, 2.0]) == pytest.approx(1.5)
    assert imbalance([]) == 1.0
    assert imbalance([0.0, 0.0]) == 1.0


def test_figures_line_and_table(tmp_path: Path) -> None:
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
            cpu_s=b / 2,
        )
        for p, b in enumerate((0.2, 0.6))
    )
    other = (TaskStats(0, "two[0]#0", "h", 0.1, 10, 10, {0: (10, 0.1, 1, 10)}, np.ones(10)),)
    figures, lat = batch_figures(
        {"op": BatchStats(4, 0.5, tasks, dead_letters=1, partitions=2),
         "two": BatchStats(4, 0.1, other, dead_letters=0, partitions=1)}
    )  # fmt: skip
    want = np.concatenate([np.arange(1, 101) * 1.0, np.arange(1, 101) * 2.0, np.ones(10)])
    assert sorted(lat) == sorted(want)
    assert figures["latency_p50_ms"] == pytest.approx(float(np.percentile(want, 50)))
    assert figures["latency_p99_ms"] == pytest.approx(float(np.percentile(want, 99)))
    assert figures["deltas"] == {"op": pytest.approx(1.5), "two": 1.0}
    assert figures["delta"] == pytest.approx(1.5)
    assert figures["busy_s"] == pytest.approx(0.9) and figures["cpu_s"] == pytest.approx(0.4)
    rec = GraphBatch(
        4, 0.5, {"op": 100, "two": 10}, {"out": SinkOut("out", 7, "o")}, 1,
        cores={"op": 2, "two": 1}, tasks={"op": 2, "two": 1}, extra={"units": ["op[0]#0"]},
        time=10.0, rows=100, latency_p50_ms=figures["latency_p50_ms"], policy="elastic",
    )  # fmt: skip
    w = MetricsWriter(tmp_path / "m" / "metrics.jsonl")
    w.write(rec)
    w.write(rec)
    lines = (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()
    line = json.loads(lines[0])
    assert len(lines) == 2 and list(line) == list(LINE_FIELDS)
    assert set(LINE_FIELDS) == {f.name for f in dataclasses.fields(GraphBatch)}
    assert line["batch_id"] == 4 and line["sinks"] == {"out": 7} and line["cores"]["two"] == 1
    assert line["input_rate"] is None  # NaN has no JSON form
    assert line["extra"] == {"units": ["op[0]#0"]}
    assert live_table([rec]).row_count == 1
