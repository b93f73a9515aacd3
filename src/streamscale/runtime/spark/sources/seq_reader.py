"""The paced reader every bundled streaming source builds on.

Rows are numbered 0, 1, 2, …; an offset is ``{"seq", "t0"}`` (the next row and the
stream's start time), so any range is re-read exactly after a restart. The
generator (:mod:`streamscale.runtime.spark.sources.sources`), the trace replay
(:mod:`streamscale.runtime.spark.sources.trace`) and the NEXMark source subclass
:class:`SeqStreamReader`; it lives in its own module so that none of them imports
another (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from streamscale.errors import StreamscaleError
from streamscale.settings import Schema, Setting

__all__ = ["READER_SETTINGS", "SeqRange", "SeqStreamReader", "reader_options"]

#: The options every paced reader takes, declared once: the generator's, the trace
#: replay's and the NEXMark source's specs default to them and read them with
#: :func:`reader_options`.
READER_SETTINGS = Schema(
    "reader",
    Setting("partitions", int, 2, "source tasks per micro-batch", low=1),
    Setting(
        "max_rows_per_batch", int, None, "most rows a micro-batch admits (unset: no limit)", low=1
    ),
    Setting("start_time", float, None, "the stream's start t0, epoch seconds (unset: the clock)"),
    Setting(
        "admission_file",
        str,
        None,
        "a file holding a live admission limit, which the driver rewrites (unset: none)",
    ),
)


def _opt(options: Mapping[str, Any], name: str, conv: Callable[[str], Any], default: Any) -> Any:
    """Option ``name`` parsed by ``conv`` (``default`` when absent or blank); one-line error."""
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return conv(str(raw).strip())
    except ValueError:
        raise StreamscaleError(f"cannot parse {raw!r}", item=f"option '{name}'") from None


def reader_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`READER_SETTINGS` read from Spark's string options (defaults filled), as
    keyword arguments of a source's spec; its own checks follow in the spec.

    >>> reader_options({"partitions": "4"})
    {'partitions': 4, 'max_rows_per_batch': None, 'start_time': None, 'admission_file': None}
    """
    convs: dict[str, Callable[[str], Any]] = {
        "partitions": int,
        "max_rows_per_batch": int,
        "start_time": float,
        "admission_file": str,
    }
    return {
        s.name: _opt(options, s.name, convs[s.name], s.default) for s in READER_SETTINGS.settings
    }


class SeqRange(InputPartition):
    """One Spark task's share of a micro-batch: tuples ``start <= seq < end``."""

    def __init__(self, start: int, end: int, t0: float) -> None:
        self.start, self.end, self.t0 = start, end, t0

    def __repr__(self) -> str:
        return f"SeqRange({self.start}, {self.end})"


class SeqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A paced reader over rows numbered 0, 1, 2, …; offsets are ``{"seq", "t0"}``.

    Subclasses say how many rows exist ``elapsed_s`` seconds after the stream's
    start (:meth:`available`) and how to read a range. ``clock`` (epoch seconds)
    is read only to pace the stream; a restarted query re-reads the same rows.
    """

    def __init__(self, spec: Any, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.clock = clock
        self._until: float | None = None

    def available(self, elapsed_s: float) -> int:
        raise NotImplementedError

    def initialOffset(self) -> dict:
        t0 = self.spec.start_time if self.spec.start_time is not None else self.clock()
        return {"seq": 0, "t0": t0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.spec.max_rows_per_batch is not None:
            return ReadMaxRows(self.spec.max_rows_per_batch)
        return ReadAllAvailable()

    def admission(self) -> int | None:
        """The live admission limit in ``admission_file`` (``None``: no file, or empty)."""
        path = getattr(self.spec, "admission_file", None)
        if not path:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        return max(1, int(text)) if text else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self.clock()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        now = self.clock() if self._until is None else self._until
        seq, t0 = int(start["seq"]), float(start["t0"])
        end = max(self.available(now - t0), seq)
        if isinstance(limit, ReadMaxRows):
            end = min(end, seq + limit.max_rows)
        elif isinstance(limit, ReadMinRows) and end - seq < limit.min_rows:
            end = seq
        live = None if self._until is not None else self.admission()  # availableNow: all
        if live is not None:
            end = min(end, seq + live)
        return {"seq": end, "t0": t0}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        a, b, t0 = int(start["seq"]), int(end["seq"]), float(end["t0"])
        if b <= a:
            return []
        n = min(self.spec.partitions, b - a)
        cuts = [a + (b - a) * i // n for i in range(n + 1)]
        return [SeqRange(cuts[i], cuts[i + 1], t0) for i in range(n)]

    def commit(self, end: dict) -> None:
        """Nothing to release: rows are recomputed (or re-read) from offsets, never buffered."""
