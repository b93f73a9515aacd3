"""What Spark itself recorded of a run: query progress and executor lifetimes.

Every policy of a comparison is scored from these records, never from figures a policy
reports about itself: :class:`ProgressLog` listens to Spark's streaming query progress
(every query of the session, restarts included), :func:`executor_spans` reads Spark's
own executor list (added and removed times), so a streamscale run and a Spark-native
query are measured by the same instrument.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from streamscale.scenarios.scoring import BatchSpan, ExecutorSpan

__all__ = ["Progress", "ProgressLog", "executor_spans"]


@dataclass(frozen=True, slots=True)
class Progress:
    """One batch of one query, as Spark's ``StreamingQueryProgress`` reports it."""

    query_id: str
    run_id: str
    batch_id: int
    start_s: float  # epoch seconds the trigger started
    trigger_ms: int  # durationMs.triggerExecution: planning, the batch, the sink, the commit
    rows: int
    start_offset: Any
    end_offset: Any

    @property
    def end_s(self) -> float:
        return self.start_s + self.trigger_ms / 1000.0


def _offset(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class ProgressLog(StreamingQueryListener):
    """Collects every progress event of the session's queries (attach with :meth:`attach`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Progress] = []
        self._spark: Any = None

    def attach(self, spark: Any) -> ProgressLog:
        spark.streams.addListener(self)
        self._spark = spark
        return self

    def detach(self) -> None:
        if self._spark is not None:
            self._spark.streams.removeListener(self)
            self._spark = None

    def onQueryStarted(self, event: Any) -> None:
        return None

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        return None

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        src = p.sources[0] if p.sources else None
        rec = Progress(
            query_id=str(p.id),
            run_id=str(p.runId),
            batch_id=int(p.batchId),
            start_s=_epoch(p.timestamp),
            trigger_ms=int(p.durationMs.get("triggerExecution", 0)),
            rows=int(p.numInputRows),
            start_offset=None if src is None else _offset(src.startOffset),
            end_offset=None if src is None else _offset(src.endOffset),
        )
        with self._lock:
            self.events.append(rec)

    def settle(self, *, quiet_s: float = 1.0, timeout_s: float = 10.0) -> list[Progress]:
        """The events, once none has arrived for ``quiet_s`` (Spark delivers them
        asynchronously after a batch ends)."""
        end = time.monotonic() + timeout_s
        seen = -1
        while time.monotonic() < end:
            with self._lock:
                n = len(self.events)
            if n == seen:
                break
            seen = n
            time.sleep(quiet_s)
        with self._lock:
            return list(self.events)

    def t0(self) -> float | None:
        """The sequence source's start (epoch seconds), from the first offset carrying it."""
        with self._lock:
            events = list(self.events)
        for p in events:
            for off in (p.start_offset, p.end_offset):
                if isinstance(off, dict) and "t0" in off:
                    return float(off["t0"])
        return None

    def seq_spans(self) -> list[BatchSpan]:
        """Batches of a sequence-numbered source (offsets ``{"seq", …}``) that took rows."""
        out = []
        for p in self.settle():
            a, b = p.start_offset, p.end_offset
            if a is None and isinstance(b, dict):  # the query's first batch starts at 0
                a = {"seq": 0}
            ok = isinstance(a, dict) and isinstance(b, dict) and "seq" in a and "seq" in b
            if ok and int(b["seq"]) > int(a["seq"]):
                out.append(BatchSpan(p.batch_id, p.end_s, int(a["seq"]), int(b["seq"])))
        return out


def executor_spans(sc: Any) -> list[ExecutorSpan]:
    """Every executor the application has had (the driver excluded), from Spark's status
    store: cores, added and (for a removed one) removed times in epoch seconds."""
    store = sc._jsc.sc().statusStore()
    seq = store.executorList(False)
    out = []
    for i in range(seq.size()):
        e = seq.apply(i)
        ex_id = str(e.id())
        if ex_id == "driver":
            continue
        removed = e.removeTime()
        out.append(
            ExecutorSpan(
                executor=ex_id,
                cores=int(e.totalCores()),
                added_s=e.addTime().getTime() / 1000.0,
                removed_s=removed.get().getTime() / 1000.0 if removed.isDefined() else None,
            )
        )
    return out
