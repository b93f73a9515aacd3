"""The forecaster: a daily rise seen a start-up ahead, and nothing read past the clock."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.control.forecast import DAY_S, RateHistory, forecast_rate

STEP = 300.0  # a 5-minute trace


def _diurnal(days: int, *, rise_h: float = 9.0, low: float = 100.0, high: float = 400.0,
             noise: float = 0.0, seed: int = 0, step: bool = False) -> RateHistory:  # fmt: skip
    """``days`` of a load that rises from ``low`` to ``high`` over the hour from ``rise_h``
    (``step``: at once) and falls back at 18:00, with multiplicative noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, days * DAY_S, STEP)
    h = (t % DAY_S) / 3600.0
    up = h >= rise_h if step else np.clip(h - rise_h, 0.0, 1.0)
    ramp = up * (h < 18.0)
    v = (low + (high - low) * ramp) * (1.0 + noise * rng.standard_normal(len(t)))
    return RateHistory(tuple(t), tuple(np.maximum(v, 0.0)))


def test_a_known_daily_rise_is_predicted_a_start_up_ahead() -> None:
    # seven days of a load that steps from 100 to 400 at 09:00 (5 % noise); on the
    # eighth the horizon is a start-up (60 s) plus a trigger (120 s)
    hist = _diurnal(7, noise=0.05, step=True)
    day8 = 7 * DAY_S
    for now, rise_seen in ((day8 + 9 * 3600.0 - 170.0, True), (day8 + 9 * 3600.0 - 190.0, False)):
        seen = [(now - 600.0 + 60.0 * i, 100.0) for i in range(11)]  # still the base
        f = forecast_rate(seen, now, 180.0, history=hist)
        assert f.method == "seasonal" and math.isclose(f.level, 1.0, rel_tol=0.1)
        # 170 s before the step the horizon reaches it: 400 t/s, nothing of it observed
        # yet; 190 s before, it does not: no executor is asked for early
        assert (f.peak > 350.0) is rise_seen and f.low < 110.0
    # without the history, the trend of the rate seen: flat before the rise, no rise
    assert math.isclose(forecast_rate(seen, now, 180.0).peak, 100.0)


def test_a_busier_day_keeps_its_surplus() -> None:
    hist = _diurnal(7)
    now = 7 * DAY_S + 12 * 3600.0
    seen = [(now - 600.0 + 60.0 * i, 600.0) for i in range(11)]  # 1.5 × the usual 400
    f = forecast_rate(seen, now, 180.0, history=hist)
    assert math.isclose(f.level, 1.5, rel_tol=1e-9) and math.isclose(f.peak, 600.0)


def test_no_history_a_period_back_falls_back_to_the_trend() -> None:
    hist = RateHistory((0.0,), (5.0,))
    seen = [(10.0 * i, 100.0 + 10.0 * i) for i in range(7)]  # +1 t/s per second
    f = forecast_rate(seen, 60.0, 30.0, history=hist.before(0.0))
    # the line through the rates reads 160 t/s now and 190 t/s at the horizon's end
    assert f.method == "trend"
    assert math.isclose(f.peak, 190.0) and math.isclose(f.low, 160.0)
    assert forecast_rate([], 60.0, 30.0).method == "none"


@settings(max_examples=60, deadline=None)
@given(
    now=st.floats(7 * DAY_S, 8 * DAY_S - 3600.0),
    horizon=st.floats(30.0, 1800.0),
    future=st.floats(0.0, 1e4),
    seed=st.integers(0, 2**16),
)
def test_nothing_at_or_after_the_clock_is_read(
    now: float, horizon: float, future: float, seed: int
) -> None:
    """Rows of the history and observations at or after ``now`` — the replayed future —
    may be anything: the forecast is the same as without them."""
    hist = _diurnal(8, noise=0.1, seed=seed)  # eight days: the last one is the future
    rng = np.random.default_rng(seed)
    seen = [(now - 3600.0 + 60.0 * i, float(100 + 50 * rng.random())) for i in range(61)]
    times = np.asarray(hist.times)
    spoiled = RateHistory(hist.times, tuple(np.where(times >= now, future, hist.values)))
    more = [*seen, *((now + 60.0 * i, future) for i in range(1, 30))]
    a = forecast_rate(seen, now, horizon, history=hist.before(now))
    b = forecast_rate(more, now, horizon, history=spoiled)
    assert a == b
