"""A run's history in bounded memory: running totals, recent batches, a latency sketch.

A job may run for days; keeping every batch record and every latency would grow the
driver without bound. :class:`RunHistory` keeps

* exact running totals (batches, rows, busy and CPU seconds, first and last batch),
* the most recent batch records in a ring (:data:`RECENT_BATCHES`), for live views,
  plots and the last decision,
* every latency in a :class:`LatencySketch`: log-spaced buckets with a relative
  error below ``rel_error`` for any percentile (an HDR-histogram-style sketch),
  so the run's p50/p99 cover all batches in fixed memory.

Examples
--------
>>> s = LatencySketch()
>>> s.add([1.0, 2.0, 3.0, 4.0, 100.0])
>>> round(s.quantile(0.5), 1)
3.0
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["RECENT_BATCHES", "LatencySketch", "RunHistory"]

#: Batch records kept in full (the rest live on only in the totals and the sketch, and
#: every batch's line in ``metrics.jsonl``). A record carries the controller's inputs and
#: per-shard figures, ~10-15 KB: 256 of them hold a few MB of a driver's heap (2,048 held
#: ~25 MB, what a long run's Python heap grew by before it levelled off — tracemalloc).
RECENT_BATCHES = 256


class LatencySketch:
    """Quantiles of a stream of non-negative values in fixed memory.

    Values in ``[lowest, highest]`` fall into log-spaced buckets: bucket ``i`` covers
    ``[lowest·γ^i, lowest·γ^(i+1))`` with ``γ = (1 + e)/(1 − e)``. The ``q``-quantile is
    the order statistic of rank ``⌊q·(n − 1)⌋`` (numpy's ``method="lower"``), answered
    with its bucket's value ``2·lo·γ/(1 + γ)``, which is within a relative error ``e``
    of every value in the bucket (the DDSketch bound, Masson et al., VLDB 2019).
    Values below ``lowest`` count in an underflow bucket reported as 0; values above
    ``highest`` are clamped to it.

    Parameters
    ----------
    rel_error
        Relative accuracy ``e`` of every quantile (default 1 %).
    lowest, highest
        The value range resolved (defaults: 1 µs to 10⁹ ms, in ms).
    """

    def __init__(
        self, *, rel_error: float = 0.01, lowest: float = 1e-3, highest: float = 1e9
    ) -> None:
        if not 0 < rel_error < 1 or not 0 < lowest < highest:
            raise ValueError("need 0 < rel_error < 1 and 0 < lowest < highest")
        self.gamma = (1.0 + rel_error) / (1.0 - rel_error)
        self.lowest, self.highest = lowest, highest
        self._log_gamma = math.log(self.gamma)
        n = math.ceil(math.log(highest / lowest) / self._log_gamma) + 1
        self.counts = np.zeros(n + 1, dtype=np.int64)  # [0] = underflow
        self.count = 0

    def add(self, values: Iterable[float] | np.ndarray) -> None:
        """Count ``values`` (NaN values are skipped)."""
        v = np.asarray(values, dtype=float).ravel()
        v = v[~np.isnan(v)]
        if v.size == 0:
            return
        idx = np.zeros(v.size, dtype=np.int64)
        pos = v >= self.lowest
        clipped = np.minimum(v[pos], self.highest)
        idx[pos] = 1 + np.floor(np.log(clipped / self.lowest) / self._log_gamma).astype(np.int64)
        idx = np.minimum(idx, self.counts.size - 1)
        self.counts += np.bincount(idx, minlength=self.counts.size)
        self.count += int(v.size)

    def merge(self, other: LatencySketch) -> None:
        if other.counts.shape != self.counts.shape or other.gamma != self.gamma:
            raise ValueError("sketches with different parameters")
        self.counts += other.counts
        self.count += other.count

    def quantile(self, q: float) -> float:
        """The ``q``-quantile (0 ≤ q ≤ 1) within the relative error; NaN when empty."""
        if self.count == 0:
            return math.nan
        rank = q * (self.count - 1)
        i = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        i = min(i, self.counts.size - 1)
        if i == 0:
            return 0.0
        lo = self.lowest * self.gamma ** (i - 1)
        return float(min(2.0 * lo * self.gamma / (1.0 + self.gamma), self.highest))

    @property
    def nbytes(self) -> int:
        return int(self.counts.nbytes)


@dataclass
class RunHistory:
    """A run's batches: exact totals, the recent records, and a sketch of all latencies.

    The first batch is the warm-up (Spark's start-up): :meth:`add` keeps its figures
    apart, as the run's summaries exclude it from throughput and latency.
    """

    recent: deque[Any] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    latency: LatencySketch = field(default_factory=LatencySketch)
    first_latency: LatencySketch = field(default_factory=LatencySketch)
    batches: int = 0
    rows: int = 0
    steady_rows: int = 0
    busy_s: float = 0.0
    cpu_s: float = 0.0
    first: Any = None
    last: Any = None
    max_tasks: int = 0

    def add(self, record: Any, latencies: np.ndarray | Iterable[float] = ()) -> None:
        """Count one batch's record (a :class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`:
        its ``tasks`` per keyed operator are summed) and its latency sample (ms)."""
        if self.batches == 0:
            self.first = record
            self.first_latency.add(latencies)
        else:
            self.steady_rows += int(record.rows)
            self.latency.add(latencies)
        self.batches += 1
        self.rows += int(record.rows)
        self.busy_s += float(record.busy_s)
        self.cpu_s += float(record.cpu_s)
        self.max_tasks = max(self.max_tasks, sum(record.tasks.values()))
        self.last = record
        self.recent.append(record)

    def __len__(self) -> int:
        return self.batches

    def throughput(self) -> float:
        """Rows per second after the warm-up batch (the warm-up alone if it is all)."""
        if self.batches > 1 and self.last.time > self.first.time:
            return self.steady_rows / (self.last.time - self.first.time)
        if self.batches and self.first.duration_s > 0:
            return self.first.rows / self.first.duration_s
        return 0.0

    def quantile(self, q: float) -> float:
        """Latency quantile (ms) after the warm-up batch (the warm-up alone if it is all)."""
        sketch = self.latency if self.batches > 1 else self.first_latency
        return sketch.quantile(q)
