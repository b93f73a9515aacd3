"""The Nexmark generator as a PySpark streaming source: ``format("streamscale_nexmark")``.

A paced reader over Nexmark's event ids (:class:`~streamscale.runtime.spark.sources.sources.
SeqStreamReader`: offsets ``{"seq", "t0"}``, the clock read only in ``latestOffset``,
``max_rows_per_batch``, ``admission_file``, ``start_time``, ``availableNow``). ``seq``
counts events of every kind; the rows of a table in the offset range ``[a, b)`` are the
events of that kind among event numbers ``a .. b-1``, exactly as
:func:`streamscale.nexmark.generator.generate` makes them (and ``streamscale nexmark
generate`` writes them), so the bid stream of ``[a, b)`` is the bid table of those
events. Every event is a pure function of the seed and its number, so ``partitions()``
cuts the range into several source tasks and a restarted query re-reads the same rows.

Event time (``dateTime``) is the generator's: the base time plus the inter-event delay of
the rate schedule (``GeneratorConfig.timestampForEvent``); the stream is paced on the same
schedule, so event ``n`` is offered once ``now - t0`` reaches its event-time offset.

Options (strings, as Spark passes them):

* ``table``: ``bid`` (default), ``auction``, ``person``, or ``events``: the union stream
  of the Flink suite's ``datagen`` table, flattened: an ``event_type`` column (0 person,
  1 auction, 2 bid, as :mod:`~streamscale.nexmark.streamscale_engine` tags its union
  input) and the three tables' columns by name, null where the event's table has none
  (``id``, ``dateTime`` and ``extra`` are shared), in event order;
* ``seed`` (0), ``rate`` (events/s, 10000) or ``schedule``
  (``duration_s:rate[,duration_s:rate...]``, as ``nexmark generate --schedule``; the last
  rate holds after it; wins over ``rate``), ``total`` (stop after this many events);
* ``partitions`` (source tasks per batch, 2), ``max_rows_per_batch`` (events per batch),
  ``admission_file`` and ``start_time`` as the workload generator's
  (:mod:`streamscale.runtime.spark.sources.sources`);
* ``micros`` (``false``): ``dateTime`` and ``expires`` as BIGINT epoch microseconds
  instead of timestamps (how the keyed functions of
  :mod:`~streamscale.nexmark.streamscale_ops` take times).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamscale.errors import StreamscaleError
from streamscale.nexmark import generator as gen
from streamscale.nexmark.files import SPARK_SCHEMAS
from streamscale.runtime.spark.sources.seq_reader import READER_SETTINGS, reader_options
from streamscale.runtime.spark.sources.source_registry import SourceEntry, register_source
from streamscale.runtime.spark.sources.sources import SeqRange, SeqStreamReader, _opt

__all__ = [
    "EVENT_TYPE",
    "TABLES",
    "NexmarkSource",
    "NexmarkSpec",
    "NexmarkStreamReader",
    "read_range",
    "register",
    "spark_schema",
]

TABLES = ("bid", "auction", "person", "events")
#: ``event_type`` of each table in the ``events`` stream.
EVENT_TYPE = {"person": 0, "auction": 1, "bid": 2}
#: Events generated at once by a source task (bounds a task's memory; one Arrow batch each).
CHUNK = 16_384
_TIMES = ("dateTime", "expires")
_TYPES = {"INT": IntegerType, "BIGINT": LongType, "STRING": StringType, "TIMESTAMP": TimestampType}
_MAKE = {"person": gen._persons, "auction": gen._auctions, "bid": gen._bids}


def _bool(text: str) -> bool:
    low = text.lower()
    if low not in ("true", "false"):
        raise ValueError(text)
    return low == "true"


def _schedule(text: str) -> tuple[tuple[float, float], ...]:
    try:
        return gen.parse_schedule(text)
    except StreamscaleError:
        raise ValueError(text) from None


@dataclass(frozen=True)
class NexmarkSpec:
    """The source's options, parsed and validated from Spark's string options."""

    table: str = "bid"
    seed: int = 0
    rate: float = 10_000.0
    schedule: tuple[tuple[float, float], ...] = ()
    total: int | None = None
    partitions: int = READER_SETTINGS["partitions"].default
    max_rows_per_batch: int | None = READER_SETTINGS["max_rows_per_batch"].default
    admission_file: str | None = READER_SETTINGS["admission_file"].default
    start_time: float | None = READER_SETTINGS["start_time"].default
    micros: bool = False
    # The generator's config and its schedule's steps: start (s), first event, events, rate.
    _config: gen.GeneratorConfig = field(init=False, repr=False, compare=False)
    _steps: tuple[np.ndarray, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        steps_ok = all(
            d > 0 and r > 0 and math.isfinite(d) and math.isfinite(r) for d, r in self.schedule
        )
        checks = [
            ("table", self.table in TABLES),
            ("seed", self.seed >= 0),
            ("rate", self.rate > 0 and math.isfinite(self.rate)),
            ("schedule", steps_ok),
            ("total", self.total is None or self.total >= 0),
            ("partitions", self.partitions >= 1),
            ("max_rows_per_batch", self.max_rows_per_batch is None or self.max_rows_per_batch > 0),
            ("start_time", self.start_time is None or math.isfinite(self.start_time)),
        ]
        for name, ok in checks:
            if not ok:
                hint = f" (one of {', '.join(TABLES)})" if name == "table" else ""
                raise StreamscaleError(
                    f"invalid value {getattr(self, name)!r}{hint}", item=f"option '{name}'"
                )
        cfg = gen.GeneratorConfig(schedule=self.schedule or ((1.0, self.rate),), seed=self.seed)
        d = np.array([s for s, _ in cfg.schedule], dtype=float)
        r = np.array([x for _, x in cfg.schedule], dtype=float)
        counts = np.floor(d * r).astype(np.int64)
        counts[-1] = np.iinfo(np.int64).max // 4  # the last rate holds for ever
        starts = np.concatenate([[0.0], np.cumsum(d)[:-1]])
        firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        object.__setattr__(self, "_config", cfg)
        object.__setattr__(self, "_steps", (starts, firsts, counts, r))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> NexmarkSpec:
        """Parse Spark's string options; raise :class:`StreamscaleError` naming a bad option."""
        d = cls()
        return cls(
            table=_opt(options, "table", str.lower, d.table),
            seed=_opt(options, "seed", int, d.seed),
            rate=_opt(options, "rate", float, d.rate),
            schedule=_opt(options, "schedule", _schedule, ()),
            total=_opt(options, "total", int, None),
            **reader_options(options),
            micros=_opt(options, "micros", _bool, False),
        )

    @property
    def config(self) -> gen.GeneratorConfig:
        """The generator's configuration (seed and rate schedule)."""
        return self._config

    def available(self, elapsed_s: float) -> int:
        """Events whose event-time offset is at most ``elapsed_s`` (capped by ``total``).

        Event ``first + k`` of a step starting at ``start`` with rate ``r`` lies at
        ``start + k / r`` (:func:`~streamscale.nexmark.generator.event_times_ms`).
        """
        if elapsed_s < 0:
            return 0
        starts, firsts, counts, rates = self._steps
        j = int(np.searchsorted(starts, elapsed_s, side="right")) - 1
        # A tiny epsilon keeps exact multiples (e.g. 1000/s × 2 s) from losing an event.
        k = math.floor((elapsed_s - float(starts[j])) * float(rates[j]) + 1e-9) + 1
        n = int(firsts[j]) + min(k, int(counts[j]))
        return n if self.total is None else min(n, self.total)


