"""Real traffic: the surge scenario's harness with its offered load read from a trace.

The micro-benchmark (generator → keyed calculator, per-tuple cost *waited* so that a
loopback cluster's task slots emulate cores) offers tuples at the rate of a real load
trace (:mod:`~streamscale.runtime.spark.sources.rate_trace`: a ``timestamp,value``
CSV, its window's 99th percentile at the peak rate, replayed in a stated number of
minutes). A warm-up at the trace's first rate comes first and is not scored; every
policy of :mod:`~streamscale.scenarios.surge` runs on it and is scored by the same
instrument (:mod:`~streamscale.scenarios.surge_score`).

:func:`oracle` is the floor: the fewest whole executors per interval with perfect
foresight, each requested one start-up ahead of the interval that needs it and billed
from that request.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.runtime.spark.sources.rate_trace import (
    RateTrace,
    TraceWindow,
    parse_window,
    read_rate_trace,
    read_trace_rows,
)
from streamscale.scenarios.deployment import Deployment, day_window
from streamscale.scenarios.excess import Held
from streamscale.scenarios.surge import SurgeConfig

__all__ = [
    "Oracle",
    "TrafficConfig",
    "held_of",
    "measure_startup",
    "observed_startup",
    "oracle",
    "write_history",
]


@dataclass(frozen=True)
class TrafficConfig(SurgeConfig):
    """The surge scenario's settings with a trace's offered load (:meth:`from_trace`).

    ``base_rate`` is the trace's median rate and ``peak_factor`` its largest over it, so
    ``static-peak`` is sized for the window's clipped maximum and ``static-base`` for the
    median; ``phase_s`` is the span after the steepest rise in which requests count as
    the reaction to it.
    """

    load: RateTrace | None = field(default=None, compare=False)
    #: the real deployment the replay stands for (``None``: a bare replay)
    deployment: Deployment | None = field(default=None, compare=False)
    #: the load's earlier days (a ``timestamp,value`` CSV, all before the window): the
    #: forecast's history
    history: str | None = None

    @classmethod
    def for_deployment(
        cls,
        path: str,
        deployment: Deployment,
        *,
        quick: bool = False,
        window: str | None = None,
        hours: float | None = None,
        minutes: float | None = None,
        history: str | None = None,
        history_out: Path | None = None,
        peak_rate: float = 300.0,
        **settings: Any,
    ) -> TrafficConfig:
        """The replay of ``path`` standing for ``deployment``: its window (``window``, else
        :func:`~streamscale.scenarios.deployment.day_window` of ``hours``, default the
        deployment's), replayed at the deployment's
        compression (or in ``minutes``, every constant rescaled with it), its trigger,
        latency target and emulated start-up; the rows of ``history`` (default: the trace
        itself) before the window written to ``history_out`` for the forecast."""
        rows = read_trace_rows(path)
        w = (
            parse_window(window)
            if window
            else day_window(rows, hours or deployment.window_hours(quick=quick))
        )
        if minutes is not None:
            deployment = deployment.rescaled(w.hours * 60.0 / minutes)
        past = read_trace_rows(history) if history else rows
        start = w.start or rows[0][0]
        hist = None
        if history_out is not None and write_history(past, start, history_out):
            hist = str(history_out)
        settings.setdefault("startup_delay_s", deployment.emulated_startup_s)
        return cls.from_trace(
            path, window=w, minutes=deployment.minutes(w.hours), peak_rate=peak_rate,
            trigger_s=deployment.trigger_s, latency_target_ms=deployment.target_s * 1000.0,
            deployment=deployment, history=hist, **settings,
        )  # fmt: skip

    @classmethod
    def from_trace(
        cls,
        path: str,
        *,
        window: TraceWindow | str | None = None,
        minutes: float = 10.0,
        peak_rate: float = 300.0,
        **settings: Any,
    ) -> TrafficConfig:
        """Read the trace (one-line errors naming the file, line or window) and size the
        scenario from it; ``settings`` are :class:`SurgeConfig`'s."""
        load = read_rate_trace(path, window=window, minutes=minutes, peak_rate=peak_rate)
        base = float(np.median(load.rates)) or max(load.rates)
        return cls(
            load=load,
            base_rate=base,
            peak_factor=max(1.0, load.max_rate / base),
            phase_s=min(60.0, load.length_s / 4),
            **settings,
        )

    @property
    def trace(self) -> RateTrace:
        if self.load is None:
            raise ValueError("TrafficConfig needs a trace: use TrafficConfig.from_trace")
        return self.load

    @property
    def duration_s(self) -> float:
        return self.warmup_s + self.trace.length_s + self.tail_s

    @property
    def window(self) -> tuple[float, float]:
        return (self.warmup_s, self.warmup_s + self.trace.length_s)

    @property
    def surge_at(self) -> float:
        """The start of the steepest rise of the offered rate (seconds of the generator)."""
        rates = np.asarray(self.trace.rates)
        if len(rates) < 2:
            return self.warmup_s
        i = int(np.argmax(np.diff(rates))) + 1
        return self.warmup_s + self.trace.starts[i]

    def schedule(self) -> str:
        pts = self.trace.schedule(delay_s=self.warmup_s)
        return ",".join(f"{t!r}:{r!r}" for t, r in pts)

    def offered_points(self) -> tuple[list[float], list[float]]:
        pts = self.trace.schedule(delay_s=self.warmup_s)
        end = self.warmup_s + self.trace.length_s
        ts = [t for t, _ in pts] + [end]
        rs = [r for _, r in pts] + [pts[-1][1]]
        return ts, rs

    def describe(self) -> str:
        t = self.trace
        what = (
            f"{t.name}, window {t.window} replayed in {t.minutes:g} min "
            f"(p99 at {t.peak_rate:g} t/s, max {t.max_rate:.0f})"
        )
        if self.deployment is None:
            return what
        return (
            f"{what}, standing for {self.deployment.describe(self.startup, self.startup_delay_s)}"
        )

    def foresight_params(self) -> dict[str, Any]:
        """The forecasting policy's settings for this replay: the start-up it assumes
        until it sees one (``startup_delay_s``), cores sized for the latency target
        (``latency_slo_s``) rather than the trigger, the history on the source's clock (the
        window's first timestamp at the end of the warm-up, ``scale`` trace seconds a
        second) and a scale-down delay of one start-up and a trigger (rent before
        buying: an executor idle that long costs what starting another would)."""
        startup = self.startup_delay_s
        out: dict[str, Any] = {"scale_down_delay_s": startup + self.trigger_s,
                               "startup_s": startup,
                               "latency_slo_s": self.latency_target_ms / 1000.0}  # fmt: skip
        t = self.trace
        if self.history is not None and t.origin is not None:
            out.update(history=self.history, history_origin=t.origin.isoformat(sep=" "),
                       history_origin_s=self.warmup_s, time_scale=t.scale)  # fmt: skip
        return out

    def trace_fields(self) -> dict[str, Any]:
        """What a result line says of the trace."""
        t = self.trace
        return {
            "trace": t.name,
            "window": str(t.window),
            "minutes": t.minutes,
            "peak_rate": t.peak_rate,
            "max_rate": t.max_rate,
            "mean_rate": t.offered(0, t.length_s) / t.length_s,
            "intervals": len(t.starts),
        }


@dataclass(frozen=True)
class Oracle:
    """The oracle's holding: ``core_seconds`` over the replay, ``mean_executors``, and
    ``executors`` held from each of ``times`` (seconds of the replay) to the next."""

    core_seconds: float
    mean_executors: float
    times: tuple[float, ...]
    executors: tuple[int, ...]
    startup_s: float


def _need(rate: float, cost_ms: float, executor_cores: int) -> int:
    cores = max(1, math.ceil(rate * cost_ms / 1000.0 - 1e-9))
    return math.ceil(cores / executor_cores)


def oracle(load: RateTrace, *, cost_ms: float, executor_cores: int, startup_s: float) -> Oracle:
    """The fewest whole executors per interval with perfect foresight.

    Interval ``i`` needs the fewest executors whose cores cover its rate at the mean
    per-tuple cost (at least one; no headroom, no queueing). An executor that serves
    from ``t`` must be requested at ``t − startup_s`` and is billed from then, so at
    time ``t`` the oracle holds the largest need in ``[t, t + startup_s]`` (releases
    are immediate). No policy that keeps up with every interval holds fewer.

    Examples
    --------
    Two 2-core executors for 10 s, one for 10 s, three for 10 s (20 ms a tuple), with a
    start-up of 4 s: the third is held from 16 s, 4 s before its interval.

    >>> from streamscale.runtime.spark.sources.rate_trace import RateTrace, TraceWindow
    >>> load = RateTrace("x", TraceWindow(), 0.5, 100.0, (0.0, 10.0, 20.0),
    ...                  (150.0, 50.0, 250.0), 30.0, 1.0)
    >>> o = oracle(load, cost_ms=20.0, executor_cores=2, startup_s=4.0)
    >>> o.core_seconds, o.executors
    (136.0, (2, 1, 3))
    """
    need = [_need(r, cost_ms, executor_cores) for r in load.rates]
    ends = [*load.starts[1:], load.length_s]
    cuts = {0.0, load.length_s}
    for s in load.starts:
        cuts.update(c for c in (s, s - startup_s) if 0.0 < c < load.length_s)
    grid = sorted(cuts)
    times, held = [], []
    for a, b in itertools.pairwise(grid):
        m = (a + b) / 2  # the held count is constant between cuts: read it mid-way
        horizon = min(m + startup_s, load.length_s)
        segs = zip(load.starts, ends, need, strict=True)
        h = max(n for s, e, n in segs if s <= horizon and e > m)
        if held and held[-1] == h:
            continue
        times.append(a)
        held.append(h)
    spans = [*times[1:], load.length_s]
    executor_s = sum(h * (e - s) for h, s, e in zip(held, times, spans, strict=True))
    return Oracle(
        core_seconds=executor_s * executor_cores,
        mean_executors=executor_s / load.length_s,
        times=tuple(times),
        executors=tuple(held),
        startup_s=startup_s,
    )


def write_history(rows: list[tuple[Any, float]], before: Any, path: Path) -> bool:
    """Write the ``rows`` strictly before ``before`` to ``path`` in the trace format (the
    forecast's history: nothing of the replayed window or after it); ``False`` when none
    is."""
    past = [(t, v) for t, v in rows if t < before]
    if not past:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["timestamp,value", *(f"{t.isoformat(sep=' ')},{v!r}" for t, v in past)]
    path.write_text("\n".join(lines) + "\n")
    return True


def held_of(outcome: Any, cfg: TrafficConfig) -> list[Held]:
    """A run's executors as billed (:func:`~streamscale.scenarios.scoring.bill`), on the
    replay's clock: for :func:`~streamscale.scenarios.excess.excess_split`."""
    from streamscale.scenarios.scoring import bill

    spans = sorted(outcome.executors, key=lambda e: (e.added_s, e.executor))
    starts = bill(spans, outcome.requests, window=(0.0, math.inf)).starts
    zero = outcome.t0 + cfg.warmup_s
    return [
        Held(t - zero, e.added_s - zero, None if e.removed_s is None else e.removed_s - zero)
        for e, (_, t) in zip(spans, starts, strict=True)
        for _ in range(max(1, e.cores // cfg.executor_cores))
    ]


def measure_startup(master: str, cfg: SurgeConfig, *, timeout_s: float = 120.0) -> float:
    """Seconds from a request for one more executor to the end of its warm-up (a task run
    through the keyed stage's imports), on ``master`` with the scenario's executor
    settings, one executor alone on an otherwise idle host: the start-up that the
    emulated mode and the oracle take."""
    from streamscale.runtime.spark.driver.watch import warm_executors
    from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
    from streamscale.runtime.spark.executors.session import build_session

    conf = executor_conf(cfg.executor_cores, 2, pin=False, separate_hosts=False,
                         quick_start=cfg.quick_start)  # fmt: skip
    spark = build_session(master, app_name="streamscale-startup", conf=conf)
    try:
        res = ExecutorResources(spark.sparkContext, cores_per_executor=cfg.executor_cores,
                                max_executors=2, initial_executors=1, pin=False)  # fmt: skip
        res.settle(timeout_s)
        before = set(res.alive())
        t = time.time()
        res.scale_to(2)
        if not res.wait_for(2, timeout_s):
            return math.nan
        new = [e for e in res.alive() if e not in before]
        warm_executors(spark.sparkContext, new, cfg.executor_cores)
        return time.time() - t
    finally:
        spark.stop()


def observed_startup(outcome: Any, default: float) -> float:
    """The longest start-up a run observed: each executor from the request it was billed
    from (:func:`~streamscale.scenarios.scoring.bill`: requests matched to arrivals in
    order, withdrawn ones dropped) to its registration; ``default`` when none was added
    after a request."""
    from streamscale.scenarios.scoring import bill

    spans = sorted(outcome.executors, key=lambda e: (e.added_s, e.executor))
    starts = bill(spans, outcome.requests, window=(0.0, math.inf)).starts
    waits = [e.added_s - t for e, (_, t) in zip(spans, starts, strict=True) if t < e.added_s]
    return max(waits, default=default)
