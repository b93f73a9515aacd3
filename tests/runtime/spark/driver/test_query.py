"""``StreamingQuery``: a started job with Spark's methods; it stops between batches.

The handle's semantics on a scripted driver (no Spark), then on Spark: a query that runs
until stopped, stopped while a batch runs (the batch commits once, nothing else starts,
no JVM error, the state equal to pandas over the committed batches, a restart goes on
from there), a stop that cuts an overlong batch short (replayed by the next run, its
state applied once), and a failing batch (``exception()``, ``awaitTermination`` raises).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

import streamscale
from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.api import Stream, stream
from streamscale.runtime.spark.driver.drive import BatchGate
from streamscale.runtime.spark.driver.query import StreamingQuery, start_query
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.state.state import query_committed
from streamscale.runtime.spark.state.state_local import LocalStateBackend
from tests.runtime.spark._seq_source import SeqSource, expected_rows, flaky_counter, tally

OPTS = {"keys": "10", "step": "40", "partitions": "2", "total": "100000"}


# -- the handle on a scripted driver ------------------------------------------------------


class _SparkQuery:
    id, runId, name = "q-id", "run-id", "scripted"


def _scripted(drive: Any) -> StreamingQuery:
    """A handle whose driver is ``drive(stop)``; its Spark query exists from the start."""
    return start_query(
        drive, gate=BatchGate(lambda df, b: None, spark=None), recent=[],
        spark_query=lambda: _SparkQuery,
    )  # fmt: skip


def _result(batches: int) -> RunResult:
    return RunResult(records=(), batches=batches, plan=None, dead_letters=0)


def test_a_query_runs_until_stopped_and_then_reports_its_result() -> None:
    def drive(stop: threading.Event) -> RunResult:
        stop.wait()
        return _result(3)

    q = _scripted(drive)
    assert isinstance(q, streamscale.StreamingQuery)
    assert (q.id, q.runId, q.name) == ("q-id", "run-id", "scripted")
    assert q.isActive and q.awaitTermination(0.2) is False and q.exception() is None
    assert q.lastProgress is None and q.recentProgress == []
    with pytest.raises(StreamscaleError, match="still running"):
        q.result(timeout=0.05)
    q.stop()
    assert not q.isActive
    assert q.awaitTermination(1) is True and q.awaitTermination() is None
    assert q.result().batches == 3 and q.exception() is None
    q.stop()  # stopping an ended query does nothing
    for bad in (0, -1.0, True, "5"):
        with pytest.raises(StreamscaleError, match="awaitTermination: timeout must be"):
            q.awaitTermination(bad)  # type: ignore[arg-type]


def test_the_error_that_ended_a_query_is_raised_by_every_wait() -> None:
    boom = StreamscaleError("batch failed: RuntimeError: boom", item="topology t")

    def drive(stop: threading.Event) -> RunResult:
        time.sleep(0.1)
        raise boom

    q = _scripted(drive)
    with pytest.raises(StreamscaleError, match="boom") as first:
        q.awaitTermination()
    assert first.value is boom and q.exception() is boom and not q.isActive
    with pytest.raises(StreamscaleError, match="boom"):
        q.awaitTermination(5)
    with pytest.raises(StreamscaleError, match="boom"):
        q.result()


def test_a_stop_from_inside_a_batch_returns_at_once_and_the_query_ends_after_it() -> None:
    held: dict[str, Any] = {}
    after: list[str] = []

    def body(df: Any, batch_id: int) -> None:  # an on_batch callback calling stop()
        held["q"].stop()
        after.append("stop returned inside the batch")

    gate = BatchGate(body, spark=None)

    def drive(stop: threading.Event) -> RunResult:
        while "q" not in held:
            time.sleep(0.01)
        gate(None, 0)  # the batch, in the thread that drives the query
        assert stop.is_set()
        return _result(1)

    q = start_query(drive, gate=gate, recent=[], spark_query=lambda: _SparkQuery)
    held["q"] = q
    assert q.awaitTermination(30) is True
    assert after == ["stop returned inside the batch"] and q.result().batches == 1


def test_a_driver_that_ends_before_its_spark_query_starts_raises_from_start() -> None:
    def drive(stop: threading.Event) -> RunResult:
        raise StreamscaleError("no such table", item="source")

    with pytest.raises(StreamscaleError, match="source: no such table"):
        start_query(
            drive, gate=BatchGate(lambda df, b: None, spark=None), recent=[],
            spark_query=lambda: None,
        )  # fmt: skip


# -- on Spark ---------------------------------------------------------------------------


class _Uncaught:
    """The JVM's default handler of uncaught errors (a Python object, through py4j): what
    reached it, e.g. the ``StackOverflowError`` of a query stopped inside a batch."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def uncaughtException(self, thread: Any, exc: Any) -> None:
        self.seen.append(f"{thread.getName()}: {exc.toString()}")

    class Java:
        implements: ClassVar[list[str]] = ["java.lang.Thread$UncaughtExceptionHandler"]


