"""Seeing a surge as it arrives: decisions between batch boundaries, from the source.

The batch-boundary controller (:mod:`streamscale.control.controller`) decides once per
finished batch, from what the batch measured. A surge makes batches long, so each such
decision waits for the slow batch it is trying to fix. The watch decides *while a batch
runs*: every ``watch_period_s`` the shell reads how many tuples the source offers (its
end offsets, or the generator's schedule through the same interface) and how many the
running batch admitted, and :func:`watch_step` answers with a request for executors when
the offered rate and the backlog need more cores than are requested — in one step, to
the size :func:`~streamscale.planning.allocation.surge.surge_cores` gives. The watch only
ever asks for *more*: shards still move at batch boundaries (state safety unchanged) and
scale-in stays with the boundary controller and its delay (hysteresis).

Pure: no clock, no I/O; the shell passes the time in every :class:`Sample`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from streamscale.planning.allocation.surge import surge_cores
from streamscale.settings import Schema, Setting

__all__ = [
    "WATCH_SETTINGS",
    "Floors",
    "Request",
    "Sample",
    "WatchConfig",
    "WatchState",
    "WatchView",
    "learned_startup_s",
    "offered_rate",
    "short_of_capacity",
    "watch_step",
]

#: The watch's settings, declared once.
WATCH_SETTINGS = Schema(
    "watch",
    Setting(
        "mid_batch",
        bool,
        True,
        "request executors while a batch runs when the offered load needs more",
    ),
    Setting(
        "watch_period_s",
        float,
        None,
        "seconds between reads of the source (default: a quarter of the trigger interval)",
        low=0.0,
        low_open=True,
    ),
    Setting(
        "rate_window_s",
        float,
        2.0,
        "seconds of source offsets the offered rate is measured over",
        low=0.0,
        low_open=True,
    ),
    Setting(
        "admission",
        float,
        1.0,
        "a batch admits at most what the live cores process in this x max(trigger, 3 x the "
        "batches' overhead), its run kept within catch_up_s (0: no limit)",
        low=0.0,
    ),
    Setting(
        "standby_executors",
        int,
        0,
        "idle executors held beyond the plan: warm capacity, billed like any executor",
        low=0,
    ),
    Setting(
        "proactive",
        bool,
        False,
        "size for the offered rate's trend extrapolated one start-up time ahead",
    ),
    Setting(
        "growth_horizon",
        str,
        "persisted",
        "how long an excess of the offered rate over the requested cores is assumed to last "
        "while new executors start: 'startup' (the whole start-up) or 'persisted' (as long "
        "as it has lasted so far, up to the start-up: a burst is not taken for a surge)",
        choices=("startup", "persisted"),
    ),
    Setting(
        "startup_s",
        float,
        20.0,
        "executor start-up time (request to ready) assumed until one was observed, then "
        "the longest of the latest observed (s)",
        low=0.0,
    ),
    Setting(
        "forecast",
        bool,
        True,
        "ask for executors a start-up before the offered rate forecast over the next "
        "start-up and trigger needs them, and keep them while it does (off: react to the "
        "rate seen)",
    ),
    Setting(
        "history",
        str,
        None,
        "a timestamp,value CSV of the same load's earlier days: the forecast's daily "
        "profile (default: the trend of the rate seen)",
    ),
    Setting(
        "history_origin",
        str,
        None,
        "the history's timestamp at second history_origin_s of the source's clock, for a "
        "replay (default: the source's clock is the wall clock, UTC)",
    ),
    Setting(
        "history_origin_s",
        float,
        0.0,
        "the second of the source's clock at which history_origin holds",
    ),
    Setting(
        "time_scale",
        float,
        1.0,
        "history seconds per second of the source's clock (a replay's compression)",
        low=0.0,
        low_open=True,
    ),
)


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """Parsed :data:`WATCH_SETTINGS` (see each setting's description); each field's
    default is the setting's."""

    mid_batch: bool = WATCH_SETTINGS["mid_batch"].default
    watch_period_s: float | None = WATCH_SETTINGS["watch_period_s"].default
    rate_window_s: float = WATCH_SETTINGS["rate_window_s"].default
    admission: float = WATCH_SETTINGS["admission"].default
    standby_executors: int = WATCH_SETTINGS["standby_executors"].default
    proactive: bool = WATCH_SETTINGS["proactive"].default
    growth_horizon: str = WATCH_SETTINGS["growth_horizon"].default
    startup_s: float = WATCH_SETTINGS["startup_s"].default
    forecast: bool = WATCH_SETTINGS["forecast"].default
    history: str | None = WATCH_SETTINGS["history"].default
    history_origin: str | None = WATCH_SETTINGS["history_origin"].default
    history_origin_s: float = WATCH_SETTINGS["history_origin_s"].default
    time_scale: float = WATCH_SETTINGS["time_scale"].default

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> WatchConfig:
        return cls(**WATCH_SETTINGS.parse(params or {}))

    def period_s(self, trigger_s: float) -> float:
        """Seconds between samples: the setting, or a quarter of the trigger interval."""
        if self.watch_period_s is not None:
            return self.watch_period_s
        return max(0.1, trigger_s / 4.0) if trigger_s > 0 else 0.25


@dataclass(frozen=True, slots=True)
class Sample:
    """What the source showed at ``now``: tuples offered so far (its end offsets), tuples
    admitted by the batches started so far (the running batch's end offset) and how long
    ago the running batch fixed that offset (``running_s``; 0: unknown)."""

    now: float
    available: float
    admitted: float
    running_s: float = 0.0


@dataclass(frozen=True, slots=True)
class WatchView:
    """The job as the shell sees it when it samples."""

    service_rate: float | None  # tuples/s per core, from the last batches' busy time
    cores_alive: int
    executors_requested: int
    cores_per_executor: int
    max_executors: int
    startup_s: float  # learned: the longest observed request-to-ready time
    trigger_s: float
    #: the offered rate forecast over the next start-up and trigger
    #: (:func:`~streamscale.control.forecast.forecast_rate`; ``None``: no forecast)
    forecast_peak: float | None = None
    #: tuples/s a core serves over the batch cycle the latency target allows (its busy
    #: rate times the cycle's headroom; ``None``: the service rate at ``max_utilization``)
    forecast_capacity: float | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """Ask the cluster manager for ``executors`` in total (more than requested now)."""

    executors: int
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WatchState:
    """The samples within the rate window (older ones dropped) and the executors the
    previous sample found needed beyond the request (0: none) — a need is acted on when
    two samples in a row show it, so one late offset read does not buy executors."""

    samples: tuple[Sample, ...] = ()
    pending: int = 0
    #: executors the latest sample sized for (0: not sized): the shell holds at least
    #: these at the boundary, so scale-in waits until the offered load no longer needs them
    need: int = 0
    #: since when (the sample before the first that showed it) the offered rate has
    #: exceeded the requested cores' capacity without a break (``None``: it does not)
    over_since: float | None = None


@dataclass(frozen=True, slots=True)
class Floors:
    """Executors the boundary keeps whatever its plan says: a mid-batch request's count
    until its hold ends (the catch-up time plus the start-up time, so the executors serve
    the backlog they were asked for), and the watch's latest sizing of the offered load,
    refreshed at every sample for a few samples. Two floors, not one: when the two were
    one, a sample sizing the same count as the request replaced the request's 25 s hold
    with its own 1.5 s, and the next boundary released two of the eight executors the
    watch had asked for a second earlier (asked again 15 s later).

    >>> f = Floors().request(8, until=25.0).need(8, until=1.5).need(6, until=3.0)
    >>> f.at(2.0), f.at(10.0), f.at(26.0)
    (8, 8, 0)
    """

    requested: int = 0
    requested_until: float = 0.0
    needed: int = 0
    needed_until: float = 0.0

    def request(self, n: int, *, until: float) -> Floors:
        """A mid-batch request for ``n`` executors, held until ``until``."""
        return replace(self, requested=max(0, int(n)), requested_until=until)

    def need(self, n: int, *, until: float) -> Floors:
        """The watch's current sizing, ``n`` executors, held until ``until``."""
        return replace(self, needed=max(0, int(n)), needed_until=until)

    def at(self, now: float) -> int:
        """The executors to keep at ``now`` (0: no floor holds)."""
        r = self.requested if now < self.requested_until else 0
        return max(r, self.needed if now < self.needed_until else 0)


def learned_startup_s(observed: Sequence[float], default: float) -> float:
    """The executor start-up time to size with: the longest observed (request to ready),
    ``default`` before any — Flink's autoscaler takes the longest tracked restart time
    the same way (``ScalingTracking.getMaxRestartTimeOrDefault``). Executors started
    together on a loaded host take longer than one alone (3.6 s for one, 9–11 s for four
    on this idle 2-core host, 15–20 s under a surge), and a request sized on a typical
    start-up fell short of the backlog that piled up meanwhile: a second and third
    request followed.

    >>> learned_startup_s([], 20.0)
    20.0
    >>> learned_startup_s([3.6, 10.6, 9.2], 20.0)
    10.6
    """
    return max(observed) if observed else default


def offered_rate(samples: tuple[Sample, ...]) -> float | None:
    """Tuples per second offered over the samples (``None``: fewer than two, or no time).

    >>> offered_rate((Sample(0.0, 100.0, 0.0), Sample(2.0, 700.0, 0.0)))
    300.0
    """
    if len(samples) < 2 or samples[-1].now <= samples[0].now:
        return None
    return (samples[-1].available - samples[0].available) / (samples[-1].now - samples[0].now)


def _trend(samples: tuple[Sample, ...]) -> float:
    """The offered rate's change per second: the later half's rate minus the earlier's."""
    mid = len(samples) // 2
    a, b = offered_rate(samples[: mid + 1]), offered_rate(samples[mid:])
    if a is None or b is None:
        return 0.0
    dt = (samples[-1].now - samples[0].now) / 2.0
    return (b - a) / dt if dt > 0 else 0.0


def short_of_capacity(rate: float, backlog: float, view: WatchView, *, catch_up_s: float) -> bool:
    """Whether the executors requested cannot keep up: the offered rate exceeds their
    capacity (``requested × cores × service rate``), or the backlog would not drain
    within ``catch_up_s`` at their spare capacity. Only then does the watch act between
    boundaries. The band between this and the sizing's ``max_utilization`` is the
    hysteresis: at a steady base load at 83 % of the requested cores' capacity, a
    service rate jittering by a few tuples/s made the watch ask for a third executor
    and the boundary release it again, every 10–20 s of a full-length surge run.

    >>> view = WatchView(26.0, 4, 2, 2, 8, 10.0, 2.0)  # 2 × 2 cores × 26 = 104 t/s
    >>> short_of_capacity(100.0, 0.0, view, catch_up_s=5.0)
    False
    >>> short_of_capacity(100.0, 40.0, view, catch_up_s=5.0)  # 4 t/s spare: 20 in 5 s
    True
    >>> short_of_capacity(300.0, 0.0, view, catch_up_s=5.0)
    True
    """
    if view.service_rate is None:
        return True
    capacity = max(0, view.executors_requested) * view.cores_per_executor * view.service_rate
    return rate > capacity or backlog > max(0.0, capacity - rate) * max(0.0, catch_up_s)


def _over_since(
    state: WatchState, samples: tuple[Sample, ...], rate: float, view: WatchView
) -> float | None:
    """When the offered rate began to exceed the requested cores' capacity without a break:
    the previous sample's time when this one is the first to show it (``None``: not
    exceeded now)."""
    if view.service_rate is None:
        return state.over_since
    capacity = max(0, view.executors_requested) * view.cores_per_executor * view.service_rate
    if rate <= capacity:
        return None
    if state.over_since is not None:
        return state.over_since
    return samples[-2].now if len(samples) >= 2 else samples[-1].now


def _growth_horizon(config: WatchConfig, view: WatchView, now: float, over: float | None) -> float:
    """Seconds the backlog is assumed to grow while new executors start: the start-up
    (``startup``), or as long as the excess has lasted so far, up to it (``persisted``: an
    excess that has lasted ``d`` seconds is expected to last about ``d`` more, the rule of
    renting before buying — a 2 s burst on a real trace replayed in minutes asked for all
    eight executors, billed for the 17 s start-up and the hold, arriving after it ended).

    >>> view = WatchView(50.0, 4, 2, 2, 8, 20.0, 2.0)
    >>> _growth_horizon(WatchConfig(growth_horizon="startup"), view, 10.0, 9.0)
    20.0
    >>> _growth_horizon(WatchConfig(), view, 10.0, 9.0), _growth_horizon(WatchConfig(), view, 40.0, 9.0)
    (1.0, 20.0)
    """
    if config.growth_horizon == "startup":
        return view.startup_s
    lasted = 0.0 if over is None else max(0.0, now - over)
    return min(view.startup_s, lasted)


def watch_step(
    state: WatchState,
    sample: Sample,
    view: WatchView,
    *,
    config: WatchConfig,
    latency_target_s: float,
    catch_up_s: float,
    max_utilization: float,
    theta: float,
    catch_up_form: str,
) -> tuple[WatchState, Request | None]:
    """One sample: the new state and a request for more executors, if the load needs one.

    The backlog counted is what waits beyond the arrivals since the running batch
    started, or one trigger interval of them if that is longer (what arrives while a
    batch runs is the next batch, not a backlog: with 6 s batches at a steady base load
    counting only one interval of it as the next batch's asked for 8 executors where 2
    were needed), as the boundary collector counts it. ``proactive`` sizes for ``rate + trend × startup_s``.
    ``latency_target_s``, ``catch_up_s``, ``max_utilization``, ``theta`` and
    ``catch_up_form`` are the boundary planner's settings (``latency_target_ms`` / 1000 and
    the others of :data:`streamscale.planning.adapters.elasticutor.SETTINGS`), passed in.

    Examples
    --------
    Base load 100 tuples/s on 2 executors of 2 cores (50 tuples/s per core, 4 s to
    start an executor); at t = 2 s the rate steps to 300 tuples/s while the running batch
    admitted 150. Two samples show the step (2.25 s, 2.5 s), and one request follows,
    straight to the size that also drains what piles up while executors start, for the
    whole start-up (``growth_horizon="startup"``), with θ = 1 (no margin) and a 90 %
    utilization floor:
    λ = 300 + (300 − 4 × 50) × 4 s / 5 s = 380 ⇒ ⌈380 / 50 / 0.9⌉ = 9 cores ⇒ 5 executors;
    for as long as the excess has lasted (``"persisted"``, 0.5 s at 2.5 s):
    λ = 300 + 100 × 0.5 / 5 = 310 ⇒ 7 cores ⇒ 4 executors, whose 400 t/s cover the step.

    >>> from dataclasses import replace
    >>> def asked(cfg):
    ...     view, s, out = WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0), WatchState(), []
    ...     for i in range(17):
    ...         t = i * 0.25
    ...         offered = 100 * t if t <= 2 else 200 + 300 * (t - 2)
    ...         s, r = watch_step(s, Sample(t, offered, min(offered, 150)), view, config=cfg,
    ...                           latency_target_s=2.0, catch_up_s=5.0, max_utilization=0.9,
    ...                           theta=1.0, catch_up_form="drain")
    ...         if r is not None:
    ...             out.append((t, r.executors, r.reason))
    ...             view = replace(view, executors_requested=r.executors)
    ...     return out
    >>> asked(WatchConfig(rate_window_s=1.0, growth_horizon="startup"))
    [(2.5, 5, 'offered 300 t/s, backlog 0 beyond one trigger: 9 cores')]
    >>> asked(WatchConfig(rate_window_s=1.0))
    [(2.5, 4, 'offered 300 t/s, backlog 0 beyond one trigger: 7 cores')]
    """
    new, request = _react(
        state, sample, view, config=config, latency_target_s=latency_target_s,
        catch_up_s=catch_up_s, max_utilization=max_utilization, theta=theta,
        catch_up_form=catch_up_form,
    )  # fmt: skip
    return _foresee(new, request, view, max_utilization=max_utilization)


def forecast_executors(view: WatchView, *, max_utilization: float) -> int:
    """Executors whose cores serve the forecast peak: at ``forecast_capacity`` tuples/s a
    core when the view has it (the peak over the horizon is the margin), else at the
    service rate times ``max_utilization`` (0: no forecast, or no rate measured yet).

    >>> view = WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0, forecast_peak=300.0)
    >>> forecast_executors(view, max_utilization=0.9)  # 300 / 45 = 6.7 cores
    4
    >>> forecast_executors(replace(view, forecast_capacity=50.0), max_utilization=0.9)
    3
    """
    peak, mu = view.forecast_peak, view.service_rate
    per_core = view.forecast_capacity
    if per_core is None and mu is not None:
        per_core = mu * max_utilization
    if peak is None or per_core is None or not per_core > 0 or not peak > 0:
        return 0
    cores = max(1, math.ceil(peak / per_core - 1e-9))
    return min(view.max_executors, math.ceil(cores / view.cores_per_executor))


def _foresee(
    new: WatchState, request: Request | None, view: WatchView, *, max_utilization: float
) -> tuple[WatchState, Request | None]:
    """The reactive answer with the forecast laid over it: the executors the forecast
    peak needs are held at the boundary (the need), and asked for at once when more than
    requested — a start-up before the rise, not a trigger after it."""
    ahead = forecast_executors(view, max_utilization=max_utilization)
    if ahead == 0:
        return new, request
    new = replace(new, need=max(new.need, ahead))
    if ahead <= view.executors_requested or (request is not None and request.executors >= ahead):
        return new, request
    reason = f"forecast {view.forecast_peak:.0f} t/s within the start-up and a trigger"
    return new, Request(ahead, reason, {"forecast_peak": view.forecast_peak, "executors": ahead})


def _react(
    state: WatchState,
    sample: Sample,
    view: WatchView,
    *,
    config: WatchConfig,
    latency_target_s: float,
    catch_up_s: float,
    max_utilization: float,
    theta: float,
    catch_up_form: str,
) -> tuple[WatchState, Request | None]:
    """The reactive answer: :func:`watch_step` without the forecast."""
    keep = tuple(s for s in state.samples if s.now >= sample.now - config.rate_window_s)
    new = WatchState((*keep, sample), over_since=state.over_since)
    # the rate since the previous sample sizes the step (a window average would ramp up
    # with the surge and ask several times); the window's rate is reported beside it
    rate = offered_rate(new.samples[-2:])
    if not config.mid_batch or rate is None or rate < 0 or view.service_rate is None:
        return new, None
    over = _over_since(state, new.samples, rate, view)
    horizon = _growth_horizon(config, view, sample.now, over)
    # what arrived since the running batch fixed its end offset is the next batch
    since = max(view.trigger_s, sample.running_s)
    backlog = max(0.0, sample.available - sample.admitted - rate * since)
    sized = rate + (_trend(new.samples) * view.startup_s if config.proactive else 0.0)
    max_cores = view.max_executors * view.cores_per_executor
    cores = surge_cores(
        max(0.0, sized),
        backlog,
        view.service_rate,
        latency_target_s=latency_target_s,
        catch_up_s=catch_up_s,
        startup_s=horizon,
        current_cores=view.cores_alive,
        max_cores=max_cores,
        max_utilization=max_utilization,
        theta=theta,
        form=catch_up_form,
    )
    executors = min(
        view.max_executors,
        math.ceil(cores / view.cores_per_executor) + config.standby_executors,
    )
    if not short_of_capacity(max(rate, sized), backlog, view, catch_up_s=catch_up_s):
        # a load between the sizing's utilization and the requested cores' capacity is
        # the boundary's to plan: the need never exceeds the request, so the hold keeps
        # executors (scale-in waits) but never adds one
        need = min(executors, view.executors_requested)
        return WatchState(new.samples, need=need, over_since=over), None
    new = WatchState(new.samples, need=executors, over_since=over)
    if executors <= view.executors_requested:
        return new, None
    if state.pending <= view.executors_requested:  # first sample showing the need
        # not confirmed: the boundary holds the request, no more — a need above it made
        # the boundary scale up on one sample, with the need's 1.5 s hold instead of a
        # request's, and the next boundary released two of the eight it had asked for
        return WatchState(new.samples, executors, view.executors_requested, over), None
    figures = {"offered_rate": rate, "offered_rate_window": offered_rate(new.samples),
               "backlog": backlog, "cores": cores, "startup_s": view.startup_s,
               "growth_s": horizon, "sized_rate": sized}  # fmt: skip
    reason = f"offered {rate:.0f} t/s, backlog {backlog:.0f} beyond one trigger: {cores} cores"
    return new, Request(executors, reason, figures)
