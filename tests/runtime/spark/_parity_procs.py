"""Processors and applyInPandasWithState functions of the parity suite, written for Spark.

One processor exercises many APIs at once, by key prefix, so one query per engine
covers them: every key runs a session (a count, an event-time timer 5 s after its
latest event that emits the session); ``v`` keys a value state cleared at 3, ``l``
keys a list state (``appendList``, ``put``), ``m`` keys a map state (``removeKey``),
and ``i`` keys (and ``v1``) start from the initial state. TTL, which Spark allows in
processing time only, is :class:`Ticker`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor

OUT = "k string, kind string, n long, at long, wm long, s string"
COLS = ("k", "kind", "n", "at", "wm", "s")
HOUR = 3_600_000

# (key, event second, value) per batch; c@6 in batch 2 is behind batch 1's watermark (7 s)
BATCHES = [
    [
        ("a", 10, 1),
        ("b", 12, 1),
        ("v1", 10, 1),
        ("l1", 10, 1),
        ("m1", 10, 1),
        ("x1", 10, 1),
        ("h1", 10, 1),
        ("q1", 12, 1),
    ],
    [("a", 20, 1), ("c", 11, 1), ("v1", 11, 2), ("l1", 11, 2), ("m1", 11, 1), ("x1", 11, 2)],
    [("b", 30, 1), ("a", 14, 1), ("c", 6, 1), ("l1", 29, 3), ("m1", 29, 2), ("x1", 29, 3)],
    [("d", 40, 1), ("i1", 40, 5), ("l1", 40, 4), ("m1", 40, 1)],
]
# (key, n, at ms): the initial state; i9 only there
INITIAL = [("v1", 1, 0), ("i1", 4, 12000), ("i9", 7, 15000)]


def _row(k: Any, kind: str, n: int, at: int, wm: int, s: str = "") -> pd.DataFrame:
    return pd.DataFrame({"k": [k], "kind": [kind], "n": [n], "at": [at], "wm": [wm], "s": [s]})


class Kitchen(StatefulProcessor):
    """Sessions on event time for every key, and one state API per key prefix."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.n = handle.getValueState("n", "n long")
        self.last = handle.getValueState("last", "t long")
        self.cnt = handle.getValueState("cnt", "c long")
        self.vals = handle.getListState("vals", "v long")
        self.seen = handle.getMapState("seen", "u long", "c long")

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
        k = key[0]
        for r in initialState.itertuples(index=False):
            if k.startswith("v"):
                self.cnt.update((int(r.n),))
            else:
                self.n.update((int(r.n),))
                self.last.update((int(r.at),))
                self.handle.registerTimer(int(r.at) + 5000)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Any:
        k = key[0]
        pdf = pd.concat(list(rows), ignore_index=True)
        vs = [int(v) for v in pdf["v"]]
        wm = timerValues.getCurrentWatermarkInMs()
        n = (self.n.get()[0] if self.n.exists() else 0) + len(pdf)
        last = max(self.last.get()[0] if self.last.exists() else -1, int(pdf["ts"].max()) * 1000)
        for t in self.handle.listTimers():
            self.handle.deleteTimer(t)
        self.handle.registerTimer(last + 5000)
        self.n.update((n,))
        self.last.update((last,))
        yield _row(k, "in", n, last, wm)
        if k.startswith("v"):
            c = (self.cnt.get()[0] if self.cnt.exists() else 0) + sum(vs)
            if c >= 3:
                self.cnt.clear()
            else:
                self.cnt.update((c,))
            yield _row(k, "value", c, 0, wm, str(self.cnt.exists()))
        elif k.startswith("l"):
            if self.vals.exists():
                self.vals.appendList([(v,) for v in vs])
            else:
                self.vals.put([(v,) for v in vs])
            got = [r[0] for r in self.vals.get()]
            if len(got) >= 4:
                self.vals.put([(v,) for v in got[-2:]])
            yield _row(k, "list", len(got), 0, wm, ",".join(map(str, got)))
        elif k.startswith("m"):
            for v in vs:
                c = (self.seen.getValue((v,))[0] if self.seen.containsKey((v,)) else 0) + 1
                if c >= 2:
                    self.seen.removeKey((v,))
                else:
                    self.seen.updateValue((v,), (c,))
            items = sorted((u[0], c[0]) for u, c in self.seen.iterator())
            yield _row(k, "map", len(items), 0, wm, str(items))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        n = self.n.get()[0]
        self.n.clear()
        self.last.clear()
        yield _row(
            key[0],
            "end",
            n,
            expiredTimerInfo.getExpiryTimeInMs(),
            timerValues.getCurrentWatermarkInMs(),
        )

    def close(self) -> None:
        pass


