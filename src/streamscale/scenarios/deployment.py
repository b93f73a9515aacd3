"""A replay stands for a deployment: every time constant compressed with the trace.

A load trace replayed faster than it happened compresses time by ``c`` (trace seconds
per replayed second). A figure measured on such a replay stands for a real deployment
only when every time constant shrinks by the same ``c``: the trigger, the latency
target and the executor start-up. A day replayed in 2.5 minutes with a 2 s trigger
stands for a deployment whose trigger is 19 minutes and whose 10 s executor start-up
is 96 minutes — none has those. A :class:`Deployment` names the real constants and
derives the replay's; :data:`DEPLOYMENTS` holds the three the benchmarks run:

* ``minutes``: c = 60 — trigger 2 min, latency target 10 min, executor start-up 60 s
  (a new cloud node), emulated at 1 s; 24 h replayed (``--quick``: the 6 h around the
  day's steepest rise);
* ``seconds``: c = 10 — trigger 20 s, target 100 s; start-up real (this host's ≈ 10 s
  stands for a new node's ≈ 100 s) or emulated at 3 s (a warm Kubernetes executor's
  30 s); 2 h around the rise (``--quick`` 1 h);
* ``compressed``: a day in 4 minutes (c = 360), a 2 s trigger and a 10 s target — the
  stress case, where a trace's 5-minute interval lasts less than a second.

:func:`day_window` picks the replayed window: the file's 8th calendar day when it has
8 days or more (the days before it are the history a forecaster may read), else its
first; a window shorter than a day is centred on the day's steepest rise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.rate_trace import TraceWindow

__all__ = ["DEPLOYMENTS", "HISTORY_DAY", "Deployment", "day_window", "deployment", "steepest_rise"]

#: the replayed day is the file's 8th when it has that many: seven days of history before it
HISTORY_DAY = 8


@dataclass(frozen=True)
class Deployment:
    """A real deployment a replay stands for.

    Parameters
    ----------
    name
        How the benchmarks and the CLI name it (``--deployment NAME``).
    time_scale
        ``c``: trace seconds per replayed second.
    real_trigger_s, real_target_s
        The deployment's micro-batch trigger and end-to-end latency target (seconds).
    emulated_startup_real_s
        The executor start-up an emulated run stands for (replayed: ``÷ c``).
    startup
        The start-up mode the deployment runs by default (``real`` or ``emulated``).
    hours, quick_hours
        The window replayed, in trace hours (``--quick``: the shorter one).

    Examples
    --------
    >>> d = DEPLOYMENTS["minutes"]
    >>> d.trigger_s, d.target_s, d.emulated_startup_s, d.minutes(6.0)
    (2.0, 10.0, 1.0, 6.0)
    >>> d.core_hours(720.0)  # 720 core-seconds of replay: 12 real core-hours
    12.0
    """

    name: str
    time_scale: float
    real_trigger_s: float
    real_target_s: float
    emulated_startup_real_s: float
    startup: str
    hours: float
    quick_hours: float
    about: str

    @property
    def trigger_s(self) -> float:
        """The replay's trigger interval (seconds)."""
        return self.real_trigger_s / self.time_scale

    @property
    def target_s(self) -> float:
        """The replay's end-to-end latency target (seconds)."""
        return self.real_target_s / self.time_scale

    @property
    def emulated_startup_s(self) -> float:
        """The replay's emulated start-up delay (seconds)."""
        return self.emulated_startup_real_s / self.time_scale

    def rescaled(self, time_scale: float) -> Deployment:
        """The same deployment replayed at another compression: every replayed constant
        shrinks with it (a short smoke run stands for the same deployment).

        >>> DEPLOYMENTS["minutes"].rescaled(240.0).trigger_s
        0.5
        """
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise StreamscaleError(f"must be > 0, got {time_scale}", item="time scale")
        return replace(self, time_scale=time_scale)

    def window_hours(self, *, quick: bool) -> float:
        return self.quick_hours if quick else self.hours

    def minutes(self, hours: float) -> float:
        """Minutes of replay for ``hours`` of trace."""
        return hours * 3600.0 / self.time_scale / 60.0

    def real_s(self, replay_s: float) -> float:
        """A replayed duration in the deployment's seconds."""
        return replay_s * self.time_scale

    def core_hours(self, core_seconds: float) -> float:
        """Core-hours of the real window for ``core_seconds`` of replay."""
        return core_seconds * self.time_scale / 3600.0

    def fields(self, startup_s: float) -> dict[str, Any]:
        """What a result line says of the deployment, for a replayed start-up ``startup_s``."""
        return {
            "deployment": self.name,
            "time_scale": self.time_scale,
            "real_trigger_s": self.real_trigger_s,
            "real_target_s": self.real_target_s,
            "real_startup_s": self.real_s(startup_s),
        }

    def describe(self, startup: str, startup_s: float) -> str:
        """The deployment in words, with the start-up a run used (replayed seconds)."""
        how = "emulated" if startup == "emulated" else "real, this host's"
        return (
            f"the '{self.name}' deployment ({self.about}): trace time compressed {self.time_scale:g}×, "
            f"trigger {_span(self.real_trigger_s)}, latency target {_span(self.real_target_s)}, "
            f"executor start-up {_span(self.real_s(startup_s))} ({how} {startup_s:.3g} s replayed)"
        )


