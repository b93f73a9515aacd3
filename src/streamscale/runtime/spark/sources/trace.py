"""Trace replay: a PySpark streaming source that replays recorded tuples in time order.

A trace is one file or a directory/glob of CSV, JSON-lines or Parquet files with a
timestamp column. Rows are replayed in timestamp order (stable, files in name
order); row ``i`` becomes available ``(ts_i - ts_0) / speed`` seconds after the
stream's start ``t0`` and carries that instant as ``event_time`` and ``i`` as
``seq``, so latency is measured against the replayed arrival. Offsets are
``{"seq": rows, "t0": start}``, as for the generator: a restarted query re-reads
exactly the same rows.

Options: ``path`` (required), ``format`` (``csv``/``jsonl``/``parquet``, else the
file extension), ``time_column`` (``timestamp``), ``time_unit`` for numeric
timestamps (``s``/``ms``/``us``/``ns``, default ``s``), ``speed`` (replay speed
factor, 1.0; ``0`` = everything available at once), ``key_column`` (``key``; cast
to string so keyed operators see the same key type as from the generator),
``partitions`` (2), ``max_rows_per_batch``, ``start_time`` (epoch seconds),
``admission_file`` (a live admission limit, as the generator's).
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.seq_reader import (
    READER_SETTINGS,
    SeqRange,
    SeqStreamReader,
    _opt,
    reader_options,
)
from streamscale.runtime.spark.sources.source_registry import SourceEntry, register_source

__all__ = ["TraceSource", "TraceSpec", "TraceStreamReader", "load_trace", "trace_schema"]

_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class TraceSpec:
    """The trace source's parameters, parsed from Spark's string options."""

    path: str
    format: str | None = None
    time_column: str = "timestamp"
    time_unit: str = "s"
    speed: float = 1.0
    key_column: str = "key"
    partitions: int = READER_SETTINGS["partitions"].default
    max_rows_per_batch: int | None = READER_SETTINGS["max_rows_per_batch"].default
    start_time: float | None = READER_SETTINGS["start_time"].default
    admission_file: str | None = READER_SETTINGS["admission_file"].default

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> TraceSpec:
        """Parse and validate; raise :class:`StreamscaleError` naming a bad option."""

        def get(name: str, conv: Callable[[str], Any], default: Any) -> Any:
            return _opt(options, name, conv, default)

        path = get("path", str, None)
        if path is None:
            raise StreamscaleError("a trace file, directory or glob is required", item="path")
        spec = cls(
            path=path,
            format=get("format", str.lower, None),
            time_column=get("time_column", str, "timestamp"),
            time_unit=get("time_unit", str.lower, "s"),
            speed=get("speed", float, 1.0),
            key_column=get("key_column", str, "key"),
            **reader_options(options),
        )
        if spec.format is not None and spec.format not in set(_FORMATS.values()):
            raise StreamscaleError(f"unknown format {spec.format!r}", item="option 'format'")
        if spec.time_unit not in _UNITS:
            raise StreamscaleError(f"unknown unit {spec.time_unit!r}", item="option 'time_unit'")
        if not (spec.speed >= 0 and math.isfinite(spec.speed)):
            raise StreamscaleError(f"invalid value {spec.speed!r}", item="option 'speed'")
        if spec.partitions < 1:
            raise StreamscaleError("must be >= 1", item="option 'partitions'")
        if spec.max_rows_per_batch is not None and spec.max_rows_per_batch < 1:
            raise StreamscaleError("must be >= 1", item="option 'max_rows_per_batch'")
        return spec

    def files(self) -> list[str]:
        """The trace's files, in name order."""
        if os.path.isdir(self.path):
            found = [
                os.path.join(self.path, f)
                for f in os.listdir(self.path)
                if os.path.splitext(f)[1].lower() in _FORMATS and not f.startswith((".", "_"))
            ]
        else:
            found = glob.glob(self.path)
        if not found:
            raise StreamscaleError("no trace files found", item=self.path)
        return sorted(found)


def _read_file(path: str, fmt: str | None) -> pd.DataFrame:
    kind = fmt or _FORMATS.get(os.path.splitext(path)[1].lower())
    try:
        if kind == "csv":
            return pd.read_csv(path)
        if kind == "jsonl":
            return pd.read_json(path, lines=True)
        if kind == "parquet":
            return pd.read_parquet(path)
    except (ValueError, OSError) as exc:
        raise StreamscaleError(f"cannot read: {exc}".splitlines()[0], item=path) from None
    raise StreamscaleError("unknown format; set option 'format'", item=path)