@pytest.fixture
def uncaught(spark: Any) -> Any:
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)
    handler = _Uncaught()
    sc._jvm.java.lang.Thread.setDefaultUncaughtExceptionHandler(handler)
    yield handler
    sc._jvm.java.lang.Thread.setDefaultUncaughtExceptionHandler(None)


def _job(spark: Any, out: Path, calls: list[int], hold: dict[str, Any], fn: Any = tally) -> Stream:
    """SeqSource → ``fn`` keyed by key → a sink that writes each batch to
    ``out/batch_id=<b>`` and records its call; at batch ``hold["at"]`` the sink sets
    ``hold["entered"]`` and sleeps ``hold["sleep"]`` seconds first (a batch running when
    the stop comes)."""
    spark.dataSource.register(SeqSource)
    df = spark.readStream.format(SeqSource.name()).options(**OPTS).load()
    keyed = stream(df, name="handle", trigger_s=0.1).key_by("key", instances=2, shards=4)

    def write(bdf: Any, batch_id: int) -> None:
        calls.append(batch_id)
        if batch_id == hold["at"]:
            hold["entered"].set()
            time.sleep(hold["sleep"])
        bdf.write.mode("overwrite").parquet(str(out / f"batch_id={batch_id}"))

    return keyed.process(fn, name="count").to(write, name="out")


def _state_is_pandas_over_committed(ck: Path) -> int:
    """The committed state of every key equals pandas' count over the tuples of the
    batches Spark committed; returns how many batches that is."""
    n = query_committed(ck / "spark") + 1
    got: dict[str, int] = {}
    for shard in LocalStateBackend(ck / "state").load_all("count").values():
        got.update(shard)
    want = expected_rows(OPTS, n * int(OPTS["step"]))["key"].value_counts().to_dict()
    assert got == want
    return n


@pytest.mark.spark
def test_the_jvm_check_sees_a_spark_query_stopped_inside_its_batchs_jobs(
    spark: Any, tmp_path: Path, uncaught: _Uncaught
) -> None:
    """The check the stop tests make: Spark's own ``stop()`` while a ``foreachBatch``
    runs Spark jobs ends the query's thread in a ``StackOverflowError``, which the JVM's
    default handler sees."""
    entered = threading.Event()

    def body(bdf: Any, batch_id: int) -> None:
        entered.set()
        for _ in range(200):
            spark.range(2_000_000).selectExpr("sum(id)").collect()

    df = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    q = df.writeStream.foreachBatch(body).option("checkpointLocation", str(tmp_path)).start()
    try:
        assert entered.wait(300)
        time.sleep(0.5)  # a job of the batch runs
    finally:
        q.stop()
    deadline = time.monotonic() + 30
    while not uncaught.seen and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("StackOverflowError" in s for s in uncaught.seen)


