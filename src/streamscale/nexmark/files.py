"""Nexmark events on disk: ``DIR/person.parquet``, ``DIR/auction.parquet``, ``DIR/bid.parquet``.

Each table is a directory of Parquet files (``part-00000.parquet`` …) that
``spark.read.parquet(DIR/bid.parquet)`` reads as one table. The events are cut at
the same event-id boundaries in every table, so file ``k`` of each table holds the
events of one stretch of event time; the files are written in event-time order
with increasing modification times, so a file stream (``maxFilesPerTrigger``)
takes them in that order over several micro-batches. ``dateTime`` and ``expires``
are UTC microsecond timestamps. ``DIR/nexmark.json`` records how the events were
made (events, seed, schedule, files).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from streamscale.errors import StreamscaleError
from streamscale.nexmark.generator import Events, GeneratorConfig, generate, split_ranges

__all__ = [
    "SPARK_SCHEMAS",
    "TABLES",
    "files_of",
    "read_events",
    "read_meta",
    "write_events",
]

TABLES = ("person", "auction", "bid")
META = "nexmark.json"

#: Spark DDL schemas of the three tables (a file stream needs its schema up front).
SPARK_SCHEMAS = {
    "person": "id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, "
    "state STRING, dateTime TIMESTAMP, extra STRING",
    "auction": "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, "
    "reserve BIGINT, dateTime TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, "
    "extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
    "dateTime TIMESTAMP, extra STRING",
}


def write_events(cfg: GeneratorConfig, n_events: int, out: Path, *, files: int = 8) -> dict:
    """Generate ``n_events`` events and write them as ``files`` files per table.

    Returns what ``DIR/nexmark.json`` records. Refuses a directory that already
    holds tables (a file stream would mix two event sets).
    """
    if n_events < 1:
        raise StreamscaleError("must be >= 1", item=f"--events {n_events}")
    if not 1 <= files <= 10_000:
        raise StreamscaleError("must be in [1, 10000]", item=f"--files {files}")
    out = Path(out)
    for t in TABLES:
        if (out / f"{t}.parquet").exists():
            raise StreamscaleError("already holds Nexmark tables", item=str(out))
    out.mkdir(parents=True, exist_ok=True)
    ranges = split_ranges(n_events, min(files, n_events))
    counts = dict.fromkeys(TABLES, 0)
    mtime = 1_000_000_000  # increasing, explicit modification times: the stream's order
    for k, (lo, hi) in enumerate(ranges):
        ev = generate(cfg, lo, hi)
        for t in TABLES:
            d = out / f"{t}.parquet"
            d.mkdir(exist_ok=True)
            path = d / f"part-{k:05d}.parquet"
            frame = getattr(ev, t)
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
            os.utime(path, (mtime + k, mtime + k))
            counts[t] += len(frame)
    meta = {
        "events": n_events,
        "files": len(ranges),
        "rows": counts,
        "config": {**asdict(cfg), "schedule": [list(s) for s in cfg.schedule]},
    }
    (out / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def read_meta(events_dir: Path) -> dict[str, Any]:
    """``DIR/nexmark.json``, or a one-line error naming the directory."""
    p = Path(events_dir) / META
    missing = [t for t in TABLES if not (Path(events_dir) / f"{t}.parquet").exists()]
    if missing or not p.is_file():
        raise StreamscaleError(
            f"not a Nexmark event directory (no {missing[0] + '.parquet' if missing else META})",
            item=str(events_dir),
        )
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StreamscaleError(f"unreadable: {exc}", item=str(p)) from None


def files_of(events_dir: Path, table: str) -> list[Path]:
    """The table's files in stream order."""
    d = Path(events_dir) / f"{table}.parquet"
    return sorted(d.glob("*.parquet")) if d.is_dir() else [d]


def read_events(events_dir: Path) -> Events:
    """The three tables as pandas frames, in event order (for references and tests)."""
    read_meta(events_dir)
    frames = {}
    for t in TABLES:
        parts = [pq.read_table(f).to_pandas() for f in files_of(events_dir, t)]
        frames[t] = pd.concat(parts, ignore_index=True)
    return Events(**frames)
