"""Event time from the query: watermark, event-time timers and late rows, against Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql.streaming import StatefulProcessor

from tests.runtime.spark._parity import run_spark, run_streamscale, source, write_batches

OUT = "k string, kind string, n long, at long, wm long"
COLS = ("k", "kind", "n", "at", "wm")

# (key, event second, value) per batch; c@6 in batch 2 is behind batch 1's watermark (7 s)
BATCHES = [
    [("a", 10, 1), ("b", 12, 1)],
    [("a", 20, 1), ("c", 11, 1)],
    [("b", 30, 1), ("a", 14, 1), ("c", 6, 1)],
    [("d", 40, 1)],
]


class SessionEnd(StatefulProcessor):
    """Counts a key's rows; a timer 5 s after its latest event time emits the session."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.n = handle.getValueState("n", "n long")
        self.last = handle.getValueState("last", "t long")

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Any:
        n = self.n.get()[0] if self.n.exists() else 0
        last = self.last.get()[0] if self.last.exists() else -1
        for pdf in rows:
            n += len(pdf)
            last = max(last, int(pdf["ts"].max()) * 1000)
        for t in self.handle.listTimers():
            self.handle.deleteTimer(t)
        self.handle.registerTimer(last + 5000)
        self.n.update((n,))
        self.last.update((last,))
        wm = timerValues.getCurrentWatermarkInMs()
        yield pd.DataFrame({"k": [key[0]], "kind": ["in"], "n": [n], "at": [last], "wm": [wm]})

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        n = self.n.get()[0]
        self.n.clear()
        self.last.clear()
        yield pd.DataFrame(
            {
                "k": [key[0]],
                "kind": ["end"],
                "n": [n],
                "at": [expiredTimerInfo.getExpiryTimeInMs()],
                "wm": [timerValues.getCurrentWatermarkInMs()],
            }
        )

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The input files and Spark's own output for them (transformWithStateInPandas)."""
    root = tmp_path_factory.mktemp("event_time")
    src = write_batches(root, BATCHES)
    want = run_spark(
        spark,
        source(spark, src),
        lambda df: df.groupBy("k").transformWithStateInPandas(
            SessionEnd(), OUT, "append", "EventTime"
        ),
        COLS,
        root / "spark",
    )
    return src, want


@pytest.mark.spark
def test_event_time_timers_and_late_rows_batch_for_batch(
    spark: Any, reference: tuple[Path, Any], tmp_path: Path
) -> None:
    src, want = reference
    got, res = run_streamscale(
        source(spark, src), SessionEnd(), COLS, tmp_path / "ss", time_mode="EventTime"
    )
    assert got == want
    # hand-checked: the sessions end in the batch whose watermark passes them
    assert [r for r in want[3] if r[1] == "end"] == [
        ("a", "end", 3, 25000, 25000),
        ("c", "end", 1, 16000, 25000),
    ]
    assert want[4] == [("b", "end", 2, 35000, 35000)]
    wms = [b.extra.get("watermark_ms") for b in res.batches]
    assert wms == [0, 7000, 15000, 25000, 35000]
    assert sum(b.extra.get("late_rows", {}).get("SessionEnd", 0) for b in res.batches) == 1


def _logged(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(x)["batch_id"] for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.slow
def test_event_time_after_a_sigkilled_driver_matches_spark(
    spark: Any, reference: tuple[Path, Any], tmp_path: Path
) -> None:
    """The driver dies mid-run; the restart resumes the watermark and timers exactly."""
    from tests.runtime.spark._parity_driver import job

    src, want = reference
    ckpt, out = tmp_path / "ck", tmp_path / "out"
    driver = Path(__file__).with_name("_parity_driver.py")
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
    assert max(_logged(out / "batches.jsonl")) < max(want)  # killed before the end
    job(spark, src, None).run(checkpoint=ckpt, out=out, duration_s=300)
    rows = spark.read.parquet(str(out / "ends")).collect()
    got: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        got.setdefault(int(r["batch_id"]), []).append(tuple(r[c] for c in COLS))
    assert {b: sorted(v) for b, v in got.items()} == want


class RowSessionEnd(SessionEnd):
    """SessionEnd on the Row API (``transformWithState``): Rows in, Rows out."""

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Any:
        from pyspark.sql import Row

        got = list(rows)
        frame = pd.DataFrame({"ts": [r["ts"] for r in got]})
        for out in super().handleInputRows(key, iter([frame]), timerValues):
            yield Row(**{c: _py(out[c].iloc[0]) for c in COLS})

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        from pyspark.sql import Row

        for out in super().handleExpiredTimer(key, timerValues, expiredTimerInfo):
            yield Row(**{c: _py(out[c].iloc[0]) for c in COLS})


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


@pytest.mark.spark
def test_row_api_event_time_batch_for_batch(
    spark: Any, reference: tuple[Path, Any], tmp_path: Path
) -> None:
    src, pandas_want = reference
    want = run_spark(
        spark,
        source(spark, src),
        lambda df: df.groupBy("k").transformWithState(RowSessionEnd(), OUT, "append", "EventTime"),
        COLS,
        tmp_path / "spark",
    )
    assert want == pandas_want
    got, _ = run_streamscale(
        source(spark, src), RowSessionEnd(), COLS, tmp_path / "ss", time_mode="EventTime", api="row"
    )
    assert got == want


def test_what_differs_from_spark_is_refused_before_the_query_starts() -> None:
    from streamscale.errors import StreamscaleError
    from streamscale.runtime.spark.processor import from_processor

    with pytest.raises(StreamscaleError, match="initialState"):
        from_processor(SessionEnd(), "k", initialState=object())
    with pytest.raises(StreamscaleError, match="output mode"):
        from_processor(SessionEnd(), "k", output_mode="complete")
    with pytest.raises(StreamscaleError, match="api"):
        from_processor(SessionEnd(), "k", api="arrow")
    assert from_processor(SessionEnd(), "k", output_mode="update").time_mode == "ProcessingTime"


def test_group_state_timeouts_are_refused_by_name() -> None:
    from streamscale.errors import StreamscaleError
    from streamscale.runtime.spark.native import from_group_state

    def fn(key: Any, frames: Any, state: Any) -> Any:
        return iter(())

    for conf in ("EventTimeTimeout", "ProcessingTimeTimeout"):
        with pytest.raises(StreamscaleError, match=f"GroupStateTimeout.{conf}"):
            from_group_state(fn, "k", conf)
    assert callable(from_group_state(fn, "k", "NoTimeout"))
