"""The queries' result contract, shared by both engines: columns, final rows, ``result.parquet``.

A streaming query emits rows batch by batch; its *final result* is what it holds at
the end of the input once every window is flushed:

* ``append`` queries (Q0-Q3, Q8): every row emitted;
* ``upsert`` queries (aggregations without windows, and Q11's sessions): per key, the
  row of the last batch that emitted that key (the issue's "last value per key");
* ``replace`` queries: an emission carries *all* the rows of
  its window, so per window the rows of the last batch that emitted it;
* ``top`` queries (Q5, Q7 on streamscale: a window's rows at its maximum so far, each
  once, as they reach it; ``key`` is the window's columns, then the value): per window,
  the rows at the highest value emitted (the maximum only grows, so rows below it are
  superseded);
* ``last`` queries (complete mode: Q11 on streamscale): every batch emits the whole
  result, so the rows of the last batch.

Engines write their batches as Parquet under ``parts/batch_id=<b>/`` with time
columns as microseconds since the epoch (no time-zone conversion anywhere); the
finalizer turns that into ``OUT/result.parquet`` with the published query's output
columns (times as UTC microsecond timestamps), rows in a canonical order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamscale.errors import StreamscaleError

__all__ = [
    "OUTPUT_COLUMNS",
    "QUERIES",
    "TIME_COLUMNS",
    "canonical",
    "check_query",
    "finalize",
    "read_parts",
    "same_rows",
]

QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q11")

#: The published queries' output columns (nexmark-flink queries/q*.sql sink tables).
OUTPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "q0": ("auction", "bidder", "price", "dateTime", "extra"),
    "q1": ("auction", "bidder", "price", "dateTime", "extra"),
    "q2": ("auction", "price"),
    "q3": ("name", "city", "state", "id"),
    "q4": ("id", "final"),
    "q5": ("auction", "num"),
    "q6": ("seller", "avg_price"),
    "q7": ("auction", "bidder", "price", "dateTime", "extra"),
    "q8": ("id", "name", "stime"),
    "q11": ("bidder", "bid_count", "starttime", "endtime"),
}

#: Columns that are times (carried as epoch microseconds until the result is written).
TIME_COLUMNS: dict[str, tuple[str, ...]] = {
    "q0": ("dateTime",),
    "q1": ("dateTime",),
    "q7": ("dateTime",),
    "q8": ("stime",),
    "q11": ("starttime", "endtime"),
}


def check_query(q: str) -> str:
    """``q`` normalized (``Q5`` → ``q5``) or a one-line error."""
    n = str(q).strip().lower()
    if n not in QUERIES:
        raise StreamscaleError(f"unknown query (known: {', '.join(QUERIES)})", item=str(q))
    return n


def read_parts(parts: Path) -> pd.DataFrame:
    """Every batch's rows with their ``batch_id`` (an empty frame when none)."""
    files = sorted(Path(parts).rglob("*.parquet")) if Path(parts).exists() else []
    if not files:
        return pd.DataFrame({"batch_id": pd.Series([], dtype=np.int64)})
    dataset = ds.dataset(
        [str(f) for f in files], format="parquet", partitioning="hive",
        partition_base_dir=str(parts),
    )  # fmt: skip
    frame = dataset.to_table().to_pandas()
    frame["batch_id"] = frame["batch_id"].astype(np.int64)
    return frame


def finalize(
    q: str, parts: Path, out: Path, *, mode: str = "append", key: tuple[str, ...] = ()
) -> pd.DataFrame:
    """The final result of ``q`` from its batches under ``parts``, written to
    ``out/result.parquet`` and returned. ``mode``: ``append``, ``upsert``, ``replace``,
    ``top`` or ``last`` (see the module docstring) by ``key``."""
    frame = read_parts(parts)
    cols = OUTPUT_COLUMNS[q]
    if len(frame) and mode == "upsert":
        frame = frame.sort_values("batch_id", kind="stable").drop_duplicates(list(key), keep="last")
    elif len(frame) and mode == "replace":
        last = frame.groupby(list(key))["batch_id"].transform("max")
        frame = frame[frame["batch_id"] == last]
    elif len(frame) and mode == "top":
        *group, value = key
        best = frame.groupby(group)[value].transform("max")
        frame = frame[frame[value] == best]
    elif len(frame) and mode == "last":
        frame = frame[frame["batch_id"] == frame["batch_id"].max()]
    elif mode not in ("append", "upsert", "replace", "top", "last"):
        raise StreamscaleError("unknown result mode", item=mode)
    result = canonical(q, frame.reindex(columns=list(cols)))
    Path(out).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(result, preserve_index=False), Path(out) / "result.parquet")
    return result


def canonical(q: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The output columns with their types (times as UTC µs timestamps), rows sorted."""
    cols = OUTPUT_COLUMNS[q]
    out = pd.DataFrame(index=range(len(frame)))
    for c in cols:
        v = frame[c].reset_index(drop=True)
        if c in TIME_COLUMNS.get(q, ()):
            if not pd.api.types.is_datetime64_any_dtype(v):
                v = pd.to_datetime(v.astype(np.int64), unit="us", utc=True)
            elif v.dt.tz is None:  # Spark's timestamps are UTC instants (Parquet INT96)
                v = v.dt.tz_localize("UTC")
            v = v.astype("datetime64[us, UTC]")
        elif c in ("price", "final", "avg_price") and q in ("q1", "q4", "q6"):
            v = v.astype(np.float64)
        elif c in ("name", "city", "state", "extra"):
            v = v.astype(object)
        else:
            v = v.astype(np.int64)
        out[c] = v
    return out.sort_values(list(cols), kind="stable").reset_index(drop=True)


def same_rows(a: pd.DataFrame, b: pd.DataFrame, *, rtol: float = 1e-9) -> str | None:
    """``None`` when ``a`` and ``b`` hold the same rows (floats to ``rtol`` relative),
    else what differs first."""
    if list(a.columns) != list(b.columns):
        return f"columns differ: {list(a.columns)} vs {list(b.columns)}"
    if len(a) != len(b):
        return f"row counts differ: {len(a)} vs {len(b)}"
    cols = list(a.columns)
    floats = [c for c in cols if pd.api.types.is_float_dtype(a[c])]
    exact = [c for c in cols if c not in floats]
    a = a.sort_values(exact + floats, kind="stable").reset_index(drop=True)
    b = b.sort_values(exact + floats, kind="stable").reset_index(drop=True)
    for c in exact:
        if not (a[c].to_numpy() == b[c].to_numpy()).all():
            i = int(np.flatnonzero(a[c].to_numpy() != b[c].to_numpy())[0])
            return f"column {c} differs at row {i}: {a.iloc[i].to_dict()} vs {b.iloc[i].to_dict()}"
    for c in floats:
        if not np.allclose(a[c].to_numpy(), b[c].to_numpy(), rtol=rtol, atol=0.0):
            return f"column {c} differs beyond {rtol} relative"
    return None
