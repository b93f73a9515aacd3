"""Foresight: the offered rate over the next executor start-up, forecast from the past.

An executor asked for when the load has already risen serves a start-up later; one
released when the load dips is asked for again when it comes back. A forecast of the
offered rate over the next start-up plus a trigger lets the policy ask a start-up
before a rise and release only when the low outlasts a start-up (Daedalus, 2024, and
Imai et al., CCGrid 2018, forecast the same way for Flink and Storm).

Two forecasts, both from the past alone — the rates observed up to ``now`` and, when
the user gives one, a history of the same load (the trace format: earlier days):

* **seasonal** (with a history): the rate at the same time of the previous ``days``
  periods (a day by default), their median per instant — the profile — scaled by the
  level the load shows now, the median over the last ``level_s`` seconds of the
  observed rate's ratio to the profile (a busier day than usual keeps its surplus; a
  burst of minutes, which no history foretells, does not raise the level for the hour
  after it);
* **trend** (without one): the least-squares line through the last ``level_s``
  seconds' rates, extrapolated over the horizon (Holt's linear trend, without its
  smoothing state).

Pure: no clock, no I/O; every time is passed in, and nothing at or after ``now`` is
read (:func:`forecast_rate` drops observations after ``now`` and history from ``now``
on). A few lines of numpy do the work: a seasonal-naive profile with a level is what
the forecasting libraries' baselines compute, and it runs at every watch sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

__all__ = ["DAY_S", "Forecast", "RateHistory", "forecast_rate"]

#: the season of the loads streamscale replays: a day
DAY_S = 86_400.0


@dataclass(frozen=True)
class RateHistory:
    """A load's past on the forecaster's clock: ``values[i]`` holds from ``times[i]``
    (seconds, increasing) to the next time; any unit (only ratios are used).

    >>> h = RateHistory((0.0, 10.0, 20.0), (1.0, 3.0, 2.0))
    >>> h.at(np.array([-1.0, 0.0, 15.0, 25.0])).tolist()
    [nan, 1.0, 3.0, 2.0]
    >>> h.before(15.0).times
    (0.0, 10.0)
    """

    times: tuple[float, ...]
    values: tuple[float, ...]

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[tuple[datetime, float]],
        *,
        origin: datetime,
        scale: float = 1.0,
        at_s: float = 0.0,
    ) -> RateHistory:
        """Trace rows (``timestamp, value``) on a replay's clock: ``origin`` at second
        ``at_s``, ``scale`` trace seconds per second of the clock (1: the trace's own time).

        >>> from datetime import datetime
        >>> rows = [(datetime(2015, 1, 1, 0, 0), 1.0), (datetime(2015, 1, 1, 1, 0), 2.0)]
        >>> RateHistory.from_rows(rows, origin=datetime(2015, 1, 1, 1), scale=60.0, at_s=30.0)
        RateHistory(times=(-30.0, 30.0), values=(1.0, 2.0))
        """
        o = _epoch(origin)
        return cls(
            tuple(at_s + (_epoch(t) - o) / scale for t, _ in rows),
            tuple(float(v) for _, v in rows),
        )

    def at(self, t: np.ndarray) -> np.ndarray:
        """The value in force at each of ``t`` (NaN before the first time)."""
        if not self.times:
            return np.full(np.shape(t), np.nan)
        i = np.searchsorted(np.asarray(self.times), t, side="right") - 1
        v = np.asarray(self.values, dtype=float)[np.clip(i, 0, None)]
        return np.where(i >= 0, v, np.nan)

    def before(self, t: float) -> RateHistory:
        """The rows that start before ``t``."""
        n = int(np.searchsorted(np.asarray(self.times), t, side="left"))
        return RateHistory(self.times[:n], self.values[:n])


def _epoch(t: datetime) -> float:
    """Seconds since the epoch, a naive timestamp read as UTC (the trace format's)."""
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True)
class Forecast:
    """The offered rate expected over the horizon: its ``peak`` and ``low``, the level
    the seasonal profile was scaled by (1: none), and the ``method`` used."""

    peak: float
    low: float
    level: float
    method: str


def _profile(history: RateHistory, t: np.ndarray, *, period_s: float, days: int) -> np.ndarray:
    """The median of the history at ``t − k × period_s``, ``k = 1..days`` (NaN where none)."""
    lags = np.arange(1, days + 1, dtype=float)[:, None] * period_s
    past = history.at(np.asarray(t, dtype=float)[None, :] - lags)
    out = np.full(past.shape[1], np.nan)
    ok = ~np.all(np.isnan(past), axis=0)
    out[ok] = np.nanmedian(past[:, ok], axis=0)
    return out


def _trend(obs_t: np.ndarray, obs_r: np.ndarray, now: float, horizon_s: float) -> Forecast:
    """The least-squares line through the observations, read at ``now`` and at the
    horizon's end (their mean, with fewer than three or all at one instant)."""
    level, slope = float(np.mean(obs_r)), 0.0
    if len(obs_t) >= 3 and np.ptp(obs_t) > 0:
        slope, level = (float(x) for x in np.polyfit(obs_t - now, obs_r, 1))
    ends = [level, level + slope * horizon_s]
    return Forecast(max(0.0, *ends), max(0.0, min(ends)), 1.0, "trend")


def forecast_rate(
    observed: Sequence[tuple[float, float]],
    now: float,
    horizon_s: float,
    *,
    history: RateHistory | None = None,
    period_s: float = DAY_S,
    days: int = 7,
    level_s: float = 3600.0,
    step_s: float | None = None,
) -> Forecast:
    """The offered rate over ``[now, now + horizon_s]``, from the past alone.

    Parameters
    ----------
    observed
        ``(time, rate)`` samples of the offered rate; those after ``now`` are ignored.
    now, horizon_s
        The forecaster's clock and how far ahead to look (a start-up plus a trigger).
    history
        Earlier periods of the same load on the same clock (any unit); only its rows
        before ``now`` are read. Without it (or with no row a period back), the trend.
    period_s, days
        The season (a day) and how many past seasons the profile takes the median of.
    level_s
        Seconds of observations the level (seasonal) or the mean and slope (trend) use.
    step_s
        The grid the horizon is read on (default: a twentieth of it).

    Returns
    -------
    Forecast
        Zero rates and method ``"none"`` when nothing was observed.

    Examples
    --------
    A daily load that rises from 100 to 300 at 09:00 every day, observed at 150 — half as
    busy again as usual — at 08:58: with a 5-minute horizon the rise is seen coming.

    >>> day = DAY_S
    >>> times = tuple(d * day + h for d in range(7) for h in (0.0, 9 * 3600.0))
    >>> hist = RateHistory(times, (100.0, 300.0) * 7)
    >>> now = 7 * day + 9 * 3600.0 - 120.0
    >>> f = forecast_rate([(now - 600.0, 150.0), (now, 150.0)], now, 300.0, history=hist)
    >>> f.method, round(f.peak), round(f.low), f.level
    ('seasonal', 450, 150, 1.5)

    Without the history, the trend of what was seen: flat, so no rise.

    >>> forecast_rate([(now - 600.0, 150.0), (now, 150.0)], now, 300.0).peak
    150.0
    """
    obs = [(t, r) for t, r in observed if t <= now and now - t <= level_s and math.isfinite(r)]
    if not obs:
        return Forecast(0.0, 0.0, 1.0, "none")
    obs_t = np.array([t for t, _ in obs], dtype=float)
    obs_r = np.array([r for _, r in obs], dtype=float)
    past = history.before(now) if history is not None else None
    if past is None or not past.times:
        return _trend(obs_t, obs_r, now, horizon_s)
    step = step_s if step_s else max(horizon_s / 20.0, 1e-6)
    ahead = now + np.arange(0.0, horizon_s + step / 2, step)
    prof_ahead = _profile(past, ahead, period_s=period_s, days=days)
    prof_seen = _profile(past, obs_t, period_s=period_s, days=days)
    seen = ~np.isnan(prof_seen)
    if np.all(np.isnan(prof_ahead)) or not np.any(prof_seen[seen] > 0):
        return _trend(obs_t, obs_r, now, horizon_s)
    ok = seen & (prof_seen > 0)
    level = float(np.median(obs_r[ok] / prof_seen[ok]))
    rates = level * prof_ahead[~np.isnan(prof_ahead)]
    return Forecast(float(np.max(rates)), float(np.min(rates)), level, "seasonal")
