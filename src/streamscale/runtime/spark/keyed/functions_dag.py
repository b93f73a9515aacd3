"""Bundled operator functions for DAG jobs (see :mod:`streamscale.runtime.spark.driver.graph`).

Stateless operators take and return a pandas DataFrame; keyed operators take
one shard's rows in arrival order and that shard's state dict.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "bucket_totals",
    "count_keys",
    "enrich",
    "odd_only",
    "project",
    "rank_in_key",
    "rank_in_key_waited",
    "tier",
]


def enrich(df: pd.DataFrame, *, buckets: int = 5) -> pd.DataFrame:
    """Keep ``key`` and ``seq`` and add ``bucket = seq mod buckets``."""
    seq = df["seq"].to_numpy(dtype=np.int64)
    return pd.DataFrame({"key": df["key"], "seq": seq, "bucket": seq % buckets})


def odd_only(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with an odd ``seq``, with ``n = 0`` (same columns as :func:`rank_in_key`)."""
    odd = df[df["seq"].to_numpy(dtype=np.int64) % 2 == 1]
    return pd.DataFrame(
        {
            "key": odd["key"],
            "seq": odd["seq"].astype(np.int64),
            "bucket": odd["bucket"].astype(np.int64),
            "n": np.zeros(len(odd), dtype=np.int64),
        }
    )


def rank_in_key(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Every row again with ``n``: its rank (1, 2, …) among its key's rows in arrival order."""
    counts: dict[Any, int] = state.setdefault("count", {})
    n = np.empty(len(rows), dtype=np.int64)
    for i, k in enumerate(rows["key"].tolist()):
        counts[k] = counts.get(k, 0) + 1
        n[i] = counts[k]
    return pd.DataFrame(
        {
            "key": rows["key"].to_numpy(),
            "seq": rows["seq"].to_numpy(dtype=np.int64),
            "bucket": rows["bucket"].to_numpy(dtype=np.int64),
            "n": n,
        }
    )


def rank_in_key_waited(
    rows: pd.DataFrame, state: dict[Any, Any], *, cost_ms: float = 1.0
) -> pd.DataFrame:
    """:func:`rank_in_key` after waiting ``cost_ms`` per row: an I/O-like cost, so that
    task slots behave like cores on a machine with fewer (emulated cores)."""
    if cost_ms > 0 and len(rows):
        time.sleep(len(rows) * cost_ms / 1000.0)
    return rank_in_key(rows, state)


def bucket_totals(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Per ``bucket``: rows seen and the sum of ``n``; emits each touched bucket's totals."""
    seen: dict[Any, int] = state.setdefault("rows", {})
    total: dict[Any, int] = state.setdefault("n", {})
    g = rows.groupby("bucket")["n"].agg(["size", "sum"])
    for b, size, s in zip(g.index.tolist(), g["size"].tolist(), g["sum"].tolist(), strict=True):
        seen[b] = seen.get(b, 0) + int(size)
        total[b] = total.get(b, 0) + int(s)
    keys = g.index.tolist()
    return pd.DataFrame(
        {
            "bucket": np.asarray(keys, dtype=np.int64),
            "rows": np.asarray([seen[b] for b in keys], dtype=np.int64),
            "n": np.asarray([total[b] for b in keys], dtype=np.int64),
        }
    )


def project(df: pd.DataFrame) -> pd.DataFrame:
    """Keep ``key``, ``seq`` and ``value`` (a stateless stage with a fixed schema)."""
    return pd.DataFrame(
        {
            "key": df["key"],
            "seq": df["seq"].astype(np.int64),
            "value": df["value"].astype(float),
        }
    )


def count_keys(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Per ``key``: tuples seen; emits each touched key with its count."""
    counts: dict[Any, int] = state.setdefault("count", {})
    vc = rows["key"].value_counts(sort=False)
    for k, c in zip(vc.index.tolist(), vc.tolist(), strict=True):
        counts[k] = counts.get(k, 0) + int(c)
    keys = vc.index.tolist()
    return pd.DataFrame(
        {"key": keys, "count": np.asarray([counts[k] for k in keys], dtype=np.int64)}
    )


def tier(df: pd.DataFrame, *, size: int = 100) -> pd.DataFrame:
    """Keep ``key`` and ``count`` and add ``tier = count // size`` (a stage after a keyed one)."""
    count = df["count"].to_numpy(dtype=np.int64)
    return pd.DataFrame({"key": df["key"], "count": count, "tier": count // size})
