"""``backlog_of``: the tuples waiting at a query's source, from Spark's progress or from
what a registered source offered (hand-checked progress entries, no Spark)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from streamscale.runtime.spark.driver.drive import backlog_of
from streamscale.runtime.spark.sources.source_registry import source_offered


@dataclass
class _Query:
    """What backlog_of reads of a StreamingQuery: its last progress."""

    lastProgress: Any


def _progress(end: dict[str, Any], latest: dict[str, Any] | None = None) -> _Query:
    src = {
        "endOffset": json.dumps(end),
        "latestOffset": None if latest is None else json.dumps(latest),
    }
    return _Query({"sources": [src]})


def test_spark_latest_offsets_are_the_backlog() -> None:
    q = _progress({"0": 120, "1": 80}, {"0": 150, "1": 100})
    assert backlog_of(q, 999, offered=lambda s: 1e9) == 50.0  # Spark's own count wins


def test_a_registered_sources_schedule_is_the_backlog() -> None:
    # the generator at 200 tuples/s, started 10 s ago: 2,000 offered; the running batch
    # starts at seq 1,500 and took 300 of them
    offered = source_offered("streamscale_generator", {"rate": "200"})
    assert offered is not None
    q = _progress({"seq": 1500, "t0": time.time() - 10.0})
    got = backlog_of(q, 300, offered=offered)
    assert got == pytest.approx(2000 - 1500 - 300, abs=2)  # the clock moved a little
    assert backlog_of(q, 300) == 0.0  # nothing declared: unknown, not guessed
    # the running batch's end in Spark's offset log: 400 tuples wait beyond it; the batch
    # took 100 of the source's tuples as 460 keyed rows (Q5 fans a bid out into hop
    # windows), so 400 waiting tuples are 1,840 rows of the keyed operator
    admitted = {"seq": 1600, "t0": time.time() - 10.0}
    got = backlog_of(q, 460, offered=offered, admitted=admitted)
    assert got == pytest.approx(400 * 4.6, abs=2 * 4.6)
    # one row a tuple (the generator's own source): tuples and rows alike
    assert backlog_of(q, 100, offered=offered, admitted=admitted) == pytest.approx(400, abs=2)
    assert backlog_of(_progress({"seq": 1500, "t0": time.time()}), 300, offered=offered) == 0.0


def test_no_progress_yet_is_no_backlog() -> None:
    assert backlog_of(_Query(None), 0, offered=lambda s: 5.0) == 0.0
    assert source_offered("parquet", {}) is None


def test_admitted_tuples_is_the_running_batchs_span_of_the_source() -> None:
    from streamscale.runtime.spark.driver.drive import admitted_tuples

    q = _progress({"seq": 1500, "t0": 1.0})  # the previous batch ended at seq 1,500
    assert admitted_tuples(q, {"seq": 1800, "t0": 1.0}) == 300
    assert admitted_tuples(q, {"seq": 1500, "t0": 1.0}) == 0
    assert admitted_tuples(q, None) is None  # no offset log entry yet
    assert admitted_tuples(q, {"0": 12}) is None  # offsets without a seq (a file source)
    assert admitted_tuples(_Query(None), {"seq": 10}) is None  # a first batch: no progress
    assert admitted_tuples(_progress({"0": 5}), {"seq": 10}) is None