@pytest.mark.spark
def test_a_query_stopped_while_a_batch_runs_commits_that_batch_once(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], uncaught: _Uncaught
) -> None:
    ck, out, calls = tmp_path / "ck", tmp_path / "out", []
    hold = {"at": 1, "sleep": 2.0, "entered": threading.Event()}
    job = _job(spark, out, calls, hold)
    q = job.start(checkpoint=ck, policy="static")  # no limit: runs until stopped
    assert q.awaitTermination(0.5) is False and q.isActive
    assert hold["entered"].wait(300), "batch 1 never started"
    q.stop()  # batch 1's sink sleeps: the stop comes while it runs
    assert not q.isActive and q.exception() is None and q.awaitTermination(1) is True
    res = q.result()
    # batch 1 finished and Spark committed it; no batch ran after it
    assert calls == [0, 1] and res.batches == 2 and query_committed(ck / "spark") == 1
    assert q.lastProgress is not None and q.lastProgress["batch_id"] == 1
    assert [p["batch_id"] for p in q.recentProgress] == [0, 1]
    assert sorted(p.name for p in out.iterdir()) == ["batch_id=0", "batch_id=1"]
    assert _state_is_pandas_over_committed(ck) == 2
    # a run on the checkpoint goes on from batch 2: no batch written twice
    again = job.run(checkpoint=ck, policy="static", max_batches=1, duration_s=300)
    assert again.batches >= 1 and calls == list(range(2 + again.batches))
    assert _state_is_pandas_over_committed(ck) == 2 + again.batches
    assert uncaught.seen == []
    assert "StackOverflowError" not in "".join(capfd.readouterr())


@pytest.mark.spark
def test_a_stop_cuts_an_overlong_batch_short_and_the_next_run_replays_it(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], uncaught: _Uncaught,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from streamscale.runtime.spark.driver import drive

    # the stop waits 0.5 s for the running batch, not DRAIN_S
    monkeypatch.setattr(drive, "_drain_until", lambda records, clock: clock() + 0.5)
    ck, out, calls = tmp_path / "ck", tmp_path / "out", []
    hold = {"at": 1, "sleep": 3.0, "entered": threading.Event()}
    job = _job(spark, out, calls, hold)
    q = job.start(checkpoint=ck, policy="static")
    assert hold["entered"].wait(300), "batch 1 never started"
    q.stop()  # batch 1's sink sleeps past the drain: its write is interrupted
    assert not q.isActive and q.exception() is None
    committed = query_committed(ck / "spark") + 1
    assert committed in (1, 2)  # batch 1 cut short (or done before the stop reached it)
    again = job.run(checkpoint=ck, policy="static", max_batches=2, duration_s=300)
    total = _state_is_pandas_over_committed(ck)
    assert total == committed + again.batches  # a replayed batch is applied once
    assert sorted(set(calls)) == list(range(total)) and calls.count(0) == 1
    assert uncaught.seen == []
    assert "StackOverflowError" not in "".join(capfd.readouterr())


@pytest.mark.spark
def test_a_failed_batch_ends_the_query_with_its_error(spark: Any, tmp_path: Path) -> None:
    marker, at = tmp_path / "fail", int(OPTS["step"])  # batch 1's first tuple
    marker.touch()

    def failing(rows: Any, state: dict[str, Any]) -> Any:
        return flaky_counter(rows, state, marker=str(marker), at_seq=at)

    failing.required_fields = ("seq",)  # type: ignore[attr-defined]
    calls: list[int] = []
    hold = {"at": -1, "sleep": 0.0, "entered": threading.Event()}
    q = _job(spark, tmp_path / "out", calls, hold, fn=failing).start(
        checkpoint=tmp_path / "ck", policy="static"
    )
    with pytest.raises(StreamscaleError, match="injected failure at seq 40") as err:
        q.awaitTermination()
    assert q.exception() is err.value and not q.isActive
    with pytest.raises(StreamscaleError, match="injected failure"):
        q.awaitTermination(1)  # every wait raises it again, as Spark's
    assert calls == [0]  # batch 0 committed; batch 1 failed before its sink
    assert query_committed(tmp_path / "ck" / "spark") == 0