class Ticker(StatefulProcessor):
    """Processing time: a timer 1 ms ahead (due next batch) per input, an hour ahead for
    ``h`` keys (never due here); ``x`` keys: value, list and map state with a 1 ms TTL
    (gone by the next batch) beside a list with a one-hour TTL. Emits counts, never
    processing times (no two runs share them). Spark allows TTL in this mode only."""

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.n = handle.getValueState("n", "n long")
        self.tv = handle.getValueState("tv", "c long", 1)
        self.tl = handle.getListState("tl", "v long", 1)
        self.tl_long = handle.getListState("tl_long", "v long", HOUR)
        self.tm = handle.getMapState("tm", "u long", "c long", 1)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Any:
        k = key[0]
        pdf = pd.concat(list(rows), ignore_index=True)
        vs = [int(v) for v in pdf["v"]]
        n = (self.n.get()[0] if self.n.exists() else 0) + len(pdf)
        self.n.update((n,))
        now = timerValues.getCurrentProcessingTimeInMs()
        self.handle.registerTimer(now + (HOUR if k.startswith("h") else 1))
        yield _row(k, "in", n, len(list(self.handle.listTimers())), -1)
        if k.startswith("x"):
            before = (
                self.tv.get()[0] if self.tv.exists() else -1,
                len(list(self.tl.get())),
                len(list(self.tl_long.get())),
                sorted(u[0] for u in self.tm.keys()),  # noqa: SIM118 (no __iter__)
            )
            self.tv.update((sum(vs),))
            self.tl.appendList([(v,) for v in vs])
            self.tl_long.appendList([(v,) for v in vs])
            for v in vs:
                self.tm.updateValue((v,), (1,))
            after = (len(list(self.tl.get())), len(list(self.tl_long.get())))
            yield _row(k, "ttl", len(vs), 0, -1, f"{before}{after}")

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        yield _row(key[0], "fire", self.n.get()[0], len(list(self.handle.listTimers())), -1)

    def close(self) -> None:
        pass


GS_OUT = "k string, kind string, n long, at long, wm long, s string"
GS_STATE = "n long, last long"


def gs_event(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """EventTimeTimeout: a session per key; ``q`` keys leave the state alone when timed out."""
    k = key[0]
    wm = state.getCurrentWatermarkMs()
    if state.hasTimedOut:
        cols = ",".join(next(iter(frames)).columns)
        n, last = state.get if state.exists else (-1, -1)
        if not k.startswith("q"):
            state.remove()
        yield _row(k, "timeout", n, last, wm, cols)
        return
    pdf = pd.concat(list(frames), ignore_index=True)
    n, last = state.get if state.exists else (0, -1)
    n, last = n + len(pdf), max(last, int(pdf["ts"].max()) * 1000)
    state.update((n, last))
    state.setTimeoutTimestamp(last + 5000)
    yield _row(k, "in", n, last, wm)


def gs_processing(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """ProcessingTimeTimeout: 1 ms (times out next batch), an hour for ``h`` keys."""
    k = key[0]
    if state.hasTimedOut:
        n = state.get[0] if state.exists else -1
        state.remove()
        yield _row(k, "timeout", n, 0, -1)
        return
    n = (state.get[0] if state.exists else 0) + sum(len(f) for f in frames)
    state.update((n, 0))
    state.setTimeoutDuration(HOUR if k.startswith("h") else 1)
    yield _row(k, "in", n, 0, -1)


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


class RowKitchen(Kitchen):
    """Kitchen on the Row API (``transformWithState``): Rows in (initial state too), Rows out."""

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
        super().handleInitialState(key, pd.DataFrame([initialState.asDict()]), timerValues)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Any:
        frame = pd.DataFrame([r.asDict() for r in rows])
        yield from _as_rows(super().handleInputRows(key, iter([frame]), timerValues))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        yield from _as_rows(super().handleExpiredTimer(key, timerValues, expiredTimerInfo))


def _as_rows(frames: Any) -> Iterator[Any]:
    from pyspark.sql import Row

    for out in frames:
        yield Row(**{c: _py(out[c].iloc[0]) for c in COLS})
