"""One input for every path compared: the same generated rows, batch for batch, as files.

The generator's tuples (:func:`~streamscale.runtime.spark.sources.sources.generate`) are written
once as one Parquet file per micro-batch; :func:`file_stream` reads them back as a
streaming DataFrame that takes exactly one file per batch (``maxFilesPerTrigger`` 1).
Every path of a comparison — streamscale's keyed operator, Spark SQL, Spark's stateful
Python operators — then runs as a streaming query over the same batches, and is timed
the same way, from Spark's own query progress (:func:`batch_seconds`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from streamscale.runtime.spark.sources.sources import GENERATOR_SCHEMA, generate

__all__ = ["HARNESS", "batch_seconds", "file_stream", "write_batch", "write_batches"]

#: the harness named in every data-path line
HARNESS = "streaming query per path, one Parquet file per batch, noop sink, Spark triggerExecution"


def write_batches(
    directory: Path, options: Mapping[str, Any], rows: int, batches: int
) -> list[pd.DataFrame]:
    """Write ``batches`` files of ``rows`` consecutive generated tuples; return the frames."""
    directory.mkdir(parents=True, exist_ok=True)
    frames = []
    for b in range(batches):
        pdf = generate(dict(options), b * rows, (b + 1) * rows)
        # file names sort in batch order: the file source takes them oldest first
        write_batch(pdf, directory / f"batch-{b:05d}.parquet")
        frames.append(pdf)
    return frames


def write_batch(pdf: pd.DataFrame, path: Path) -> None:
    """One batch's file, timestamps in microseconds (Spark reads no nanosecond ones)."""
    pdf.to_parquet(path, index=False, coerce_timestamps="us", allow_truncated_timestamps=True)


def file_stream(spark: Any, directory: Path) -> Any:
    """The files of :func:`write_batches` as a stream of one file per batch."""
    return (
        spark.readStream.schema(GENERATOR_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(directory))
    )


def batch_seconds(progress: Sequence[Any], *, skip: int = 1) -> list[float]:
    """Seconds of each batch with rows (Spark's ``triggerExecution``), after ``skip``."""
    with_rows = [p for p in sorted(progress, key=lambda p: p.batch_id) if p.rows > 0]
    return [p.trigger_ms / 1000.0 for p in with_rows[skip:]]
