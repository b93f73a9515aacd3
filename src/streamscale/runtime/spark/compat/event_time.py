"""The query's event time as Spark defines it, for streamscale's keyed operators.

A streaming DataFrame given ``withWatermark(col, delay)`` carries a watermark:
after every batch Spark takes the largest event time its watermark node saw,
subtracts the delay, and the query's watermark becomes that value if it is
higher (never lower; ``0`` before any row). Spark records the watermark each
batch runs with, and the batch's processing time, in the query's offset log
(``offsets/<batch>``) *before* the batch runs, and a restarted query replays a
batch with exactly those values. streamscale runs its DAG inside
``foreachBatch`` of that very query, so it reads both from the same log
(:func:`batch_times`): the watermark is Spark's own, global across
partitions, advanced at batch boundaries and checkpointed with the batch.

As in Spark's stateful operators (``TransformWithStateExec``, ``FlatMapGroups
WithStateExec``), a batch has two watermarks: the one to *evict* with (timers,
event-time timeouts, TTL) is the batch's own, and rows at or behind the
*previous* batch's watermark are *late*: dropped by the operator and counted.

Spark runs a batch without new input when a stateful operator asks for it
(``shouldRunAnotherBatch``): an event-time operator when the watermark advanced,
a processing-time one always. A ``foreachBatch`` query has no such operator, so
streamscale unions a *pacer* into the source — a Python data source that yields
no rows, whose offset streamscale advances (:meth:`Pacer.tick`) at the end of a
batch after which Spark would run another. Spark then starts the next batch,
numbered, logged and replayed as any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from streamscale.errors import StreamscaleError

__all__ = [
    "DELAY_KEY",
    "BatchTimes",
    "Pacer",
    "PacerSource",
    "QueryClock",
    "batch_times",
    "late_mask",
    "next_watermark",
    "watermark_of",
]

DELAY_KEY = "spark.watermarkDelayMs"  # Spark's column metadata for withWatermark


def watermark_of(schema: Any) -> tuple[str, int] | None:
    """The watermark column and delay (ms) of a streaming DataFrame's schema, if any.

    Raises
    ------
    StreamscaleError
        More than one column carries a watermark (Spark's multiple-watermark policy
        is not reproduced).
    """
    marked = [
        (f.name, int(f.metadata[DELAY_KEY])) for f in schema.fields if DELAY_KEY in f.metadata
    ]
    if len(marked) > 1:
        raise StreamscaleError(
            "more than one withWatermark column is not supported",
            item=", ".join(n for n, _ in marked),
        )
    return marked[0] if marked else None


@dataclass(frozen=True, slots=True)
class BatchTimes:
    """One batch's clock, from Spark's offset log.

    ``timestamp_ms``: processing time; ``watermark_ms``: the watermark to evict with;
    ``late_ms``: rows with event time at or before it are late (the previous batch's
    watermark, as Spark's stateful operators use).
    """

    batch_id: int
    timestamp_ms: int
    watermark_ms: int
    late_ms: int


def _offset_meta(spark_checkpoint: Path, batch_id: int) -> dict[str, Any] | None:
    path = spark_checkpoint / "offsets" / str(batch_id)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    return json.loads(lines[1]) if len(lines) > 1 else None


def batch_times(spark_checkpoint: Path, batch_id: int) -> BatchTimes:
    """Batch ``batch_id``'s processing time and watermarks, as Spark logged them."""
    meta = _offset_meta(spark_checkpoint, batch_id)
    if meta is None:
        raise StreamscaleError("no offset log entry for the batch", item=f"batch {batch_id}")
    prev = _offset_meta(spark_checkpoint, batch_id - 1) if batch_id > 0 else None
    return BatchTimes(
        batch_id=batch_id,
        timestamp_ms=int(meta.get("batchTimestampMs", 0)),
        watermark_ms=int(meta.get("batchWatermarkMs", 0)),
        late_ms=int(prev.get("batchWatermarkMs", 0)) if prev is not None else 0,
    )


def late_mask(event_time: Any, late_ms: int) -> Any:
    """Which rows are late: event time at or before ``late_ms`` (Spark compares in
    microseconds, ``event_time <= watermark``); a null event time is never late."""
    import numpy as np
    import pandas as pd

    ts = pd.to_datetime(event_time, utc=True)
    us = (ts - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
    return np.asarray((us <= int(late_ms) * 1000).fillna(False), dtype=bool)


def _watermark_nodes(plan: Any) -> Iterator[Any]:
    stack = [plan]
    while stack:
        node = stack.pop()
        if node.getClass().getSimpleName() == "EventTimeWatermarkExec":
            yield node
        kids = node.children()
        stack.extend(kids.apply(i) for i in range(kids.size()))


def next_watermark(spark: Any, current_ms: int) -> int:
    """The watermark Spark will give the next batch, read in the running batch's driver.

    ``spark`` is the session that started the query (``foreachBatch``'s batch has a
    clone, whose query manager does not know the query).

    Spark's rule: each watermark node's largest event time seen this batch minus its
    delay; the watermark becomes the lowest of them when that is higher than now.
    Called inside ``foreachBatch`` after the batch's data was read (the nodes'
    statistics are complete then).
    """
    qid = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
    q = spark.streams.get(qid) if qid else None  # the session that started the query
    if q is None:
        return current_ms
    execution = q._jsq.streamingQuery().lastExecution()
    if execution is None:
        return current_ms
    seen = []
    for node in _watermark_nodes(execution.executedPlan()):
        stats = node.eventTimeStats().value()
        if stats.count() > 0:
            seen.append(int(stats.max()) - int(node.delayMs()))
    return max(current_ms, min(seen)) if seen else current_ms


class _PacerReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, path: str) -> None:
        self.path = path
        self._until: int | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._read()

    def initialOffset(self) -> dict:
        return {"tick": 0}

    def _read(self) -> int:
        try:
            text = Path(self.path).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            text = ""
        return int(text) if text else 0

    def latestOffset(self, start: dict, limit: Any) -> dict:
        del start, limit
        return {"tick": self._read() if self._until is None else self._until}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        del start, end
        return []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        del partition
        return iter(())

    def commit(self, end: dict) -> None:
        """Nothing to release."""


class PacerSource(DataSource):
    """``spark.readStream.format("streamscale_pacer")``: no rows; offsets advanced by ticks."""

    @classmethod
    def name(cls) -> str:
        return "streamscale_pacer"

    def schema(self) -> str:
        return "pace long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        del schema
        return _PacerReader(self.options["path"])


class Pacer:
    """Makes Spark run one more batch: a tick file read by :class:`PacerSource`.

    The tick count lives next to Spark's checkpoint, so a restarted query sees the
    offset it last logged and ticks on from there.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _count(self) -> int:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return 0
        return int(text) if text else 0

    def tick(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(self._count() + 1), encoding="utf-8")
        tmp.replace(self.path)

    def paced(self, spark: Any, df: Any) -> Any:
        """``df`` unioned with the pacer (no rows; the union keeps ``df``'s columns)."""
        from pyspark.sql import functions as F

        spark.dataSource.register(PacerSource)
        pace = spark.readStream.format("streamscale_pacer").option("path", str(self.path)).load()
        cols = [F.lit(None).cast(f.dataType).alias(f.name) for f in df.schema.fields]
        return df.unionByName(pace.select(*cols))


@dataclass(frozen=True, slots=True)
class QueryClock:
    """A DAG run's event time: the source's watermark, who needs it, and the pacer.

    ``modes``: the time modes of the batch-clocked keyed functions (a
    ``transformWithStateInPandas`` processor's ``timeMode``, or the time kind of an
    ``applyInPandasWithState`` timeout).
    """

    spark_checkpoint: Path
    watermark: tuple[str, int] | None
    modes: frozenset[str]
    pacer: Pacer | None

    @classmethod
    def build(
        cls, graph: Any, source_df: Any, checkpoint: Path, *, available_now: bool
    ) -> QueryClock:
        """The clock of ``graph`` over ``source_df``; refuses what would differ from Spark.

        Raises
        ------
        StreamscaleError
            An event-time function on a source without ``withWatermark`` (its timers
            would never fire), or ``available_now`` with a processing-time one (Spark
            runs batches for it as long as the query runs).
        """
        wm = watermark_of(source_df.schema)
        modes: set[str] = set()
        for name in graph.keyed:
            fn = graph.nodes[name].fn
            mode = getattr(fn, "time_mode", None)
            if mode is None or not getattr(fn, "batch_clock", False):
                continue
            modes.add(mode)
            if mode == "EventTime" and wm is None:
                raise StreamscaleError(
                    "event time needs withWatermark(...) on the input DataFrame",
                    item=f"operator {name}",
                )
            if mode == "ProcessingTime" and available_now:
                raise StreamscaleError(
                    "available_now with a processing-time processor or timeout is not "
                    "supported (Spark runs a batch for it at every trigger)",
                    item=f"operator {name}",
                )
        pace = "ProcessingTime" in modes or ("EventTime" in modes and wm is not None)
        pacer = Pacer(Path(checkpoint) / "pacer" / "ticks") if pace else None
        return cls(Path(checkpoint) / "spark", wm, frozenset(modes), pacer)

    def paced(self, spark: Any, df: Any) -> Any:
        return df if self.pacer is None else self.pacer.paced(spark, df)

    def ticks(self) -> int:
        return 0 if self.pacer is None else self.pacer._count()

    def times(self, batch_id: int) -> BatchTimes:
        return batch_times(self.spark_checkpoint, batch_id)

    def keyed_args(self, times: BatchTimes) -> dict[str, Any]:
        """What :func:`~streamscale.runtime.spark.keyed.keyed.run_keyed` takes of the batch's time."""
        if self.watermark is None:
            return {"batch_time_ms": times.timestamp_ms}
        return {
            "batch_time_ms": times.timestamp_ms,
            "watermark_ms": times.watermark_ms,
            "late": (self.watermark[0], times.late_ms),
        }

    def after_batch(self, spark: Any, times: BatchTimes) -> None:
        """Ask Spark for another batch when its own stateful operator would (before the
        batch's ``foreachBatch`` returns, so the next batch is planned with it)."""
        if self.pacer is None:
            return
        if (
            "ProcessingTime" in self.modes
            or next_watermark(spark, times.watermark_ms) > times.watermark_ms
        ):
            self.pacer.tick()

    def record(self, times: BatchTimes) -> dict[str, Any]:
        return {} if self.watermark is None else {"watermark_ms": times.watermark_ms}
