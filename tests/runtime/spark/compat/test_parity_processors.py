"""Spark's stateful APIs under streamscale against Spark's own operators, batch for batch.

Each API's query is one expression, applied unchanged to Spark's ``df.groupBy("k")``
and to streamscale's ``streamscale.stream(df).key_by("k")``. One Spark query per API (RocksDB provider, all started together) and one streamscale
run per time domain (every operator of it in one DAG) over the same files, one per
batch: ``transformWithStateInPandas`` and ``transformWithState`` (Row) with event-time
timers, value, list and map state, TTL and an initial state; ``applyInPandasWithState``
with ``EventTimeTimeout``; and, on processing time, timers and ``ProcessingTimeTimeout``.
The event-time run moves shards between tasks at every batch boundary (a scripted
policy: 2, 4, 2, 5 units); the processing-time one compares counts and which batch a
timer or timeout fires in (1 ms ahead: the next batch; an hour: never), not the
processing times themselves, which no two runs share.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.spark._parity import (
    run_spark_many,
    run_streamscale_many,
    source,
    write_batches,
)
from tests.runtime.spark._parity_procs import (
    BATCHES,
    COLS,
    GS_OUT,
    GS_STATE,
    INITIAL,
    OUT,
    Kitchen,
    RowKitchen,
    Ticker,
    gs_event,
    gs_processing,
)

PT_BATCHES = 6  # four with input, then two without (timers and timeouts due)


def initial_state(spark: Any) -> Any:
    return spark.createDataFrame(INITIAL, "k string, n long, at long").groupBy("k")


def event_time_queries(spark: Any) -> list[Any]:
    """One expression per API, applied as it is to Spark's ``df.groupBy("k")`` and to
    streamscale's ``streamscale.stream(df).key_by("k")``."""
    return [
        lambda g: g.transformWithStateInPandas(
            Kitchen(), OUT, "append", "EventTime", initialState=initial_state(spark)
        ),
        lambda g: g.transformWithState(
            RowKitchen(), OUT, "append", "EventTime", initialState=initial_state(spark)
        ),
        lambda g: g.applyInPandasWithState(
            gs_event, GS_OUT, GS_STATE, "append", "EventTimeTimeout"
        ),
    ]


def processing_time_queries() -> list[Any]:
    return [
        lambda g: g.transformWithStateInPandas(Ticker(), OUT, "append", "ProcessingTime"),
        lambda g: g.applyInPandasWithState(
            gs_processing, GS_OUT, GS_STATE, "append", "ProcessingTimeTimeout"
        ),
    ]


