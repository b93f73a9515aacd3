"""Run one stateful function under Spark's own operator and under streamscale, batch for batch.

Both read the same files (one per batch, ``maxFilesPerTrigger=1``, distinct
modification times so both see them in the same order) with the same
``withWatermark`` and ``trigger(availableNow=True)``; every output row is kept
with the batch that produced it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SCHEMA = "k string, ts long, v long"

Rows = dict[int, list[tuple[Any, ...]]]


def write_batches(root: Path, batches: Sequence[Sequence[tuple[str, int, int]]]) -> Path:
    """One JSON file per batch of ``(key, event second, value)`` rows."""
    src = root / "in"
    src.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        p = src / f"{i:04d}.json"
        p.write_text("".join(json.dumps({"k": k, "ts": t, "v": v}) + "\n" for k, t, v in rows))
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    return src


def source(spark: Any, src: Path, delay: str | None = "5 seconds") -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .withColumn("et", F.timestamp_seconds("ts"))
    )
    return df if delay is None else df.withWatermark("et", delay)


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _collect(got: Rows, cols: Sequence[str]) -> Callable[[Any, int], None]:
    def sink(df: Any, batch_id: int) -> None:
        rows = [tuple(_plain(r[c]) for c in cols) for r in df.collect()]
        if rows:
            got.setdefault(batch_id, []).extend(rows)

    return sink


def run_spark(
    spark: Any, df: Any, grouped: Callable[[Any], Any], cols: Sequence[str], ck: Path
) -> Rows:
    """``grouped(df)`` (a Spark stateful query) on RocksDB, availableNow; rows per batch."""
    got: Rows = {}
    old = spark.conf.get(PROVIDER)
    spark.conf.set(PROVIDER, ROCKSDB)
    try:
        q = (
            grouped(df)
            .writeStream.foreachBatch(_collect(got, cols))
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set(PROVIDER, old)
    q.awaitTermination()
    return {b: sorted(r) for b, r in got.items()}


def run_streamscale(
    df: Any,
    fn: Any,
    cols: Sequence[str],
    ck: Path,
    *,
    executors: int = 2,
    shards: int = 4,
    **params: Any,
) -> tuple[Rows, Any]:
    """``fn`` as a streamscale keyed operator over ``df``, available_now; rows per batch."""
    import streamscale

    got: Rows = {}
    s = streamscale.stream(df, available_now=True)
    s.key_by("k", executors=executors, shards=shards).process(fn, **params).to(_collect(got, cols))
    res = s.run(checkpoint=ck, duration_s=300)
    return {b: sorted(r) for b, r in got.items()}, res