def _span(seconds: float) -> str:
    """``90`` → ``'90 s'``, ``600`` → ``'10 min'``, ``7200`` → ``'2 h'``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


DEPLOYMENTS: dict[str, Deployment] = {
    "minutes": Deployment(
        "minutes", 60.0, 120.0, 600.0, 60.0, "emulated", 24.0, 6.0,
        "a trigger of minutes and new cloud nodes",
    ),
    "seconds": Deployment(
        "seconds", 10.0, 20.0, 100.0, 30.0, "real", 2.0, 1.0,
        "a trigger of seconds and executors started on demand",
    ),
    "compressed": Deployment(
        "compressed", 360.0, 720.0, 3600.0, 3600.0, "real", 24.0, 24.0,
        "the stress case: a day in 4 minutes",
    ),
}  # fmt: skip


def deployment(name: str) -> Deployment:
    """The named deployment; one line naming the known ones otherwise."""
    try:
        return DEPLOYMENTS[name]
    except KeyError:
        known = ", ".join(DEPLOYMENTS)
        raise StreamscaleError(f"unknown deployment (known: {known})", item=name) from None


def steepest_rise(rows: Sequence[tuple[datetime, float]], *, smooth_s: float = 1800.0) -> datetime:
    """When the steepest rise of a series starts: the rows' values averaged over
    ``smooth_s`` or three rows, whichever is longer (a 5-minute spike is no rise), and the time after which that average
    grows the most over the next ``smooth_s``.

    >>> t0 = datetime(2015, 1, 1)
    >>> rows = [(t0 + timedelta(minutes=5 * i), 10.0 if i < 40 else 50.0) for i in range(100)]
    >>> steepest_rise(rows)
    datetime.datetime(2015, 1, 1, 3, 15)
    """
    if len(rows) < 2:
        return rows[0][0]
    ts = np.array([t.timestamp() for t, _ in rows])
    smooth_s = max(smooth_s, 3.0 * float(np.median(np.diff(ts))))  # a few rows at least
    vs = np.array([v for _, v in rows], dtype=float)
    cum = np.concatenate([[0.0], np.cumsum(vs)])
    lo = np.searchsorted(ts, ts - smooth_s, side="right")
    mean = (cum[1:] - cum[lo]) / (np.arange(1, len(ts) + 1) - lo)  # trailing average
    ahead = np.searchsorted(ts, ts + smooth_s, side="right") - 1
    gain = mean[ahead] - mean
    return rows[int(np.argmax(gain))][0]


def day_window(rows: Sequence[tuple[datetime, float]], hours: float) -> TraceWindow:
    """The window a deployment replays by default: the file's :data:`HISTORY_DAY`-th
    calendar day when it has that many (the days before it are history), else its
    first; ``hours`` of it centred on the day's steepest rise when shorter than a day.

    >>> t0 = datetime(2015, 1, 1)
    >>> rows = [(t0 + timedelta(hours=h), 1.0 + (h % 24 >= 9) * 5) for h in range(24 * 10)]
    >>> w = day_window(rows, 6.0)
    >>> w.start, w.hours
    (datetime.datetime(2015, 1, 8, 5, 0), 6.0)
    >>> day_window(rows, 24.0).start
    datetime.datetime(2015, 1, 8, 0, 0)
    """
    if not rows:
        raise StreamscaleError("no rows", item="trace")
    if not (math.isfinite(hours) and hours > 0):
        raise StreamscaleError(f"must be > 0, got {hours}", item="window hours")
    dates = sorted({t.date() for t, _ in rows})
    date = dates[HISTORY_DAY - 1] if len(dates) >= HISTORY_DAY else dates[0]
    day = max(datetime.combine(date, datetime.min.time()), rows[0][0])
    end = day + timedelta(hours=24)
    if hours >= 24:
        return TraceWindow(day, hours)
    inside = [(t, v) for t, v in rows if day <= t < end]
    rise = steepest_rise(inside)
    start = rise - timedelta(hours=hours / 2)
    start = max(day, min(start, end - timedelta(hours=hours)))
    return TraceWindow(start, hours)