def _on_spark(query: Any) -> Any:
    return lambda df: query(df.groupBy("k"))


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Spark's and streamscale's rows per batch, for every API."""
    root = tmp_path_factory.mktemp("parity")
    src = write_batches(root, BATCHES)
    et, pt = event_time_queries(spark), processing_time_queries()
    want = run_spark_many(
        spark,
        [
            (source(spark, src), _on_spark(q), COLS, root / f"spark-et{i}", None)
            for i, q in enumerate(et)
        ]
        + [
            (source(spark, src), _on_spark(q), COLS, root / f"spark-pt{i}", PT_BATCHES)
            for i, q in enumerate(pt)
        ],
    )
    got_et, res_et = run_streamscale_many(
        source(spark, src), [(q, COLS) for q in et], root / "ss-et", steps=(4, 2, 5)
    )
    got_pt, _ = run_streamscale_many(
        source(spark, src), [(q, COLS) for q in pt], root / "ss-pt", batches=PT_BATCHES
    )
    return {"src": src, "want": want, "got": got_et + got_pt, "res_et": res_et}


def _of(rows: dict[int, list[tuple[Any, ...]]], key: str) -> dict[int, list[tuple[Any, ...]]]:
    return {
        b: [r for r in rs if r[0] == key] for b, rs in rows.items() if any(r[0] == key for r in rs)
    }


@pytest.mark.spark
def test_transform_with_state_in_pandas_event_time_matches_spark(runs: dict[str, Any]) -> None:
    want, got = runs["want"][0], runs["got"][0]
    assert got == want
    # hand-checked: sessions end in the batch whose watermark passes them; c@6 was late
    assert [r for r in want[3] if r[1] == "end" and r[0] in "abc"] == [
        ("a", "end", 3, 25000, 25000, ""),
        ("c", "end", 1, 16000, 25000, ""),
    ]
    assert [r for r in want[4] if r[0] == "b"] == [("b", "end", 2, 35000, 35000, "")]
    # the initial state: v1 starts at 1; i9 (only there) ends at its timer with n = 7
    assert [r[2] for b in (0, 1) for r in want[b] if r[:2] == ("v1", "value")] == [2, 4]
    assert ("i9", "end", 7, 20000, 25000, "") in want[3]
    assert [r for r in want[3] if r[:2] == ("i1", "in")] == [("i1", "in", 5, 40000, 25000, "")]
    # list, map and TTL (1 ms: gone by the next batch; one hour: kept, per element)
    assert [r[5] for b in sorted(want) for r in want[b] if r[1] == "list"] == [
        "1", "1,2", "1,2,3", "1,2,3,4",
    ]  # fmt: skip
    assert [r[5] for b in sorted(want) for r in want[b] if r[1] == "map"] == [
        "[(1, 1)]", "[]", "[(2, 1)]", "[(1, 1), (2, 1)]",
    ]  # fmt: skip
    wms = [b.extra.get("watermark_ms") for b in runs["res_et"].records]
    assert wms == [0, 7000, 15000, 25000, 35000]
    late = [b.extra.get("late_rows", {}) for b in runs["res_et"].records]
    assert late[2] == {"Kitchen": 1, "RowKitchen": 1, "gs_event": 1}
    assert not any(late[:2] + late[3:])


@pytest.mark.spark
def test_transform_with_state_rows_event_time_matches_spark(runs: dict[str, Any]) -> None:
    assert runs["got"][1] == runs["want"][1]
    assert runs["want"][1] == runs["want"][0]  # the Row API and the pandas one agree


@pytest.mark.spark
def test_apply_in_pandas_with_state_event_time_timeout_matches_spark(runs: dict[str, Any]) -> None:
    want, got = runs["want"][2], runs["got"][2]
    assert got == want
    cols = "k,ts,v,et"  # a timed-out key's function gets one empty frame of the input
    # a's timeout (25 s) is not earlier than batch 3's watermark (25 s): batch 4's is
    assert _of(want, "a")[4] == [("a", "timeout", 3, 20000, 35000, cols)]
    # q1 keeps its state when it times out: Spark keeps its timeout too, due again
    assert [b for b, rs in _of(want, "q1").items() if rs[0][1] == "timeout"] == [3, 4]


@pytest.mark.spark
def test_processing_time_timers_and_timeouts_match_spark(runs: dict[str, Any]) -> None:
    ticker, timeouts = runs["want"][3], runs["want"][4]
    assert runs["got"][3] == ticker
    assert runs["got"][4] == timeouts
    assert set(ticker) == set(range(5))  # batch 5 fires nothing
    # a timer 1 ms ahead fires in the next batch (listed while it fires); h1's never
    assert _of(ticker, "a") == {
        0: [("a", "in", 1, 1, -1, "")],
        1: [("a", "fire", 2, 2, -1, ""), ("a", "in", 2, 2, -1, "")],
        2: [("a", "fire", 3, 2, -1, ""), ("a", "in", 3, 2, -1, "")],
        3: [("a", "fire", 3, 1, -1, "")],
    }
    assert _of(ticker, "h1") == {0: [("h1", "in", 1, 1, -1, "")]}
    # TTL of 1 ms: gone by the next batch; of one hour: kept, per list element
    assert [r[5] for b in sorted(ticker) for r in ticker[b] if r[1] == "ttl"] == [
        "(-1, 0, 0, [])(1, 1)", "(-1, 0, 1, [])(1, 2)", "(-1, 0, 2, [])(1, 3)",
    ]  # fmt: skip
    assert _of(timeouts, "d") == {
        3: [("d", "in", 1, 0, -1, "")],
        4: [("d", "timeout", 1, 0, -1, "")],
    }
    assert _of(timeouts, "h1") == {0: [("h1", "in", 1, 0, -1, "")]}


def _logged(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(x)["batch_id"] for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.slow
def test_event_time_operators_after_a_sigkilled_driver_match_spark(
    spark: Any, runs: dict[str, Any], tmp_path: Path
) -> None:
    """The driver dies mid-run; the restart resumes the watermark, timers, timeouts and
    state exactly, and does not apply the initial state again."""
    from tests.runtime.spark._parity_driver import job

    src = runs["src"]
    ckpt, out = tmp_path / "ck", tmp_path / "out"
    driver = Path(__file__).parents[1] / "_parity_driver.py"
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(src), str(ckpt), str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while len(_logged(out / "batches.jsonl")) < 2:
            assert proc.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "driver made no progress"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert max(_logged(out / "batches.jsonl")) < max(runs["want"][0])  # killed before the end
    job(spark, src, None).run(checkpoint=ckpt, out=out, duration_s=300)
    for i in range(3):
        got: dict[int, list[tuple[Any, ...]]] = {}
        for r in spark.read.parquet(str(out / f"op{i}")).collect():
            got.setdefault(int(r["batch_id"]), []).append(tuple(r[c] for c in COLS))
        assert {b: sorted(v) for b, v in got.items()} == runs["want"][i], f"op{i}"


def test_what_differs_from_spark_is_refused_before_the_query_starts() -> None:
    from streamscale.errors import StreamscaleError
    from streamscale.runtime.spark.compat.group_state import from_group_state
    from streamscale.runtime.spark.compat.processor import from_processor

    with pytest.raises(StreamscaleError, match="initialState must be a grouped DataFrame"):
        from_processor(Kitchen(), "k", initialState=object())
    with pytest.raises(StreamscaleError, match="output mode"):
        from_processor(Kitchen(), "k", output_mode="complete")
    with pytest.raises(StreamscaleError, match="api"):
        from_processor(Kitchen(), "k", api="arrow")
    # TTL outside processing time: Spark refuses it in the processor's set-up, so here
    with pytest.raises(StreamscaleError, match="TTL needs time mode ProcessingTime"):
        from_processor(Ticker(), "k", time_mode="EventTime")
    assert from_processor(Kitchen(), "k", output_mode="update").time_mode == "ProcessingTime"
    with pytest.raises(StreamscaleError, match="timeout must be one of"):
        from_group_state(gs_event, "k", "WallClockTimeout")
    assert from_group_state(gs_event, "k", "GroupStateTimeout.EventTimeTimeout").time_mode == (
        "EventTime"
    )


def _keyed(spark: Any, tmp_path: Path) -> Any:
    import streamscale

    return streamscale.stream(source(spark, write_batches(tmp_path, BATCHES[:1]))).key_by("k")


@pytest.mark.spark
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda g: g.applyInPandasWithState(gs_event, GS_OUT, GS_STATE, "complete", "NoTimeout"),
            r"^applyInPandasWithState: 'complete': outputMode must be one of append, update$",
        ),
        (
            lambda g: g.applyInPandasWithState(gs_event, GS_OUT, GS_STATE, "append", "Wall"),
            r"^applyInPandasWithState: 'Wall': timeoutConf must be one of NoTimeout, ",
        ),
        (
            lambda g: g.applyInPandasWithState(
                lambda k, rows: [], GS_OUT, GS_STATE, "append", "NoTimeout"
            ),
            r"^applyInPandasWithState: func: must take 3 arguments \(key, pdf_iter, state\)$",
        ),
        (
            lambda g: g.applyInPandasWithState(
                gs_event, "k strin", GS_STATE, "append", "NoTimeout"
            ),
            r"^applyInPandasWithState: outputStructType 'k strin' does not parse",
        ),
        (
            lambda g: g.transformWithStateInPandas(Kitchen(), OUT, "complete", "EventTime"),
            r"^transformWithStateInPandas: 'complete': outputMode must be one of append, update$",
        ),
        (
            lambda g: g.transformWithStateInPandas(Kitchen(), OUT, "append", "Wall"),
            r"^transformWithStateInPandas: 'Wall': timeMode must be one of None, ProcessingTime, ",
        ),
        (
            lambda g: g.transformWithState(RowKitchen(), OUT, "append", "EventTime", None, "et"),
            r"^transformWithState: 'et': eventTimeColumnName .* is not supported$",
        ),
        (
            lambda g: g.transformWithStateInPandas(gs_event, OUT, "append", "None"),
            r"^transformWithStateInPandas: function: statefulProcessor must be a StatefulProcessor",
        ),
        (
            lambda g: g.transformWithStateInPandas(_TwoArgs(), OUT, "append", "None"),
            r"^transformWithStateInPandas: _TwoArgs.handleInputRows: must take 3 arguments ",
        ),
    ],
)
def test_spark_named_methods_refuse_what_spark_refuses_in_one_line(
    spark: Any, tmp_path: Path, call: Any, message: str
) -> None:
    from streamscale.errors import StreamscaleError

    with pytest.raises(StreamscaleError, match=message) as err:
        call(_keyed(spark, tmp_path))
    assert "\n" not in str(err.value)


@pytest.mark.spark
def test_spark_named_methods_take_only_spark_arguments(spark: Any, tmp_path: Path) -> None:
    keyed = _keyed(spark, tmp_path)
    with pytest.raises(TypeError):  # Spark's positional arguments are required
        keyed.applyInPandasWithState(gs_event, GS_OUT, GS_STATE, "append")
    with pytest.raises(TypeError):
        keyed.transformWithStateInPandas(Kitchen(), OUT, "append")


class _TwoArgs:
    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Any) -> Any:
        return iter(())
