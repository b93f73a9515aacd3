"""Warming the executors' Python workers: a worker that ran the warm-up holds the keyed
stage's imports when the next job's task lands on it."""

from __future__ import annotations

import os
import sys

import pytest

from streamscale.runtime.spark.executors.warm import WARM_MODULES, warm_up


def _loaded(_: int) -> tuple[int, bool]:
    return os.getpid(), all(m in sys.modules for m in WARM_MODULES)


@pytest.mark.spark
def test_warmed_workers_hold_the_keyed_imports(spark):
    sc = spark.sparkContext
    n = int(sc.defaultParallelism)
    warmed = warm_up(sc, n)
    assert 1 <= len(warmed) <= n
    seen = dict(sc.parallelize(range(n), n).map(_loaded).collect())
    reused = {pid: ok for pid, ok in seen.items() if pid in warmed}
    assert reused, "Spark reuses Python workers: a later task runs on a warmed one"
    assert all(reused.values())
