"""Where a run's core-seconds above the floor go.

A policy that keeps up holds at least the cores the offered rate needs; the oracle
(:func:`~streamscale.scenarios.traffic.oracle`) holds the fewest whole executors with
perfect foresight. What a run holds beyond that is split, instant by instant, into the
causes a policy can act on:

* ``rounding`` — whole executors for the rate now, over its fractional cores (the
  oracle pays it too);
* ``foresight`` — what the oracle holds ahead of a rise, a start-up before it (the
  oracle pays it too);
* ``startup_overshoot`` — executors billed while still starting, beyond the floor:
  requests renewed for a backlog that executors already on their way would drain;
* ``holding`` — executors kept after a burst, while the rate needed them within the
  last latency target;
* ``headroom`` — the rest: cores sized above the rate (utilization targets, queueing
  margins, a plan sized for the trigger rather than the latency target);
* ``under`` — executors the floor holds that the run did not (the backlog paid for it).

Each is reported in core-seconds and over the oracle's core-seconds. Pure: the run's
billed executor spans, the trace and the settings in, figures out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.runtime.spark.sources.rate_trace import RateTrace

__all__ = ["Held", "excess_split"]

#: the causes, in the order they are taken from an instant's excess
CAUSES = ("rounding", "foresight", "startup_overshoot", "holding", "headroom", "under")


@dataclass(frozen=True)
class Held:
    """One executor as billed: from ``billed_s`` (its request), usable from ``added_s``,
    gone at ``removed_s`` (``None``: alive at the end); seconds of the replay."""

    billed_s: float
    added_s: float
    removed_s: float | None


def _count(held: Sequence[Held], t: np.ndarray, *, usable: bool) -> np.ndarray:
    n = np.zeros_like(t)
    for h in held:
        end = math.inf if h.removed_s is None else h.removed_s
        lo = h.added_s if usable else h.billed_s
        n += (t >= lo) & (t < end)
    return n


def _window_max(x: np.ndarray, steps_back: int, steps_ahead: int) -> np.ndarray:
    """The largest of ``x`` from ``steps_back`` samples before to ``steps_ahead`` after."""
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = x[max(0, i - steps_back) : i + steps_ahead + 1].max()
    return out


def excess_split(
    held: Sequence[Held],
    load: RateTrace,
    *,
    cost_ms: float,
    executor_cores: int,
    startup_s: float,
    target_s: float,
    oracle_core_seconds: float,
    step_s: float = 0.1,
) -> dict[str, float]:
    """The run's core-seconds over the replay split by cause (see the module docstring),
    each over ``oracle_core_seconds`` (``*_core_s``: in core-seconds).

    Examples
    --------
    A flat 150 tuples/s at 20 ms a tuple (3 cores: two 2-core executors) for 10 s, one
    executor of 2 cores billed throughout beyond them, the third requested at 0 s and
    usable at 2 s: 2 s of start-up overshoot, then 8 s of headroom; the half core the
    oracle's whole executors round up is rounding.

    >>> from streamscale.runtime.spark.sources.rate_trace import RateTrace, TraceWindow
    >>> load = RateTrace("x", TraceWindow(), 10 / 60, 150.0, (0.0,), (150.0,), 10.0, 1.0)
    >>> held = [Held(0.0, 0.0, None), Held(0.0, 0.0, None), Held(0.0, 2.0, None)]
    >>> s = excess_split(held, load, cost_ms=20.0, executor_cores=2, startup_s=1.0,
    ...                  target_s=5.0, oracle_core_seconds=40.0)
    >>> {k: round(v, 2) for k, v in s.items() if k.endswith("_core_s")}  # doctest: +NORMALIZE_WHITESPACE
    {'rounding_core_s': 10.0, 'foresight_core_s': 0.0, 'startup_overshoot_core_s': 4.0,
     'holding_core_s': 0.0, 'headroom_core_s': 16.0, 'under_core_s': 0.0}
    """
    t = np.arange(0.0, load.length_s, step_s) + step_s / 2
    rate = np.array([load.rate_at(x) for x in t])
    frac = rate * cost_ms / 1000.0 / executor_cores
    need = np.ceil(np.maximum(np.ceil(rate * cost_ms / 1000.0 - 1e-9), 1) / executor_cores)
    ahead = _window_max(need, 0, round(startup_s / step_s))
    recent = _window_max(need, round(target_s / step_s), 0)
    billed = _count(held, t, usable=False)
    usable = _count(held, t, usable=True)
    extra = np.maximum(0.0, billed - ahead)
    overshoot = np.minimum(extra, billed - usable)
    holding = np.minimum(extra - overshoot, np.maximum(0.0, recent - ahead))
    parts = {
        "rounding": need - frac,
        "foresight": ahead - need,
        "startup_overshoot": overshoot,
        "holding": holding,
        "headroom": extra - overshoot - holding,
        "under": np.maximum(0.0, ahead - billed),
    }
    out: dict[str, float] = {}
    for k in CAUSES:
        core_s = float(parts[k].sum() * step_s * executor_cores)
        out[f"{k}_core_s"] = core_s
        out[k] = core_s / oracle_core_seconds if oracle_core_seconds > 0 else math.nan
    return out
