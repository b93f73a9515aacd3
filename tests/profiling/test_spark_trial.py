"""Profiling trials on Spark (paper 004, §5.1) against a direct measurement."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from streamscale.profiling.profiler import profile
from streamscale.profiling.spark_trial import summarize
from streamscale.profiling.tasks import make_task


def _batch(seqs: list[int], start: float, end: float, t0: float, rate: float) -> dict[str, Any]:
    return {
        "seq0": seqs[0],
        "seqs": seqs,
        "event": [t0 + (q + 1) / rate for q in seqs],
        "done": [end] * len(seqs),
        "cpu_s": 0.5 * (end - start),
        "start": start,
        "end": end,
        "rss": 1 << 20,
    }


def test_summarize_charges_busy_time_by_tuple_share() -> None:
    # 20 tuples/s over a 2 s step (seq 40..79); one batch carries the step and 40 tuples more
    b = _batch(list(range(40, 120)), 10.0, 12.0, 0.0, 20.0)
    ok = summarize(1, 20.0, [b], 40, 80, 2.0, 4.0, 0.1, 0.9)
    assert ok.processed == 40 and ok.utilization == pytest.approx(0.5) and ok.stable
    slow = _batch(list(range(40, 80)), 10.0, 12.0, 0.0, 20.0)
    bad = summarize(1, 20.0, [slow], 40, 80, 2.0, 4.0, 0.1, 0.9)
    assert bad.utilization == pytest.approx(1.0) and not bad.stable
    missing = summarize(
        1, 20.0, [_batch(list(range(40, 60)), 3.0, 3.5, 0.0, 20.0)], 40, 80, 2.0, 4.0, 0.1
    )
    assert not missing.stable


def _direct(task: Any, threads: int, n: int = 40) -> float:
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: task(i, 0.0), range(n)))
    return n / (time.perf_counter() - t)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_profile_service_lookup_on_spark(spark: Any) -> None:
    from streamscale.profiling.spark_trial import SparkTrials

    params = {"service_ms": 50}
    task = make_task("service_lookup", params)
    direct = {1: _direct(task, 1), 2: _direct(task, 2)}
    trials = SparkTrials(spark, "service_lookup", seconds=1.5, warmup=1.5, task_params=params)
    try:
        res = profile("service_lookup", trials, threads=[1, 2], rates=[10, 15, 30])
    finally:
        trials.close()
    pts = {p.threads: p for p in res.model.points}
    assert set(pts) == {1, 2}
    for tau, p in pts.items():
        # the ladder is coarse (15 and 30 against capacities of 20 and 40 t/s)
        assert 0.3 * direct[tau] <= p.rate <= 1.2 * direct[tau], (tau, p.rate, direct[tau])
    assert pts[2].rate >= pts[1].rate  # waiting threads overlap: an I/O-bound task gains
    assert any(not t.stable for t in res.trials)  # one thread cannot keep up with 30 t/s
