"""A fair order for benchmarks that compare configurations.

Configurations run one after the other share a host whose state drifts (a cluster left
warm, caches, other load), so none may always run first or last: each repeat runs them
in an order rotated by one (:func:`run_order`), and with two or more the run's first
configuration runs once more at the very end — the order check, whose figures beside
the first run's (:func:`order_check`) show how far the host drifted. Figures over the
repeats are given as their median and range (:func:`spread`).

Used by ``bench_autoscale.py``, ``bench_skew.py``, ``bench_placement.py``,
``bench_pipeline.py``, ``bench_trace.py`` and ``bench_nexmark.py``.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["bad_repeats", "number", "order_check", "over", "rotated", "run_order", "spread"]

T = TypeVar("T")


def rotated(names: list[T], k: int) -> list[T]:
    """The configurations in the order of repeat ``k``: rotated by one at each repeat, so
    none always runs first (on a cluster that a previous session left warm) or last.

    >>> rotated(["a", "b", "c"], 1)
    ['b', 'c', 'a']
    """
    k %= len(names)
    return names[k:] + names[:k]


def run_order(configs: list[T], repeats: int) -> list[list[T]]:
    """Each repeat's order (:func:`rotated`), then, with two configurations or more, a
    last one of the first configuration alone: the order check.

    >>> run_order(["static", "elastic"], 2)
    [['static', 'elastic'], ['elastic', 'static'], ['static']]
    """
    orders = [rotated(configs, k) for k in range(repeats)] if configs else []
    return [*orders, configs[:1]] if len(configs) >= 2 else orders


def bad_repeats(script: str, repeats: int) -> bool:
    """Whether ``repeats`` is outside 1 to 20; if so, says so in one line on stderr.

    >>> bad_repeats("bench_x", 3)
    False
    """
    if 1 <= repeats <= 20:
        return False
    print(f"{script}: --repeats: must be 1 to 20, got {repeats}", file=sys.stderr)
    return True


def number(v: Any) -> bool:
    """Whether ``v`` is a finite number (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def over(a: Any, b: Any) -> float | None:
    """``a / b``, or None when either is no finite number or ``b`` is 0."""
    return float(a / b) if number(a) and number(b) and b != 0 else None


def spread(values: list[float]) -> dict[str, float]:
    """The median, min and max of ``values`` (at least one).

    >>> spread([3.0, 1.0, 2.0])
    {'median': 2.0, 'min': 1.0, 'max': 3.0}
    """
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def order_check(
    first: dict[str, Any], again: dict[str, Any], figures: Iterable[str]
) -> dict[str, Any]:
    """The order check's line: ``figures`` of the first configuration's first run and of
    its run again at the end, and again ÷ first (None when either is missing or first 0).

    >>> order_check({"x": 2.0}, {"x": 3.0}, ["x"])["again_over_first"]
    {'x': 1.5}
    """
    keys = list(figures)
    was = {k: first.get(k) for k in keys}
    now = {k: again.get(k) for k in keys}
    ratio = {k: over(now[k], was[k]) for k in keys}
    return {"figure": "order_check", "first": was, "again": now, "again_over_first": ratio}
