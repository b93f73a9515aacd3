"""Operator functions bundled with streamscale (usable by import path in a topology file)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["burn", "calculator", "counter", "identity"]


def burn(ms: float) -> None:
    """Spend ``ms`` milliseconds of this thread's CPU time (a spin, not a sleep).

    Measured on the thread's CPU clock, not the wall clock, so a tuple costs
    the same CPU however busy the machine is (paper 000, §5: per-tuple cost is
    computation).
    """
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        pass


def calculator(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Paper 000's calculator (§5): burn each tuple's ``cost_ms`` of CPU, keep a per-key count and sum.

    ``state[key] = [count, sum]``; one output tuple per input tuple with the
    key's running count and sum.
    """
    keys = rows["key"].to_numpy()
    values = rows["value"].to_numpy(dtype=float) if "value" in rows else np.zeros(len(rows))
    costs = rows["cost_ms"].to_numpy(dtype=float)
    counts = np.empty(len(rows), dtype=np.int64)
    sums = np.empty(len(rows), dtype=float)
    for i in range(len(rows)):
        burn(costs[i])
        acc = state.get(keys[i])
        if acc is None:
            acc = state[keys[i]] = [0, 0.0]
        acc[0] += 1
        acc[1] += values[i]
        counts[i], sums[i] = acc
    return pd.DataFrame({"key": keys, "count": counts, "sum": sums})


calculator.required_fields = ("cost_ms",)  # type: ignore[attr-defined]


def counter(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Count tuples per key and check per-key arrival order by ``seq``.

    ``state["count"][key]``, ``state["last_seq"][key]`` and
    ``state["order_violations"]`` (tuples whose ``seq`` was not above the key's
    previous one). Emits one row per key seen, with its new count.
    """
    counts: dict[Any, int] = state.setdefault("count", {})
    last: dict[Any, int] = state.setdefault("last_seq", {})
    violations = int(state.get("order_violations", 0))
    for k, s in zip(rows["key"].tolist(), rows["seq"].tolist(), strict=True):
        prev = last.get(k)
        if prev is not None and s <= prev:
            violations += 1
        last[k] = s
        counts[k] = counts.get(k, 0) + 1
    state["order_violations"] = violations
    seen = rows["key"].drop_duplicates().tolist()
    return pd.DataFrame({"key": seen, "count": [counts[k] for k in seen]})


counter.required_fields = ("seq",)  # type: ignore[attr-defined]


def identity(df: pd.DataFrame) -> pd.DataFrame:
    """A stateless operator that passes its input through."""
    return df
