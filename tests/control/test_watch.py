"""The watch's decisions between batch boundaries: hand-checked event sequences."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import pytest

from streamscale.control.watch import (
    Sample,
    WatchConfig,
    WatchState,
    WatchView,
    offered_rate,
    watch_step,
)
from streamscale.errors import StreamscaleError

VIEW = WatchView(service_rate=50.0, cores_alive=4, executors_requested=2,
                 cores_per_executor=2, max_executors=8, startup_s=4.0, trigger_s=2.0)  # fmt: skip


DEFAULT = WatchConfig()
#: the sizing's floor as the examples derive it: θ = 1 (no margin), 90 % utilization
FLOOR = {"max_utilization": 0.9, "theta": 1.0, "catch_up_form": "drain"}
Rate = Callable[[float], float]


def _run(
    offered: Rate, admitted: Rate, *, view: WatchView = VIEW, config: WatchConfig = DEFAULT,
    until: float = 20.0, dt: float = 0.5,
) -> list[tuple[float, int]]:  # fmt: skip
    """Feed samples every ``dt``; requests are carried out (the view's request grows)."""
    s, asked = WatchState(), []
    t = 0.0
    while t <= until + 1e-9:
        s, r = watch_step(s, Sample(t, offered(t), admitted(t)), view, config=config,
                          latency_target_s=2.0, catch_up_s=5.0, **FLOOR)  # fmt: skip
        if r is not None:
            asked.append((t, r.executors))
            view = replace(view, executors_requested=r.executors)
        t += dt
    return asked


def test_a_constant_rate_never_asks_and_never_flaps() -> None:
    # 100 t/s, batches admit every 2 s what arrived: at most one trigger of arrivals waits
    asked = _run(lambda t: 100 * t, lambda t: 100 * (2 * (t // 2)))
    assert asked == []


def test_what_arrives_during_a_long_batch_is_not_a_backlog() -> None:
    # 100 t/s and 6 s batches: the running batch admitted what arrived before it started,
    # and up to 600 arrive while it runs; that is the next batch, so nothing is asked
    def sample(t: float, *, known: bool) -> Sample:
        start = 6 * (t // 6)
        return Sample(t, 100 * t, 100 * start, (t - start) if known else 0.0)

    def asks(*, known: bool) -> list[tuple[float, int]]:
        s, out = WatchState(), []
        for i in range(60):
            t = 6.0 + i * 0.25
            s, r = watch_step(s, sample(t, known=known), VIEW, config=DEFAULT,
                              latency_target_s=2.0, catch_up_s=2.0, **FLOOR)  # fmt: skip
            if r is not None:
                out.append((t, r.executors))
        return out

    assert asks(known=True) == []
    # Without knowing how long the batch has run, all but one interval's arrivals look
    # like a backlog: d s into a batch, 100 x d - 100 x 2 s wait. The 2 executors
    # requested serve 2 x 2 x 50 = 200 t/s, 100 spare, which drain 200 within the 2 s
    # catch-up: the watch acts once d > 4 (backlog > 200). The rate is steady, so no
    # growth while executors start; λ = 100 + backlog / 2 s and ⌈λ / 50 / 0.9⌉ cores. A
    # need is asked for on the second sample in a row that shows it, and a request starts
    # the count again (the view is not updated here, so the need persists):
    # d = 4.25 (225 waiting, λ 212.5, 5 cores, 3 executors) shows it; d = 4.5 asks:
    # λ 225 -> 5 cores -> 3 executors; d = 5.0 asks: λ 250 -> 6 cores -> 3; d = 5.5 asks:
    # λ 275 -> 7 cores -> 4 (the count before). Batches start at 6, 12 and 18 s; the last
    # is 2.75 s old at the end (t = 20.75).
    per_batch = [(4.5, 3), (5.0, 3), (5.5, 4)]
    assert asks(known=False) == [(b + d, n) for b in (6.0, 12.0) for d, n in per_batch]


def test_a_step_surge_gets_one_request_of_the_needed_size() -> None:
    # 100 -> 300 t/s at t = 4; the running batch admitted up to t = 4 and runs on
    def offered(t: float) -> float:
        return 100 * t if t <= 4 else 400 + 300 * (t - 4)

    whole = WatchConfig(growth_horizon="startup")
    asked = _run(offered, lambda t: min(offered(t), 400), config=whole)
    # two samples show the step (4.5 s, 5.0 s); the backlog beyond one trigger at 5.0 s is
    # 700 - 400 - 600 = 0, so λ = 300 + (300 - 200) x 4 / 5 = 380 -> 9 cores -> 5 executors;
    # the backlog then grows (the batch admits nothing): later samples ask for more once
    assert asked[0] == (5.0, 5)
    assert [n for _, n in asked] == sorted({n for _, n in asked})  # only ever more


def test_an_excess_is_expected_to_last_as_long_as_it_has() -> None:
    # the same step, with the growth over the start-up taken for as long as the excess has
    # lasted: at 5.0 s (over since 4.0 s, the sample before the first to show it) 1 s,
    # λ = 300 + 100 x 1 / 5 = 320 -> ⌈320 / 50 / 0.9⌉ = 8 cores -> 4 executors, whose
    # 400 t/s cover the step: no more requests while the backlog beyond a trigger is nil
    def step(t: float) -> float:
        return 100 * t if t <= 4 else 400 + 300 * (t - 4)

    def admitted(t: float) -> float:  # batches of 2 s admit what arrived before them
        return step(2 * (t // 2))

    assert _run(step, admitted) == [(5.0, 4)]
    assert _run(step, admitted, config=WatchConfig(growth_horizon="startup"))[0] == (5.0, 5)

    # a 1 s burst to 345 t/s above a base of 100 on 2 executors of a 20 s start-up, seen
    # at 4.5 s and confirmed at 5.0 s: the whole start-up's growth, (345 - 200) x 20 / 5 s
    # = 580 t/s more, asks for all 8 executors; as long as it has lasted (1 s), λ = 345 +
    # 145 x 1 / 5 = 374 -> ⌈374 / 50 / 0.9⌉ = 9 cores -> 5 executors
    def burst(t: float) -> float:
        return 100 * t + (245 * min(max(t - 4, 0.0), 1.0))

    def admitted_b(t: float) -> float:
        return burst(2 * (t // 2))

    slow = replace(VIEW, startup_s=20.0)
    whole = _run(burst, admitted_b, view=slow, config=WatchConfig(growth_horizon="startup"))
    assert [n for _, n in whole] == [8]
    assert [n for _, n in _run(burst, admitted_b, view=slow)] == [5]


def test_a_single_late_read_buys_nothing() -> None:
    # the end offsets read at 5.5 s are stale (still 5.0 s's), so 6.0 s sees a burst
    def offered(t: float) -> float:
        return 100 * (5.0 if t == 5.5 else t)

    asked = _run(offered, lambda t: 100 * (2 * (t // 2)))
    assert asked == []
    # ... nor does the boundary get more through the watch's hold: a need one sample shows
    # is held at the request (2), not at its own size (a read 0.5 s late, then 400 t/s
    # over 0.5 s, which the sizing answers with 7 executors)
    s, needs, sized = WatchState(), [], []
    for t, avail in ((5.0, 500.0), (5.5, 500.0), (6.0, 700.0), (6.5, 750.0)):
        s, r = watch_step(s, Sample(t, avail, 400.0), VIEW, config=DEFAULT,
                          latency_target_s=2.0, catch_up_s=5.0, **FLOOR)  # fmt: skip
        assert r is None
        needs.append(s.need)
        sized.append(s.pending)
    assert max(sized) > VIEW.executors_requested  # it did size a need at 6.0 s ...
    assert max(needs) == VIEW.executors_requested  # ... and held no more than the request


def test_the_watch_only_asks_for_more_and_stops_at_the_cluster() -> None:
    asked = _run(lambda t: 5000 * t, lambda t: 0.0)
    assert asked and asked[-1][1] == 8  # max_executors
    assert all(a[1] < b[1] for a, b in itertools.pairwise(asked))


def test_off_without_a_service_rate_or_when_disabled() -> None:
    assert _run(lambda t: 5000 * t, lambda t: 0.0, view=replace(VIEW, service_rate=None)) == []
    assert _run(lambda t: 5000 * t, lambda t: 0.0, config=WatchConfig(mid_batch=False)) == []


def test_standby_and_proactive() -> None:
    def offered(t: float) -> float:  # a ramp: 100 t/s plus 40 t/s more every second
        return 100 * t + 20 * t * t

    plain = _run(offered, lambda t: offered(t) - 50, until=6.0)
    ahead = _run(offered, lambda t: offered(t) - 50, until=6.0,
                 config=WatchConfig(proactive=True))  # fmt: skip
    assert ahead and (not plain or ahead[0][0] <= plain[0][0])
    warm = _run(lambda t: 300 * t, lambda t: 300 * t - 100, config=WatchConfig(standby_executors=1))
    cold = _run(lambda t: 300 * t, lambda t: 300 * t - 100)
    assert warm[-1][1] == cold[-1][1] + 1


def test_offered_rate_and_settings() -> None:
    assert offered_rate((Sample(0.0, 0.0, 0.0),)) is None
    assert offered_rate((Sample(1.0, 10.0, 0.0), Sample(3.0, 110.0, 0.0))) == 50.0
    assert WatchConfig().period_s(2.0) == 0.5
    assert WatchConfig(watch_period_s=0.2).period_s(2.0) == 0.2
    with pytest.raises(StreamscaleError, match="admission"):
        WatchConfig.from_params({"admission": -1})


def test_a_steady_load_within_the_requested_capacity_is_left_to_the_boundary() -> None:
    # 2 executors × 2 cores × 26 t/s = 104 t/s against 100 offered: the sizing at 90 %
    # utilization wants ⌈100 / 26 / 0.9⌉ = 5 cores (3 executors), but the requested ones
    # keep up, so the watch asks nothing and holds no more than the 2 requested
    view = replace(VIEW, service_rate=26.0)
    assert _run(lambda t: 100 * t, lambda t: 100 * (2 * (t // 2)), view=view) == []
    s = WatchState()
    for t in (0.0, 0.5, 1.0, 1.5):
        s, r = watch_step(s, Sample(t, 100 * t, 100 * t), view, config=DEFAULT,
                          latency_target_s=2.0, catch_up_s=5.0, **FLOOR)  # fmt: skip
        assert r is None
    assert s.need == 2
    # the same executors at 110 t/s cannot keep up: asked at the second sample showing it
    assert _run(lambda t: 110 * t, lambda t: 110 * (2 * (t // 2)), view=view)[0] == (1.0, 3)
    # a backlog their 4 t/s of spare capacity would not drain in 5 s is asked for too
    asked = _run(lambda t: 100 * t + 300, lambda t: 100 * (2 * (t // 2)), view=view)
    assert asked and asked[0][0] == 1.0


def test_the_start_up_sized_with_is_the_longest_observed() -> None:
    from streamscale.control.watch import learned_startup_s

    assert learned_startup_s([], 20.0) == 20.0
    assert learned_startup_s([3.6], 20.0) == 3.6  # observed beats the prior, either way
    # four started together took longer than one alone: the surge is sized for the four
    assert learned_startup_s([3.6, 10.6, 9.2, 4.0], 20.0) == 10.6


def test_a_longer_start_up_asks_for_more_in_the_one_request() -> None:
    # 300 t/s on 4 cores of 36 t/s: 156 t/s pile up while executors start. Latency form,
    # catch-up 5 s: with 10 s to start, 1,560 queue ⇒ λ = max(300, 312) = 312 ⇒
    # ⌈1.2 · 312 / 36 / 0.9⌉ = 12 cores; with 20 s, 3,120 ⇒ λ = 624 ⇒ capped at 16
    from streamscale.planning.allocation.surge import surge_cores

    def cores(startup: float) -> int:
        return surge_cores(300.0, 0.0, 36.0, latency_target_s=2.0, catch_up_s=5.0,
                           startup_s=startup, current_cores=4, max_cores=16, theta=1.2,
                           form="latency", max_utilization=0.9)  # fmt: skip

    assert (cores(10.0), cores(20.0)) == (12, 16)


def test_a_request_is_held_however_the_samples_after_it_size_the_load() -> None:
    from streamscale.control.watch import Floors

    # the watch asks for 8 at t = 76 (held 25 s: catch-up 5 s + start-up 20 s); the next
    # samples size 8 (held 1.5 s each), then 6 once the rate read jitters: the boundary
    # at t = 80 keeps the 8 asked for, and at t = 102 only the latest sizing
    f = Floors().request(8, until=101.0)
    for t in (76.5, 77.0):
        f = f.need(8, until=t + 1.5)
    f = f.need(6, until=79.0 + 1.5)
    assert [f.at(t) for t in (77.5, 80.0, 100.9, 101.0)] == [8, 8, 8, 0]
    f = f.need(3, until=101.5)
    assert (f.at(100.0), f.at(101.2), f.at(101.6)) == (8, 3, 0)
    # a later, larger request replaces the first one's count and hold
    f = f.request(10, until=120.0)
    assert (f.at(110.0), f.at(121.0)) == (10, 0)


def test_the_forecast_asks_for_executors_a_start_up_before_the_rise() -> None:
    """Flat 100 t/s on 2 of 8 executors (2 cores, 50 t/s a core): the reactive watch asks
    for nothing; a forecast peak of 300 t/s asks at once for what serves it at 90 %, and
    keeps it as the boundary's floor (the need) while the forecast holds."""
    from streamscale.control.watch import forecast_executors

    cfg = WatchConfig(rate_window_s=1.0)
    state, asked = WatchState(), []
    for peak in (None, None, 300.0, 300.0):
        view = WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0, forecast_peak=peak)
        t = 0.25 * len(asked)
        state, r = watch_step(state, Sample(t, 100.0 * t, 100.0 * t), view, config=cfg,
                              latency_target_s=2.0, catch_up_s=5.0, max_utilization=0.9,
                              theta=1.0, catch_up_form="drain")  # fmt: skip
        asked.append(None if r is None else r.executors)
    # 300 / (50 × 0.9) = 6.7 cores: 4 executors, asked for at the first forecast sample
    assert asked[:3] == [None, None, 4] and state.need == 4
    assert forecast_executors(WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0), max_utilization=0.9) == 0
    # never beyond the cluster
    big = WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0, forecast_peak=1e6)
    assert forecast_executors(big, max_utilization=0.9) == 8
