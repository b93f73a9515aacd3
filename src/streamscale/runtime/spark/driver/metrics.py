"""Per-batch metrics of a Spark run: the record, the JSONL writer and a live table.

Imbalance δ is paper 000's (§3): max task load ÷ mean task load over the
batch's tasks, where a task's load is its busy time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from streamscale.runtime.spark.driver.operator import BatchStats, percentile
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
    "BatchRecord",
    "MetricsWriter",
    "build_record",
    "imbalance",
    "live_table",
    "metrics_files",
    "read_metrics",
    "rotate",
]


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One micro-batch as measured by the runner (one JSONL line).

    ``time`` is the batch end in seconds since the run started; ``input_rate``
    is rows ÷ time since the previous batch ended; ``processing_rate`` is rows
    ÷ ``duration_s``; latencies are event time → output, in ms; ``delta`` is
    the imbalance δ; ``tasks`` is Σk (Spark tasks of the keyed stage);
    ``cores`` the cores available; ``busy_s`` the tasks' summed busy time.
    """

    batch_id: int
    time: float
    rows: int
    duration_s: float
    input_rate: float
    processing_rate: float
    latency_p50_ms: float
    latency_p99_ms: float
    delta: float
    tasks: int
    cores: int
    busy_s: float
    policy: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(_clean(asdict(self)), sort_keys=False, default=str)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    return obj


def imbalance(loads: Iterable[float]) -> float:
    """δ = max load ÷ mean load (1.0 when all are idle or there is one task)."""
    xs = [float(x) for x in loads]
    if not xs:
        return 1.0
    mean = sum(xs) / len(xs)
    return max(xs) / mean if mean > 0 else 1.0


def build_record(
    stats: BatchStats,
    *,
    time: float,
    since_previous_s: float,
    cores: int,
    policy: str,
    extra: Mapping[str, Any] | None = None,
) -> tuple[BatchRecord, np.ndarray]:
    """The record of one batch and its latency sample (ms)."""
    lat = (
        np.concatenate([t.latencies_ms for t in stats.tasks]) if stats.tasks else np.empty(0)
    ).astype(float)
    rows = stats.rows
    detail: dict[str, Any] = {
        "per_task": {
            t.unit: {
                "partition": t.partition,
                "rows": t.rows,
                "busy_s": round(t.busy_s, 6),
                "shards": sorted(t.shards),
                "host": t.host,
            }
            for t in stats.tasks
        },
        "per_shard": {
            str(g): [s[0], round(s[1], 6)] for t in stats.tasks for g, s in sorted(t.shards.items())
        },
        "dead_letters": stats.dead_letters,
        # CPU the tasks actually got: on a shared machine well below busy_s.
        "cpu_s": round(sum(t.cpu_s for t in stats.tasks), 6),
        "out_rows": sum(t.out_rows for t in stats.tasks),
    }
    detail.update(extra or {})
    rec = BatchRecord(
        batch_id=stats.batch_id,
        time=time,
        rows=rows,
        duration_s=stats.duration_s,
        input_rate=rows / since_previous_s if since_previous_s > 0 else math.nan,
        processing_rate=rows / stats.duration_s if stats.duration_s > 0 else math.nan,
        latency_p50_ms=percentile(lat, 50),
        latency_p99_ms=percentile(lat, 99),
        delta=imbalance(t.busy_s for t in stats.tasks),
        tasks=stats.partitions,
        cores=cores,
        busy_s=sum(t.busy_s for t in stats.tasks),
        policy=policy,
        extra=detail,
    )
    return rec, lat


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

    def write(self, record: BatchRecord | str) -> None:
        line = record if isinstance(record, str) else record.to_json()
        with self.path.open("a") as f:
            f.write(line + "\n")
            size = f.tell()
        if size > self.max_bytes:
            rotate(self.path, self.keep)


def live_table(records: Iterable[BatchRecord], *, title: str = "batches", last: int = 10) -> Table:
    """A rich table of the last ``last`` batches (for a live terminal view)."""
    recs = list(records)[-last:]
    t = Table(title=title, title_justify="left")
    for c in ("batch", "t (s)", "rows", "in/s", "proc/s", "p50 ms", "p99 ms", "δ", "tasks"):
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
            str(r.tasks),
        )
    return t


def _f(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.4g}"
