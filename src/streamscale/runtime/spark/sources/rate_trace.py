"""Offered load from a real trace: a CSV of ``timestamp,value`` read as a rate schedule.

A load trace (the Numenta Anomaly Benchmark's format: a header ``timestamp,value``,
``timestamp`` as ``YYYY-MM-DD HH:MM:SS``, ``value`` a count or level per interval)
becomes a piecewise-constant offered rate: each row's value holds from its timestamp
to the next row's. A window of the file (a start timestamp and a number of hours) is
replayed in a stated number of minutes; the window's 99th percentile of values maps to
the peak rate ``R`` tuples/s and values above it clip at ``1.25 R``, so a trace's
outliers cannot ask for more than a quarter over the sizing peak.

The generator takes the result as its ``schedule`` (:func:`trace_schedule`; options
``trace``, ``trace_window``, ``trace_minutes``, ``peak_rate``, ``trace_delay_s`` of
:class:`~streamscale.runtime.spark.sources.sources.GeneratorSpec`). Pure: reads the
file, no Spark.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from streamscale.errors import StreamscaleError

__all__ = [
    "CLIP",
    "DEFAULT_HOURS",
    "RateTrace",
    "TraceWindow",
    "parse_window",
    "read_rate_trace",
    "read_trace_rows",
]

#: values above the window's 99th percentile clip at this multiple of the peak rate
CLIP = 1.25
#: the window replayed when none is named: the file's first 24 hours
DEFAULT_HOURS = 24.0


@dataclass(frozen=True)
class TraceWindow:
    """The part of a trace to replay: ``hours`` from ``start`` (``None``: the first row)."""

    start: datetime | None = None
    hours: float = DEFAULT_HOURS

    def __str__(self) -> str:
        head = "" if self.start is None else self.start.isoformat(sep=" ")
        return f"{head},{self.hours:g}"


def parse_window(text: str | None) -> TraceWindow:
    """``"START,HOURS"`` (START a timestamp, or empty for the file's first row).

    Examples
    --------
    >>> parse_window("2015-03-01 00:00:00,6")
    TraceWindow(start=datetime.datetime(2015, 3, 1, 0, 0), hours=6.0)
    >>> parse_window(",12").hours
    12.0
    """
    if text is None or not text.strip():
        return TraceWindow()
    head, sep, tail = text.partition(",")
    try:
        hours = float(tail) if sep and tail.strip() else DEFAULT_HOURS
        start = datetime.fromisoformat(head.strip()) if head.strip() else None
    except ValueError:
        raise StreamscaleError(
            "expected START,HOURS (START a timestamp or empty)", item=f"window {text!r}"
        ) from None
    if not (math.isfinite(hours) and hours > 0):
        raise StreamscaleError("HOURS must be > 0", item=f"window {text!r}")
    return TraceWindow(start, hours)


def _row(path: Path, n: int, row: Sequence[str]) -> tuple[datetime, float]:
    where = f"{path.name} line {n}"
    if len(row) != 2:
        raise StreamscaleError(f"expected 2 fields, found {len(row)}", item=where)
    try:
        ts = datetime.fromisoformat(row[0].strip())
    except ValueError:
        raise StreamscaleError(f"{row[0]!r} is not a timestamp", item=where) from None
    try:
        value = float(row[1])
    except ValueError:
        raise StreamscaleError(f"{row[1]!r} is not a number", item=where) from None
    if not (math.isfinite(value) and value >= 0):
        raise StreamscaleError(f"value {row[1]!r} must be finite and >= 0", item=where)
    return ts, value


def read_trace_rows(path: str | Path) -> list[tuple[datetime, float]]:
    """The rows of a ``timestamp,value`` CSV, checked: the header, every timestamp and
    value, timestamps strictly increasing; one-line error naming the file and line."""
    p = Path(path)
    if not p.is_file():
        raise StreamscaleError("no such trace file", item=str(path))
    try:
        with p.open(newline="", encoding="utf-8-sig") as f:
            lines = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise StreamscaleError(f"not a CSV text file ({exc})", item=p.name) from None
    header = [c.strip().lower() for c in lines[0]] if lines else []
    if header != ["timestamp", "value"]:
        raise StreamscaleError("expected the header 'timestamp,value'", item=f"{p.name} line 1")
    rows: list[tuple[datetime, float]] = []
    for n, raw in enumerate(lines[1:], start=2):
        if not raw or all(not c.strip() for c in raw):
            continue
        ts, value = _row(p, n, raw)
        if rows and ts <= rows[-1][0]:
            raise StreamscaleError("timestamps must increase", item=f"{p.name} line {n}")
        rows.append((ts, value))
    if not rows:
        raise StreamscaleError("no rows after the header", item=p.name)
    return rows


@dataclass(frozen=True)
class RateTrace:
    """A window of a trace as offered load: rate ``rates[i]`` (tuples/s) from second
    ``starts[i]`` of the replay to the next start, until ``length_s``.

    ``scale`` is trace seconds per replayed second; ``peak_rate`` the rate the window's
    99th percentile maps to; ``origin`` the trace's timestamp at second 0 of the replay.
    """

    name: str
    window: TraceWindow
    minutes: float
    peak_rate: float
    starts: tuple[float, ...]
    rates: tuple[float, ...]
    length_s: float
    scale: float
    origin: datetime | None = None

    @property
    def max_rate(self) -> float:
        """The window's largest offered rate (at most ``CLIP × peak_rate``)."""
        return max(self.rates)

    def rate_at(self, t: float) -> float:
        """The offered rate ``t`` seconds into the replay (the last rate after its end)."""
        i = max(0, int(np.searchsorted(self.starts, t, side="right")) - 1)
        return self.rates[i]

    def schedule(self, *, delay_s: float = 0.0) -> tuple[tuple[float, float], ...]:
        """The generator's schedule: the first rate for ``delay_s`` seconds (a warm-up),
        then the replay; the last rate holds after it."""
        pts = [(0.0, self.rates[0])] if delay_s > 0 else []
        pts += [(delay_s + s, r) for s, r in zip(self.starts, self.rates, strict=True)]
        return tuple(pts)

    def offered(self, a: float, b: float) -> float:
        """Tuples offered from second ``a`` to ``b`` of the replay."""
        edges = [*self.starts[1:], max(b, self.length_s)]
        total = 0.0
        for s, e, r in zip(self.starts, edges, self.rates, strict=True):
            total += r * max(0.0, min(b, e) - max(a, s))
        return total


def _window_rows(
    rows: list[tuple[datetime, float]], window: TraceWindow, name: str
) -> tuple[list[tuple[datetime, float]], datetime]:
    start = window.start or rows[0][0]
    end = start + timedelta(hours=window.hours)
    inside = [(t, v) for t, v in rows if start <= t < end]
    if not inside:
        raise StreamscaleError(
            f"no rows between {start} and {end} (the file spans {rows[0][0]} to {rows[-1][0]})",
            item=f"{name} window {window}",
        )
    # the value in force at the window's start is the last row at or before it
    before = [(t, v) for t, v in rows if t < start]
    if before and inside[0][0] > start:
        inside.insert(0, (start, before[-1][1]))
    return inside, end


def read_rate_trace(
    path: str | Path,
    *,
    window: TraceWindow | str | None = None,
    minutes: float,
    peak_rate: float,
) -> RateTrace:
    """A window of the trace at ``path`` as offered load replayed in ``minutes``.

    Each row's value holds until the next row (the last row's, for the file's median
    interval, within the window). The window's 99th percentile of row values maps to
    ``peak_rate`` tuples/s; rates scale linearly and clip at ``CLIP × peak_rate``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = p.write_text("timestamp,value\\n2015-01-01 00:00:00,1\\n2015-01-01 00:05:00,3\\n")
    >>> t = read_rate_trace(p, minutes=1, peak_rate=100)
    >>> t.starts, [round(r, 1) for r in t.rates], t.length_s
    ((0.0, 30.0), [33.6, 100.7], 60.0)
    """
    p = Path(path)
    w = window if isinstance(window, TraceWindow) else parse_window(window)
    if not (math.isfinite(minutes) and minutes > 0):
        raise StreamscaleError(f"must be > 0, got {minutes!r}", item="minutes")
    if not (math.isfinite(peak_rate) and peak_rate > 0):
        raise StreamscaleError(f"must be > 0, got {peak_rate!r}", item="peak rate")
    rows = read_trace_rows(p)
    inside, end = _window_rows(rows, w, p.name)
    times = [t for t, _ in rows]
    step = float(np.median(np.diff([t.timestamp() for t in times]))) if len(times) > 1 else 60.0
    t0 = inside[0][0].timestamp()
    stop = min(end.timestamp(), inside[-1][0].timestamp() + step)
    span = stop - t0
    values = np.array([v for _, v in inside], dtype=float)
    p99 = float(np.percentile(values, 99))
    if p99 <= 0:
        raise StreamscaleError("the window's 99th percentile is 0: no load to scale", item=p.name)
    replay_s = minutes * 60.0
    rates = np.minimum(values / p99 * peak_rate, CLIP * peak_rate)
    starts = [(t.timestamp() - t0) * replay_s / span for t, _ in inside]
    return RateTrace(
        name=p.name,
        window=w,
        minutes=minutes,
        peak_rate=peak_rate,
        starts=tuple(starts),
        rates=tuple(float(r) for r in rates),
        length_s=replay_s,
        scale=span / replay_s,
        origin=inside[0][0],
    )