def _seconds(col: pd.Series, unit: str, name: str) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        secs = col.to_numpy(dtype=float) * _UNITS[unit]
    else:
        parsed = pd.to_datetime(col, utc=True, errors="coerce", format="mixed")
        secs = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(secs))
    if bad.size:
        raise StreamscaleError(f"row {int(bad[0])}: unreadable timestamp", item=f"column '{name}'")
    return secs


@lru_cache(maxsize=4)
def _load_cached(spec: TraceSpec, stamp: tuple[tuple[str, float, int], ...]) -> pd.DataFrame:
    frames = [_read_file(f, spec.format) for f, _, _ in stamp]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if spec.time_column not in df.columns:
        raise StreamscaleError("no such column in the trace", item=f"column '{spec.time_column}'")
    for clash in ("event_time", "seq"):
        if clash in df.columns and clash != spec.time_column:
            raise StreamscaleError("reserved for the replay; rename it", item=f"column '{clash}'")
    secs = _seconds(df[spec.time_column], spec.time_unit, spec.time_column)
    order = np.argsort(secs, kind="stable")
    df = df.iloc[order].reset_index(drop=True)
    secs = secs[order]
    if spec.key_column in df.columns:
        df[spec.key_column] = df[spec.key_column].astype(str)
    for c in df.columns:
        if pd.api.types.is_datetime64_any_dtype(df[c]):
            ser = df[c]
            df[c] = (ser.dt.tz_localize("UTC") if ser.dt.tz is None else ser).dt.tz_convert("UTC")
    if spec.time_column == "event_time":
        df = df.drop(columns="event_time")
    df["__rel"] = secs - secs[0] if len(secs) else secs
    return df


def load_trace(spec: TraceSpec) -> pd.DataFrame:
    """The trace's rows in replay order, with ``__rel`` = seconds after the first row."""
    stamp = tuple(
        (f, os.stat(f).st_mtime, os.stat(f).st_size) for f in spec.files() if os.path.isfile(f)
    )
    return _load_cached(spec, stamp)


def _spark_type(s: pd.Series) -> DataType:
    if pd.api.types.is_bool_dtype(s):
        return BooleanType()
    if pd.api.types.is_integer_dtype(s):
        return LongType()
    if pd.api.types.is_float_dtype(s):
        return DoubleType()
    if pd.api.types.is_datetime64_any_dtype(s):
        return TimestampType()
    return StringType()


def trace_schema(spec: TraceSpec) -> StructType:
    """The trace's columns (time column included) plus ``event_time`` and ``seq``."""
    df = load_trace(spec)
    fields = [StructField(c, _spark_type(df[c]), True) for c in df.columns if c != "__rel"]
    fields += [StructField("event_time", TimestampType(), True), StructField("seq", LongType())]
    return StructType(fields)


class TraceStreamReader(SeqStreamReader):
    """Replays rows at ``speed`` × their recorded pace (speed 0: everything at once)."""

    spec: TraceSpec

    def available(self, elapsed_s: float) -> int:
        rel = load_trace(self.spec)["__rel"].to_numpy()
        if self.spec.speed == 0:
            return len(rel)
        return int(np.searchsorted(rel, elapsed_s * self.spec.speed, side="right"))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyspark.sql.pandas.types import to_arrow_schema

        p: SeqRange = partition  # type: ignore[assignment]
        df = replay_rows(self.spec, p.start, p.end, p.t0)
        schema = to_arrow_schema(trace_schema(self.spec), timezone="UTC")
        yield pa.RecordBatch.from_pandas(df, schema=schema, preserve_index=False)


def replay_rows(spec: TraceSpec, start: int, end: int, t0: float) -> pd.DataFrame:
    """Rows ``start <= seq < end`` as the source emits them (pure given the files and ``t0``)."""
    df = load_trace(spec).iloc[start:end].copy()
    rel = df.pop("__rel").to_numpy(dtype=float)
    shift = rel / spec.speed if spec.speed > 0 else np.zeros_like(rel)
    micros = np.round((t0 + shift) * 1e6).astype(np.int64)
    df["event_time"] = pd.to_datetime(micros, unit="us", utc=True)
    df["seq"] = np.arange(start, start + len(df), dtype=np.int64)
    return df.reset_index(drop=True)


class TraceSource(DataSource):
    """``spark.readStream.format("streamscale_trace").option("path", ...)``: trace replay."""

    @classmethod
    def name(cls) -> str:
        return "streamscale_trace"

    def schema(self) -> StructType:
        return trace_schema(TraceSpec.from_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TraceStreamReader(TraceSpec.from_options(self.options))


register_source(
    SourceEntry(
        "streamscale_trace",
        datasource=lambda: TraceSource,
        spec=lambda: TraceSpec,
        available=lambda options: TraceStreamReader(TraceSpec.from_options(options)).available,
    )
)
