"""Bounded run history: the sketch's quantiles against numpy, totals against a plain sum."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.history import RECENT_BATCHES, LatencySketch, RunHistory


@given(
    values=st.lists(st.floats(1e-3, 1e8, allow_nan=False), min_size=1, max_size=400),
    q=st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 1.0]),
)
def test_quantiles_within_the_relative_error_of_numpy(values: list[float], q: float) -> None:
    sketch = LatencySketch(rel_error=0.01)
    half = len(values) // 2
    sketch.add(values[:half])
    sketch.add(np.asarray(values[half:]))
    want = float(np.percentile(values, 100 * q, method="lower"))
    assert sketch.quantile(q) == pytest.approx(want, rel=0.0101)


def test_heavy_tails_and_edges() -> None:
    rng = np.random.default_rng(3)
    v = rng.lognormal(mean=2.0, sigma=2.0, size=200_000)
    s = LatencySketch()
    for chunk in np.array_split(v, 100):
        s.add(chunk)
    for q in (0.5, 0.99, 0.999):
        assert s.quantile(q) == pytest.approx(np.percentile(v, 100 * q, method="lower"), rel=0.0101)
    assert s.count == v.size and s.nbytes < 64_000
    empty = LatencySketch()
    assert math.isnan(empty.quantile(0.5))
    empty.add([0.0, 0.0, math.nan, 5.0])
    assert empty.count == 3 and empty.quantile(0.5) == 0.0


def _rec(i: int, rows: int) -> GraphBatch:
    return GraphBatch(
        i, 0.5, {"op": rows}, {}, 0, cores={"op": 2}, tasks={"op": 2}, time=float(i), rows=rows,
        busy_s=0.25, cpu_s=0.125, policy="static",
    )  # fmt: skip


def test_run_history_is_bounded_and_its_totals_exact() -> None:
    h = RunHistory()
    rows = [(i * 7) % 13 for i in range(RECENT_BATCHES + 50)]
    for i, r in enumerate(rows):
        h.add(_rec(i, r), np.full(r, float(i + 1)))
    assert len(h) == len(rows) and len(h.recent) == RECENT_BATCHES
    assert h.recent[0].batch_id == 50 and h.rows == sum(rows)
    assert h.busy_s == pytest.approx(0.25 * len(rows)) and h.cpu_s == pytest.approx(h.busy_s / 2)
    assert h.max_tasks == 2
    # throughput excludes the warm-up batch: rows after it over the time since it ended
    assert h.throughput() == pytest.approx(sum(rows[1:]) / (len(rows) - 1))
    steady = np.concatenate([np.full(r, float(i + 1)) for i, r in enumerate(rows) if i > 0])
    assert h.quantile(0.99) == pytest.approx(np.percentile(steady, 99, method="lower"), rel=0.0101)
