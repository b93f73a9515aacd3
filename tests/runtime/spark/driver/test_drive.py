"""``backlog_of``: the tuples waiting at a query's source, from Spark's progress or from
what a registered source offered (hand-checked progress entries, no Spark)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
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


@dataclass
class _Watch:
    """What the probe reads of the watch: the source's offered rate (tuples/s)."""

    rate: float | None


def test_the_source_probe_reads_the_running_query_and_what_its_batch_took(
    tmp_path: Path,
) -> None:
    from streamscale.runtime.spark.driver.graph_batch import SourceProbe

    offered = source_offered("streamscale_generator", {"rate": "200"})
    spark_dir = tmp_path / "spark"
    probe = SourceProbe(spark_dir=spark_dir, offered=offered, watch=_Watch(50.0))
    # before the query starts: no backlog, no admitted tuples
    assert probe.backlog() == 0.0 and probe.batch_tuples() is None
    t0 = time.time() - 10.0
    probe.query = _progress({"seq": 1500, "t0": t0})
    probe.taken = 300
    # no offset log yet: the previous batch's end plus the rows taken
    assert probe.backlog() == pytest.approx(2000 - 1500 - 300, abs=2)
    assert probe.batch_tuples() is None
    (spark_dir / "offsets").mkdir(parents=True)
    (spark_dir / "offsets" / "0").write_text(f'v1\n{{}}\n{{"seq": 1600, "t0": {t0}}}\n')
    assert probe.batch_tuples() == 100
    want = backlog_of(probe.query, 300, offered=offered, admitted={"seq": 1600, "t0": t0})
    assert probe.backlog() == pytest.approx(want, abs=2 * 3.0)
    # the watch's rate in keyed rows: the rows per tuple the body recorded
    probe.rows_per_tuple = 3.0
    assert probe.offered_rows() == 150.0
    assert SourceProbe(watch=_Watch(None)).offered_rows() is None
    assert SourceProbe(spark_dir=spark_dir).batch_tuples() is None  # nothing offered
