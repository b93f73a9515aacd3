"""Windowed and session aggregations and deduplication against Spark SQL's own streaming
operators with the same watermark, batch for batch (see test_agg.py for the harness)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.runtime.spark.api import stream
from tests.runtime.spark.keyed.test_agg import _rows, _run

# --- event-time windows -------------------------------------------------------------------

WSCHEMA = "k string, t timestamp, i long, x double"


def _write_timed(directory: Path, batches: int = 5, rows: int = 120, seed: int = 11) -> None:
    """Batch ``b`` has event times in [20 b, 20 b + 25) s and a few late rows 40 s back."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    for b in range(batches):
        sec = 20 * b + rng.integers(0, 25_000, rows) / 1000.0
        late = rng.random(rows) < 0.08
        sec[late] = np.maximum(sec[late] - 40.0, 0.0)
        pdf = pd.DataFrame(
            {
                "k": [f"k{v}" for v in rng.integers(0, 6, rows)],
                "t": pd.to_datetime(np.round(sec * 1e6).astype("int64"), unit="us"),
                "i": rng.integers(-9, 9, rows).astype("int64"),
                "x": rng.integers(-40, 40, rows) / 4.0,
            }
        )
        pdf.to_parquet(directory / f"batch-{b:05d}.parquet", index=False, coerce_timestamps="us")


def _waggs() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.count("*"), F.sum("i"), F.max("x"), F.avg("x"), F.min("k")]


def _timed(spark: Any, src: Path) -> Any:
    df = spark.readStream.schema(WSCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    return df.withWatermark("t", "10 seconds")


def _nonempty(got: dict[int, Any]) -> dict[int, Any]:
    return {b: v for b, v in got.items() if v[1]}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "slide"), [("append", None), ("update", "5 seconds")])
def test_windows_equal_spark_sql_with_the_same_watermark(spark, tmp_path, mode, slide) -> None:
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    _write_timed(src)
    want: dict[int, Any] = {}

    def collect_sql(df: Any, batch_id: int) -> None:
        want[batch_id] = (df.columns, _rows(df.collect()))

    w = F.window("t", "10 seconds", slide) if slide else F.window("t", "10 seconds")
    q = (
        _timed(spark, src).groupBy(w, "k").agg(*_waggs())
        .writeStream.outputMode(mode).foreachBatch(collect_sql)
        .option("checkpointLocation", str(tmp_path / "ck-sql"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination()
    got: dict[int, Any] = {}

    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, _rows(df.collect()))

    keyed = stream(_timed(spark, src), name="wjob").key_by("k", instances=2, shards=4)
    out = keyed.window("t", "10 seconds", slide).agg(*_waggs(), mode=mode, name="agg")
    res = _run(spark, out.to(collect, name="collect"), tmp_path / "ck")
    assert _nonempty(got) == _nonempty(want)
    assert len(_nonempty(want)) >= 3
    late = sum(b.extra.get("late_rows", {}).get("agg", 0) for b in res.records)
    assert late > 0  # rows of windows closed before their batch were dropped, as by Spark


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["append", "complete"])
def test_session_windows_equal_spark_sql(spark, tmp_path, mode) -> None:
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    _write_timed(src, batches=4, rows=40, seed=13)
    want: dict[int, Any] = {}

    def collect_sql(df: Any, batch_id: int) -> None:
        want[batch_id] = (df.columns, _rows(df.collect()))

    aggs = [F.count("*"), F.sum("i"), F.max("x")]
    q = (
        _timed(spark, src).groupBy(F.session_window("t", "3 seconds"), "k").agg(*aggs)
        .writeStream.outputMode(mode).foreachBatch(collect_sql)
        .option("checkpointLocation", str(tmp_path / "ck-sql"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination()
    got: dict[int, Any] = {}

    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, _rows(df.collect()))

    keyed = stream(_timed(spark, src), name="sjob").key_by("k", instances=2, shards=4)
    out = keyed.window("t", session_gap="3 seconds").agg(*aggs, mode=mode, name="agg")
    _run(spark, out.to(collect, name="collect"), tmp_path / "ck")
    assert _nonempty(got) == _nonempty(want)
    assert len(_nonempty(want)) >= 2


@pytest.mark.spark
def test_drop_duplicates_within_watermark_equals_spark(spark, tmp_path) -> None:
    src = tmp_path / "in"
    rng = np.random.default_rng(5)
    src.mkdir()
    for b in range(4):  # duplicates within and across batches; one time per (batch, key)
        ks = rng.integers(0, 30, 60)
        sec = 20 * b + ks % 25 - 40 * ((rng.random(60) < 0.1) & (b > 0))  # some late rows
        pdf = pd.DataFrame(
            {
                "k": [f"k{v}" for v in ks],
                "t": pd.to_datetime(np.maximum(sec, 0).astype("int64"), unit="s"),
                "i": ks.astype("int64"),
                "x": ks / 4.0,
            }
        )
        pdf = pd.concat([pdf, pdf.head(10)], ignore_index=True)
        pdf.to_parquet(src / f"batch-{b:05d}.parquet", index=False, coerce_timestamps="us")
    want: dict[int, Any] = {}

    def collect_sql(df: Any, batch_id: int) -> None:
        want[batch_id] = (df.columns, sorted(r["k"] for r in df.collect()))

    q = (
        _timed(spark, src).dropDuplicatesWithinWatermark(["k"])
        .writeStream.outputMode("append").foreachBatch(collect_sql)
        .option("checkpointLocation", str(tmp_path / "ck-sql"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination()
    got: dict[int, Any] = {}

    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, sorted(r["k"] for r in df.collect()))

    s = stream(_timed(spark, src), name="djob")
    out = s.dropDuplicates(["k"], instances=2, shards=4, name="dedup")
    _run(spark, out.to(collect, name="collect"), tmp_path / "ck")
    assert _nonempty(got) == _nonempty(want)
    assert sum(len(v[1]) for v in want.values()) > 0


@pytest.mark.spark
def test_window_bounds_as_columns_are_spark_types_or_refused(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    from streamscale.errors import StreamscaleError

    src = tmp_path / "in"
    _write_timed(src, batches=1, rows=10)
    df = _timed(spark, src)
    s = stream(df).key_by("k").window("t", "10 seconds").agg(F.count("*"), bounds=("ws", "we"))
    fn = next(f for n, f in s._b.functions.items() if n == s._from[0])
    want = df.groupBy(F.window("t", "10 seconds"), "k").agg(F.count("*"))
    want = want.select("window.start", "window.end", "k", "count(1)").schema
    got = fn.resolve(df).out_schema
    assert [(f.name, f.dataType) for f in got.fields] == [
        (n, f.dataType) for n, f in zip(("ws", "we", "k", "count(1)"), want.fields, strict=True)
    ]
    w = stream(df).key_by("k").window("t", "10 seconds")
    with pytest.raises(StreamscaleError, match="bounds= takes two distinct column names"):
        w.agg(F.count("*"), bounds=("ws", "ws"))
    with pytest.raises(StreamscaleError, match="bounds column 'k' is also a key"):
        stream(df).key_by("k").window("t", "10 seconds").agg(F.count("*"), bounds=("k", "we"))
