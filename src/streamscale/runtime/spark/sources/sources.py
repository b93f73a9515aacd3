"""The workload generator: a deterministic, rate-paced PySpark streaming source.

Paper 000 (Elasticutor), §6.1 ("micro-benchmark"): a generator feeds a keyed
calculator; keys are Zipf-distributed over a key space with skew α, the key
frequencies are shuffled by a random permutation ω times per minute, each tuple
carries a CPU cost drawn from N(μ, 0.5μ) and a fixed-size payload.

Every tuple is a pure function of ``(options, seq)``: tuples are generated in
blocks of :data:`BLOCK` rows, each from its own numpy generator seeded with
``(seed, block)``, so any offset range is cheap to produce and a restarted query
re-reads exactly the same tuples. Only the event timestamps depend on the start
time ``t0`` of the stream, which travels inside every offset (``{"seq", "t0"}``)
and therefore in Spark's offset log. The reader's clock (wall time by default) is
read only in :meth:`GeneratorStreamReader.latestOffset`, to pace the stream.

Options (strings, as Spark passes them): ``keys`` (10000), ``alpha`` (0.5),
``omega`` (shuffles per minute of event time, 0), ``cost_ms`` (mean per-tuple
cost, 1.0), ``payload_bytes`` (128), ``rate`` (tuples/s, 1000), ``schedule``
(``"t:rate,t:rate"``, seconds from the start; the rate holds until the next
point), ``seed`` (0), ``partitions`` (2), ``total`` (stop after this many
tuples), ``max_rows_per_batch`` (admission limit per micro-batch),
``admission_file`` (a file holding a live admission limit: the driver rewrites it as the
cores alive change, the reader reads it at each batch's start; absent or empty: no
limit) and ``start_time`` (epoch seconds used as ``t0`` instead of the clock).

Offered load from a real trace (:mod:`~streamscale.runtime.spark.sources.rate_trace`):
``trace`` (a ``timestamp,value`` CSV) replaces ``rate`` and ``schedule``; its window
``trace_window`` (``"START,HOURS"``, default the first 24 h) is replayed in
``trace_minutes`` (10) with the window's 99th percentile at ``peak_rate`` tuples/s
(required with ``trace``), after ``trace_delay_s`` (0) seconds at its first rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
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
from streamscale.runtime.spark.sources.source_registry import (
    SourceEntry,
    check_options,
    register_all,
    register_source,
)

__all__ = [
    "BLOCK",
    "GENERATOR_SCHEMA",
    "GeneratorSource",
    "GeneratorSpec",
    "GeneratorStreamReader",
    "SeqRange",
    "SeqStreamReader",
    "expected_cost_ms",
    "generate",
    "register",
    "register_sources",
]

#: Rows per deterministic generation block.
BLOCK = 4096

GENERATOR_SCHEMA = StructType(
    [
        StructField("key", StringType(), True),
        StructField("value", DoubleType(), True),
        StructField("cost_ms", DoubleType(), True),
        StructField("payload", StringType(), True),
        StructField("event_time", TimestampType(), True),
        StructField("seq", LongType(), True),
    ]
)

_ALPHABET = np.frombuffer(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8
)
# Distinct SeedSequence streams: tuple blocks and key-frequency permutations.
_STREAM_BLOCK, _STREAM_PERM = 0, 1


def expected_cost_ms(mean_ms: float) -> float:
    """Mean of the per-tuple cost ``max(0, X)``, ``X ~ N(μ, (0.5μ)²)`` (≈ 1.0043 μ).

    The physical limit of a run is ``cores / expected_cost_ms(μ)``.
    """
    if mean_ms <= 0:
        return 0.0
    from scipy.stats import norm

    mu, sigma = mean_ms, 0.5 * mean_ms
    z = mu / sigma
    return float(mu * norm.cdf(z) + sigma * norm.pdf(z))


def _parse_schedule(text: str) -> tuple[tuple[float, float], ...]:
    points: list[tuple[float, float]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        t, sep, r = part.partition(":")
        if not sep:
            raise ValueError(part)
        points.append((float(t), float(r)))
    return tuple(sorted(points))


@dataclass(frozen=True)
class GeneratorSpec:
    """The generator's parameters, parsed and validated from Spark's string options."""

    keys: int = 10000
    alpha: float = 0.5
    omega: float = 0.0
    cost_ms: float = 1.0
    payload_bytes: int = 128
    rate: float = 1000.0
    schedule: tuple[tuple[float, float], ...] = ()
    seed: int = 0
    partitions: int = READER_SETTINGS["partitions"].default
    total: int | None = None
    max_rows_per_batch: int | None = READER_SETTINGS["max_rows_per_batch"].default
    start_time: float | None = READER_SETTINGS["start_time"].default
    admission_file: str | None = READER_SETTINGS["admission_file"].default
    trace: str | None = None
    trace_window: str | None = None
    trace_minutes: float = 10.0
    peak_rate: float | None = None
    trace_delay_s: float = 0.0
    # Rate segments: start times, rates and cumulative counts at each start.
    _seg_t: np.ndarray = field(init=False, repr=False, compare=False)
    _seg_r: np.ndarray = field(init=False, repr=False, compare=False)
    _seg_c: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks = [
            ("keys", self.keys >= 1),
            ("alpha", self.alpha >= 0 and math.isfinite(self.alpha)),
            ("omega", self.omega >= 0 and math.isfinite(self.omega)),
            ("cost_ms", self.cost_ms >= 0 and math.isfinite(self.cost_ms)),
            ("payload_bytes", self.payload_bytes >= 0),
            ("rate", self.rate >= 0 and math.isfinite(self.rate)),
            ("seed", self.seed >= 0),
            ("partitions", self.partitions >= 1),
            ("total", self.total is None or self.total >= 0),
            ("max_rows_per_batch", self.max_rows_per_batch is None or self.max_rows_per_batch > 0),
        ]
        for name, ok in checks:
            if not ok:
                raise StreamscaleError(
                    f"invalid value {getattr(self, name)!r}", item=f"option '{name}'"
                )
        if self.trace is not None:
            object.__setattr__(self, "schedule", self._trace_schedule())
        for t, r in self.schedule:
            if t < 0 or r < 0 or not (math.isfinite(t) and math.isfinite(r)):
                raise StreamscaleError(f"invalid point {t}:{r}", item="option 'schedule'")
        if len({t for t, _ in self.schedule}) != len(self.schedule):
            raise StreamscaleError("duplicate time", item="option 'schedule'")
        pts = dict(self.schedule)
        pts.setdefault(0.0, self.rate)
        ts = np.array(sorted(pts), dtype=float)
        rs = np.array([pts[t] for t in ts], dtype=float)
        cs = np.concatenate([[0.0], np.cumsum(np.diff(ts) * rs[:-1])])
        object.__setattr__(self, "_seg_t", ts)
        object.__setattr__(self, "_seg_r", rs)
        object.__setattr__(self, "_seg_c", cs)

    def _trace_schedule(self) -> tuple[tuple[float, float], ...]:
        from streamscale.runtime.spark.sources.rate_trace import read_rate_trace

        if self.peak_rate is None:
            raise StreamscaleError("required with option 'trace'", item="option 'peak_rate'")
        if self.schedule:
            raise StreamscaleError("give 'trace' or 'schedule', not both", item="option 'trace'")
        if not (self.trace_delay_s >= 0 and math.isfinite(self.trace_delay_s)):
            raise StreamscaleError(
                f"invalid value {self.trace_delay_s!r}", item="option 'trace_delay_s'"
            )
        trace = read_rate_trace(
            self.trace,
            window=self.trace_window,
            minutes=self.trace_minutes,
            peak_rate=self.peak_rate,
        )
        return trace.schedule(delay_s=self.trace_delay_s)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> GeneratorSpec:
        """Parse Spark's string options; raise :class:`StreamscaleError` naming a bad option."""
        d = cls()
        return cls(
            keys=_opt(options, "keys", int, d.keys),
            alpha=_opt(options, "alpha", float, d.alpha),
            omega=_opt(options, "omega", float, d.omega),
            cost_ms=_opt(options, "cost_ms", float, d.cost_ms),
            payload_bytes=_opt(options, "payload_bytes", int, d.payload_bytes),
            rate=_opt(options, "rate", float, d.rate),
            schedule=_opt(options, "schedule", _parse_schedule, ()),
            seed=_opt(options, "seed", int, d.seed),
            total=_opt(options, "total", int, None),
            **reader_options(options),
            trace=_opt(options, "trace", str, None),
            trace_window=_opt(options, "trace_window", str, None),
            trace_minutes=_opt(options, "trace_minutes", float, d.trace_minutes),
            peak_rate=_opt(options, "peak_rate", float, None),
            trace_delay_s=_opt(options, "trace_delay_s", float, d.trace_delay_s),
        )

    def to_options(self) -> dict[str, str]:
        """The string options that :meth:`from_options` parses back to this spec."""
        out = {
            "keys": str(self.keys),
            "alpha": repr(self.alpha),
            "omega": repr(self.omega),
            "cost_ms": repr(self.cost_ms),
            "payload_bytes": str(self.payload_bytes),
            "rate": repr(self.rate),
            "seed": str(self.seed),
            "partitions": str(self.partitions),
        }
        if self.trace is not None:  # the schedule is derived from it
            out.update(
                trace=self.trace,
                trace_minutes=repr(self.trace_minutes),
                trace_delay_s=repr(self.trace_delay_s),
                peak_rate=repr(self.peak_rate),
            )
            if self.trace_window is not None:
                out["trace_window"] = self.trace_window
        elif self.schedule:
            out["schedule"] = ",".join(f"{t!r}:{r!r}" for t, r in self.schedule)
        for name in ("total", "max_rows_per_batch", "start_time"):
            v = getattr(self, name)
            if v is not None:
                out[name] = repr(v)
        if self.admission_file is not None:
            out["admission_file"] = self.admission_file
        return out

    def available(self, elapsed_s: float) -> int:
        """Tuples emitted within ``elapsed_s`` seconds of the start (capped by ``total``)."""
        if elapsed_s <= 0:
            return 0
        j = int(np.searchsorted(self._seg_t, elapsed_s, side="right")) - 1
        n = self._seg_c[j] + (elapsed_s - self._seg_t[j]) * self._seg_r[j]
        # A tiny epsilon keeps exact multiples (e.g. 1000/s × 2 s) from losing a tuple.
        count = math.floor(float(n) + 1e-9)
        return count if self.total is None else min(count, self.total)

    def emit_times(self, seqs: np.ndarray) -> np.ndarray:
        """Seconds after the start at which tuples ``seqs`` are emitted (inf if never)."""
        x = np.asarray(seqs, dtype=float) + 1.0
        j = np.searchsorted(self._seg_c, x, side="left") - 1
        r = self._seg_r[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = self._seg_t[j] + (x - self._seg_c[j]) / r
        return np.where(r > 0, t, np.inf)


def check_source_options(fmt: str, options: Mapping[str, Any], *, item: str) -> None:
    """A registered source's options checked before Spark starts
    (:func:`~streamscale.runtime.spark.sources.source_registry.check_options`).

    Unknown names (listing the known ones) and bad values are one-line errors naming the
    option; other formats are Spark's own sources, which check their options themselves.
    """
    check_options(fmt, options, item=item)


@lru_cache(maxsize=16)
def _zipf_cdf(keys: int, alpha: float) -> np.ndarray:
    w = 1.0 / np.power(np.arange(1, keys + 1, dtype=float), alpha)
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


@lru_cache(maxsize=64)
def _permutation(seed: int, keys: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, _STREAM_PERM, epoch]).permutation(keys)


