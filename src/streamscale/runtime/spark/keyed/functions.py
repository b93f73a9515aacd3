"""Operator functions bundled with streamscale (usable by import path in a topology file)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COST_KINDS", "Waiter", "burn", "calculator", "counter", "identity"]


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


#: Per-tuple cost modes: ``cpu`` burns the cost on the CPU (real-CPU figures); ``wall`` waits
#: it (an I/O-bound operator), so N executor slots behave like N cores on a smaller machine.
COST_KINDS = ("cpu", "wall")


class Waiter:
    """Waits accumulated per-tuple costs in slices of at least ``slice_ms`` (fewer syscalls)."""

    def __init__(self, slice_ms: float = 2.0) -> None:
        self.slice_ms = slice_ms
        self.pending_ms = 0.0

    def __call__(self, ms: float) -> None:
        if ms > 0:
            self.pending_ms += ms
            if self.pending_ms >= self.slice_ms:
                self.flush()

    def flush(self) -> None:
        if self.pending_ms > 0:
            time.sleep(self.pending_ms / 1000.0)
            self.pending_ms = 0.0


def calculator(
    rows: pd.DataFrame, state: dict[Any, Any], *, cost_kind: str = "cpu"
) -> pd.DataFrame:
    """Paper 000's calculator (§5): spend each tuple's ``cost_ms``, keep a per-key count and sum.

    ``state[key] = [count, sum]``; one output tuple per input tuple with the
    key's running count and sum. ``cost_kind`` (:data:`COST_KINDS`): ``cpu`` burns the
    cost, ``wall`` waits it.
    """
    if cost_kind not in COST_KINDS:
        raise ValueError(f"cost_kind must be one of {', '.join(COST_KINDS)}, got {cost_kind!r}")
    keys = rows["key"].to_numpy()
    values = rows["value"].to_numpy(dtype=float) if "value" in rows else np.zeros(len(rows))
    costs = rows["cost_ms"].to_numpy(dtype=float)
    counts = np.empty(len(rows), dtype=np.int64)
    sums = np.empty(len(rows), dtype=float)
    spend = Waiter() if cost_kind == "wall" else burn
    for i in range(len(rows)):
        spend(costs[i])
        acc = state.get(keys[i])
        if acc is None:
            acc = state[keys[i]] = [0, 0.0]
        acc[0] += 1
        acc[1] += values[i]
        counts[i], sums[i] = acc
    if isinstance(spend, Waiter):
        spend.flush()
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