def _columns(ddl: str) -> list[tuple[str, str]]:
    return [tuple(c.strip().split(" ", 1)) for c in ddl.split(",")]  # type: ignore[misc]


def _fields(table: str, micros: bool) -> list[tuple[str, str]]:
    if table == "events":
        cols: dict[str, str] = {"event_type": "INT"}
        for t in ("person", "auction", "bid"):
            for name, typ in _columns(SPARK_SCHEMAS[t]):
                cols.setdefault(name, typ)
        pairs = list(cols.items())
    else:
        pairs = _columns(SPARK_SCHEMAS[table])
    if micros:
        pairs = [(n, "BIGINT" if t == "TIMESTAMP" else t) for n, t in pairs]
    return pairs


def spark_schema(table: str, *, micros: bool = False) -> StructType:
    """The Spark schema of ``table`` (Nexmark's field names; ``events``: the union)."""
    return StructType([StructField(n, _TYPES[t](), True) for n, t in _fields(table, micros)])


def _arrow_schema(spec: NexmarkSpec) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(spec.table, micros=spec.micros), timezone="UTC")


def _frame(
    spec: NexmarkSpec, table: str, num: np.ndarray, eid: np.ndarray, sel: np.ndarray
) -> pd.DataFrame:
    df: pd.DataFrame = gen._table(_MAKE[table], spec.config, num, eid, sel)
    if spec.micros:
        for c in _TIMES:
            if c in df:
                df[c] = df[c].to_numpy(dtype="datetime64[us]").astype(np.int64)
    return df


