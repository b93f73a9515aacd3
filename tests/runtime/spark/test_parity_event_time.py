"""Event time from the query: watermark, event-time timers and late rows, against Spark."""

from __future__ import annotations

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


@pytest.mark.spark
def test_event_time_timers_and_late_rows_batch_for_batch(spark: Any, tmp_path: Path) -> None:
    src = write_batches(tmp_path, BATCHES)
    want = run_spark(
        spark,
        source(spark, src),
        lambda df: df.groupBy("k").transformWithStateInPandas(
            SessionEnd(), OUT, "append", "EventTime"
        ),
        COLS,
        tmp_path / "spark",
    )
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