@lru_cache(maxsize=4)
def _key_names(keys: int) -> np.ndarray:
    return np.array([str(i) for i in range(keys)], dtype=object)


def _block(spec: GeneratorSpec, b: int) -> dict[str, np.ndarray]:
    """Rows ``b*BLOCK .. b*BLOCK+BLOCK-1`` without event times (those need ``t0``)."""
    rng = np.random.default_rng([spec.seed, _STREAM_BLOCK, b])
    ranks = np.searchsorted(_zipf_cdf(spec.keys, spec.alpha), rng.random(BLOCK), side="right")
    np.minimum(ranks, spec.keys - 1, out=ranks)
    value = rng.random(BLOCK)
    cost = np.maximum(rng.normal(spec.cost_ms, 0.5 * spec.cost_ms, BLOCK), 0.0)
    chars = _ALPHABET[rng.integers(0, len(_ALPHABET), BLOCK + spec.payload_bytes)]
    buf = chars.tobytes().decode("ascii")
    n = spec.payload_bytes
    payload = np.array([buf[i : i + n] for i in range(BLOCK)], dtype=object)
    seq = np.arange(b * BLOCK, (b + 1) * BLOCK, dtype=np.int64)
    rel = spec.emit_times(seq)
    if spec.omega > 0:
        epochs = np.floor(np.where(np.isfinite(rel), rel, 0.0) * spec.omega / 60.0).astype(int)
    else:
        epochs = np.zeros(BLOCK, dtype=int)
    key_ids = np.empty(BLOCK, dtype=np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        key_ids[sel] = _permutation(spec.seed, spec.keys, int(e))[ranks[sel]]
    return {
        "key": _key_names(spec.keys)[key_ids],
        "value": value,
        "cost_ms": cost,
        "payload": payload,
        "rel": rel,
        "seq": seq,
    }


def _rows(spec: GeneratorSpec, start: int, end: int, t0: float) -> pd.DataFrame:
    parts: list[pd.DataFrame] = []
    for b in range(start // BLOCK, (end - 1) // BLOCK + 1 if end > start else start // BLOCK):
        cols = _block(spec, b)
        lo, hi = max(start - b * BLOCK, 0), min(end - b * BLOCK, BLOCK)
        parts.append(pd.DataFrame({k: v[lo:hi] for k, v in cols.items()}))
    if parts:
        df = pd.concat(parts, ignore_index=True)
    else:
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in _EMPTY_DTYPES.items()})
    micros = np.round((t0 + df.pop("rel").to_numpy(dtype=float)) * 1e6)
    micros = np.where(np.isfinite(micros), micros, np.iinfo(np.int64).max // 2)
    df.insert(4, "event_time", pd.to_datetime(micros.astype(np.int64), unit="us", utc=True))
    return df


_EMPTY_DTYPES = {
    "key": object,
    "value": float,
    "cost_ms": float,
    "payload": object,
    "rel": float,
    "seq": np.int64,
}


def _seq_and_t0(offset: int | Mapping[str, Any]) -> tuple[int, float | None]:
    if isinstance(offset, Mapping):
        return int(offset["seq"]), (float(offset["t0"]) if "t0" in offset else None)
    return int(offset), None


def generate(
    options: Mapping[str, Any] | GeneratorSpec,
    start: int | Mapping[str, Any],
    end: int | Mapping[str, Any],
) -> pd.DataFrame:
    """The generator's tuples ``start <= seq < end``, exactly as the Spark source reads them.

    Parameters
    ----------
    options
        The source's string options (or a parsed :class:`GeneratorSpec`).
    start, end
        Sequence numbers, or the source's offsets ``{"seq": n, "t0": epoch_s}``.
        ``t0`` (the stream's start) only shifts ``event_time``; it comes from the
        offsets, else the ``start_time`` option, else 0.

    Returns
    -------
    pandas.DataFrame
        Columns ``key, value, cost_ms, payload, event_time (UTC), seq`` in ``seq`` order.
    """
    spec = options if isinstance(options, GeneratorSpec) else GeneratorSpec.from_options(options)
    a, t0a = _seq_and_t0(start)
    b, t0b = _seq_and_t0(end)
    if a < 0 or b < a:
        raise StreamscaleError(f"bad offset range [{a}, {b})", item="generator")
    t0 = t0a if t0a is not None else t0b
    if t0 is None:
        t0 = spec.start_time if spec.start_time is not None else 0.0
    return _rows(spec, a, b, t0)


class GeneratorStreamReader(SeqStreamReader):
    """Rate-paced generator reader."""

    spec: GeneratorSpec

    def available(self, elapsed_s: float) -> int:
        return self.spec.available(elapsed_s)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyspark.sql.pandas.types import to_arrow_schema

        p: SeqRange = partition  # type: ignore[assignment]
        schema = to_arrow_schema(GENERATOR_SCHEMA, timezone="UTC")
        # Block-aligned chunks keep each Arrow batch small and each block generated once.
        lo = p.start
        while lo < p.end:
            hi = min((lo // BLOCK + 1) * BLOCK, p.end)
            df = _rows(self.spec, lo, hi, p.t0)
            yield pa.RecordBatch.from_pandas(df, schema=schema, preserve_index=False)
            lo = hi


class GeneratorSource(DataSource):
    """``spark.readStream.format("streamscale_generator")``: the workload generator."""

    @classmethod
    def name(cls) -> str:
        return "streamscale_generator"

    def schema(self) -> StructType:
        return GENERATOR_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GeneratorStreamReader(GeneratorSpec.from_options(self.options))


def register_sources(spark: Any) -> None:
    """Register every registered source's ``DataSource`` (the bundled generator, trace
    replay and Nexmark, and any other module's) with ``spark``."""
    register_all(spark)


#: The name the runner looks up to register a job's sources.
register = register_sources

register_source(
    SourceEntry(
        "streamscale_generator",
        datasource=lambda: GeneratorSource,
        spec=lambda: GeneratorSpec,
        available=lambda options: GeneratorSpec.from_options(options).available,
    )
)