def read_range(spec: NexmarkSpec, lo: int, hi: int) -> pa.Table:
    """The source's rows for event numbers ``[lo, hi)``, in event order, with its schema.

    Each table is made by the generator's own per-table function (the code
    :func:`~streamscale.nexmark.generator.generate` runs), so a bid stream does not pay
    for the persons and auctions among its events.
    """
    if lo < 0 or hi < lo:
        raise StreamscaleError("need 0 <= lo <= hi", item=f"[{lo}, {hi})")
    schema = _arrow_schema(spec)
    cfg = spec.config
    num = np.arange(lo, hi, dtype=np.int64)
    eid = cfg.first_event_id + num
    rem = eid % cfg.total_proportion
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    kinds = {"person": rem < pp, "auction": (rem >= pp) & (rem < pp + ap), "bid": rem >= pp + ap}
    if spec.table != "events":
        sel = kinds[spec.table]
        df = _frame(spec, spec.table, num, eid, sel)
        return pa.Table.from_pandas(df, schema=schema, preserve_index=False)
    parts, order = [], []
    for t, sel in kinds.items():
        if not sel.any():
            continue
        df = _frame(spec, t, num, eid, sel)
        cols = []
        for f in schema:
            if f.name == "event_type":
                cols.append(pa.array(np.full(len(df), EVENT_TYPE[t], dtype=np.int32)))
            elif f.name in df:
                cols.append(pa.array(df[f.name], type=f.type, from_pandas=True))
            else:
                cols.append(pa.nulls(len(df), type=f.type))
        parts.append(pa.Table.from_arrays(cols, schema=schema))
        order.append(num[sel])
    if not parts:
        return schema.empty_table()
    both = pa.concat_tables(parts)
    return both.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


class NexmarkStreamReader(SeqStreamReader):
    """Paced Nexmark reader: ``seq`` counts events; a task reads its range in chunks."""

    spec: NexmarkSpec

    def available(self, elapsed_s: float) -> int:
        return self.spec.available(elapsed_s)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        p: SeqRange = partition  # type: ignore[assignment]
        lo = p.start
        while lo < p.end:
            hi = min(lo + CHUNK, p.end)
            yield from read_range(self.spec, lo, hi).combine_chunks().to_batches()
            lo = hi


class NexmarkSource(DataSource):
    """``spark.readStream.format("streamscale_nexmark")``: Nexmark's events by id."""

    @classmethod
    def name(cls) -> str:
        return "streamscale_nexmark"

    def schema(self) -> StructType:
        spec = NexmarkSpec.from_options(self.options)
        return spark_schema(spec.table, micros=spec.micros)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return NexmarkStreamReader(NexmarkSpec.from_options(self.options))


def register(spark: Any) -> None:
    """Register the Nexmark source with ``spark``."""
    spark.dataSource.register(NexmarkSource)


# events offered (``seq`` counts events, not rows)
register_source(
    SourceEntry(
        "streamscale_nexmark",
        datasource=lambda: NexmarkSource,
        spec=lambda: NexmarkSpec,
        available=lambda options: NexmarkStreamReader(NexmarkSpec.from_options(options)).available,
    )
)
