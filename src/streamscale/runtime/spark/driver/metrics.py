"""Per-batch metrics of a Spark run: the JSONL writer, a live table, imbalance δ.

A batch's record is :class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch` (every
job's); :class:`MetricsWriter` appends its line (``GraphBatch.to_json``) to ``metrics.jsonl``.

Imbalance δ is paper 000's (§3): max task load ÷ mean task load over the
batch's tasks, where a task's load is its busy time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from rich.table import Table

from streamscale.runtime.spark.state.retention import (
    METRICS_SETTINGS,
    OUTPUT_SETTINGS,
    metrics_files,
    read_metrics,
    rotate,
)

__all__ = [
    "METRICS_SETTINGS",
    "OUTPUT_SETTINGS",
    "MetricsWriter",
    "imbalance",
    "live_table",
    "metrics_files",
    "read_metrics",
    "rotate",
]


class _Line(Protocol):
    def to_json(self) -> str: ...


def imbalance(loads: Iterable[float]) -> float:
    """δ = max load ÷ mean load (1.0 when all are idle or there is one task)."""
    xs = [float(x) for x in loads]
    if not xs:
        return 1.0
    mean = sum(xs) / len(xs)
    return max(xs) / mean if mean > 0 else 1.0


class MetricsWriter:
    """Appends one JSON line per batch to ``path`` (flushed, so a killed run keeps its
    lines), rotating it past ``max_mb`` and keeping ``keep`` rotated files
    (:data:`~streamscale.runtime.spark.state.retention.OUTPUT_SETTINGS`); :func:`read_metrics`
    reads them all, oldest first."""

    def __init__(self, path: str | Path, *, max_mb: float = 64.0, keep: int = 4) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_mb * 2**20)
        self.keep = int(keep)

    def write(self, record: _Line | str) -> None:
        line = record if isinstance(record, str) else record.to_json()
        with self.path.open("a") as f:
            f.write(line + "\n")
            size = f.tell()
        if size > self.max_bytes:
            rotate(self.path, self.keep)


def live_table(records: Iterable[Any], *, title: str = "batches", last: int = 10) -> Table:
    """A rich table of the last ``last`` batches
    (:class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`, for a live terminal
    view): ``tasks`` and ``cores`` summed over the keyed operators."""
    recs = list(records)[-last:]
    t = Table(title=title, title_justify="left")
    cols = ("batch", "t (s)", "rows", "in/s", "proc/s", "p50 ms", "p99 ms", "δ", "tasks", "cores")
    for c in cols:
        t.add_column(c, justify="right")
    for r in recs:
        t.add_row(
            str(r.batch_id),
            f"{r.time:.1f}",
            str(r.rows),
            _f(r.input_rate),
            _f(r.processing_rate),
            _f(r.latency_p50_ms),
            _f(r.latency_p99_ms),
            _f(r.delta),
            str(sum(r.tasks.values())),
            str(sum(r.cores.values())),
        )
    return t


def _f(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.4g}"
