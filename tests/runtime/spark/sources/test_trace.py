"""Trace replay: formats, ordering, pacing by a speed factor, bad input, Spark read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.trace import (
    TraceSpec,
    TraceStreamReader,
    load_trace,
    replay_rows,
    trace_schema,
)


def _trace() -> pd.DataFrame:
    # Deliberately out of order: the source replays in timestamp order.
    return pd.DataFrame(
        {
            "timestamp": [100.0, 101.0, 100.5, 103.0, 102.0],
            "key": [7, 8, 7, 9, 8],
            "value": [1.0, 2.0, 3.0, 4.0, 5.0],
            "tag": ["a", "b", "c", "d", "e"],
        }
    )


def _write(df: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_each_format_replays_in_time_order(tmp_path: Path, suffix: str) -> None:
    path = _write(_trace(), tmp_path / f"t{suffix}")
    spec = TraceSpec.from_options({"path": str(path), "speed": "2"})
    rows = replay_rows(spec, 0, 5, t0=1000.0)
    assert rows["value"].tolist() == [1.0, 3.0, 2.0, 5.0, 4.0]
    assert rows["key"].tolist() == ["7", "7", "8", "8", "9"]
    assert rows["seq"].tolist() == [0, 1, 2, 3, 4]
    # Speed 2: recorded gaps are halved.
    secs = (rows["event_time"] - pd.Timestamp(1000, unit="s", tz="UTC")).dt.total_seconds()
    assert secs.tolist() == pytest.approx([0.0, 0.25, 0.5, 1.0, 1.5])
    names = trace_schema(spec).fieldNames()
    assert names == ["timestamp", "key", "value", "tag", "event_time", "seq"]


def test_directory_of_files_and_datetime_strings(tmp_path: Path) -> None:
    df = _trace()
    df["timestamp"] = pd.to_datetime(df["timestamp"], unit="s").dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    _write(df.iloc[:2], tmp_path / "a.csv")
    _write(df.iloc[2:], tmp_path / "b.csv")
    spec = TraceSpec.from_options({"path": str(tmp_path)})
    got = load_trace(spec)
    assert got["value"].tolist() == [1.0, 3.0, 2.0, 5.0, 4.0]
    assert got["__rel"].tolist() == pytest.approx([0.0, 0.5, 1.0, 2.0, 3.0])


def test_reader_paces_by_speed_and_respects_limits(tmp_path: Path) -> None:
    path = _write(_trace(), tmp_path / "t.parquet")
    now = [50.0]
    spec = TraceSpec.from_options({"path": str(path), "speed": "0.5", "time_unit": "s"})
    reader = TraceStreamReader(spec, clock=lambda: now[0])
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable())["seq"] == 1
    now[0] = 52.0  # 2 s at half speed = 1 s of trace time
    assert reader.latestOffset(start, ReadAllAvailable())["seq"] == 3
    assert reader.latestOffset(start, ReadMaxRows(2))["seq"] == 2
    now[0] = 1e6
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["seq"] == 5
    parts = reader.partitions(start, end)
    got = pd.concat([b.to_pandas() for p in parts for b in reader.read(p)], ignore_index=True)
    assert got["seq"].tolist() == [0, 1, 2, 3, 4]
    assert got["tag"].tolist() == ["a", "c", "b", "e", "d"]


def test_bad_traces_raise_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(StreamscaleError, match="path"):
        TraceSpec.from_options({})
    with pytest.raises(StreamscaleError, match="no trace files"):
        load_trace(TraceSpec.from_options({"path": str(tmp_path / "none*.csv")}))
    df = _trace().rename(columns={"timestamp": "ts"})
    path = _write(df, tmp_path / "x.csv")
    with pytest.raises(StreamscaleError, match="column 'timestamp'"):
        load_trace(TraceSpec.from_options({"path": str(path)}))
    df = _trace().astype({"timestamp": object})
    df.loc[2, "timestamp"] = "not a time"
    path = _write(df, tmp_path / "y.csv")
    with pytest.raises(StreamscaleError, match="row"):
        load_trace(TraceSpec.from_options({"path": str(path)}))
    with pytest.raises(StreamscaleError, match="speed"):
        TraceSpec.from_options({"path": str(path), "speed": "-1"})


@pytest.mark.spark
def test_spark_replays_the_whole_trace(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources.sources import register_sources

    register_sources(spark)
    path = _write(_trace(), tmp_path / "t.jsonl")
    seen: list[pd.DataFrame] = []

    def sink(batch_df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        seen.append(batch_df.toPandas())

    q = (
        spark.readStream.format("streamscale_trace")
        .option("speed", "0")
        .option("max_rows_per_batch", "2")
        .load(str(path))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    got = pd.concat(seen, ignore_index=True).sort_values("seq")
    assert len(seen) == 3
    assert got["tag"].tolist() == ["a", "c", "b", "e", "d"]
    assert got["key"].tolist() == ["7", "7", "8", "8", "9"]
