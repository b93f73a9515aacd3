"""Building a task's performance model from trials (paper 004, §5.1, Algorithm 1).

For thread counts τ (stepped) the input rate ω is raised until a trial is
unstable; the last stable rate is the peak I(τ), with the CPU % and memory %
measured at it. Threads stop being added once the peak rate's slope over the
trailing window of thread counts flattens or turns negative. The trial itself
is a parameter (``run_trial(threads, rate, then) -> TrialResult``), so this module is
backend-free: :mod:`streamscale.profiling.spark_trial` runs trials on Spark.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.errors import InfeasibleError, StreamscaleError
from streamscale.model import ModelPoint, PerformanceModel

__all__ = ["ProfileResult", "TrialResult", "latency_slope", "profile"]


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial: τ threads at input rate ω for a while.

    ``latency_slope`` is seconds of extra latency per second of trial after the
    warm-up; ``achieved_rate`` the tuples/s processed over that window; ``cpu``
    and ``memory`` are percent of the slot; ``utilization`` the share of the
    trial the task was busy.
    """

    threads: int
    rate: float
    stable: bool
    latency_slope: float
    achieved_rate: float
    cpu: float
    memory: float
    processed: int = 0
    latency_p50_ms: float = 0.0
    utilization: float = 0.0


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """The model built, every trial run, and why thread counts stopped being added."""

    model: PerformanceModel
    trials: tuple[TrialResult, ...]
    stopped: str


def latency_slope(times: Sequence[float], latencies: Sequence[float]) -> float:
    """Least-squares slope of latency against time (paper 004, §5.1's λ_L); 0 for < 3 points."""
    t = np.asarray(times, dtype=float)
    y = np.asarray(latencies, dtype=float)
    if t.size < 3 or float(np.ptp(t)) <= 0:
        return 0.0
    return float(np.polyfit(t - t.mean(), y, 1)[0])


def _ladder(
    rates: Sequence[float] | None, start: float, growth: float, max_rate: float
) -> list[float]:
    if rates:
        out = sorted({float(r) for r in rates})
        if out[0] <= 0:
            raise StreamscaleError("rates must be > 0", item="rates")
        return out
    if not start > 0 or not growth > 1:
        raise StreamscaleError("start rate must be > 0 and growth > 1", item="rates")
    out, r = [], float(start)
    while r <= max_rate:
        out.append(round(r, 3))
        r *= growth
    return out


def check_inputs(
    threads: Sequence[int],
    rates: Sequence[float] | None,
    start_rate: float,
    growth: float,
    max_rate: float,
) -> tuple[list[int], list[float]]:
    """The thread counts and the rate ladder :func:`profile` will use, checked (no trial runs)."""
    ts = [int(t) for t in threads]
    if not ts or ts[0] != 1 or any(b <= a for a, b in itertools.pairwise(ts)):
        raise StreamscaleError("threads must be ascending and start at 1", item="threads")
    for name, v in (("start rate", start_rate), ("growth", growth), ("max rate", max_rate)):
        if not math.isfinite(v):
            raise StreamscaleError(f"must be finite, got {v}", item=name)
    if rates and not all(math.isfinite(r) for r in rates):
        raise StreamscaleError("rates must be finite", item="rates")
    ladder = _ladder(rates, start_rate, growth, max_rate)
    if not ladder:
        raise StreamscaleError(
            f"empty ladder: start rate {start_rate:g} is above max rate {max_rate:g}", item="rates"
        )
    return ts, ladder


def profile(
    task: str,
    run_trial: Callable[[int, float, Sequence[float]], TrialResult],
    *,
    threads: Sequence[int] = (1, 2, 4, 8),
    rates: Sequence[float] | None = None,
    start_rate: float = 10.0,
    growth: float = 1.5,
    max_rate: float = 100_000.0,
    min_slope: float = 0.02,
    window: int = 1,
    on_trial: Callable[[TrialResult], None] | None = None,
) -> ProfileResult:
    """Build ``task``'s performance model (paper 004, §5.1, Algorithm 1).

    Parameters
    ----------
    task
        Name recorded in the model.
    run_trial
        ``run_trial(threads, rate, then)`` runs one trial and reports whether
        it was stable; ``then`` lists the rates that will be asked next, in
        order, if it is (a backend may schedule them in one run).
    threads
        Thread counts to try, ascending, starting at 1 (Δτ may vary).
    rates
        The rate ladder (ascending); default: ``start_rate`` × ``growth``^k up
        to ``max_rate`` (Δω growing with the rate).
    min_slope
        λ_ω^min as a fraction of the peak rate per added thread: threads stop
        being added once (I(τ_k) − I(τ_{k−w})) / (τ_k − τ_{k−w}) falls to
        ``min_slope`` × I(τ_{k−w}) or below (flat or dropping).
    window
        w, the trailing window of thread counts for that slope.
    on_trial
        Called after each trial (progress reporting).

    Each thread count starts at the rung nearest the previous peak and walks
    up while stable, or down until stable — Algorithm 1 restarts ω at 1 for
    every τ, which costs trials without changing the peak found.
    """
    ts, ladder = check_inputs(threads, rates, start_rate, growth, max_rate)
    trials: list[TrialResult] = []
    points: list[ModelPoint] = []
    stopped = "all thread counts tried"
    idx = 0

    def trial(tau: int, i: int, up: bool) -> TrialResult:
        res = run_trial(tau, ladder[i], tuple(ladder[i + 1 :]) if up else ())
        trials.append(res)
        if on_trial is not None:
            on_trial(res)
        return res

    for tau in ts:
        best: TrialResult | None = None
        first = trial(tau, idx, True)
        if first.stable:
            best, i = first, idx + 1
            while i < len(ladder):
                r = trial(tau, i, True)
                if not r.stable:
                    break
                best, i = r, i + 1
        else:
            i = idx - 1
            while i >= 0:
                r = trial(tau, i, False)
                if r.stable:
                    best = r
                    break
                i -= 1
        if best is None:
            if tau == 1:
                raise InfeasibleError(
                    f"unstable even at {ladder[0]:g} tuples/s with one thread; lower the rates",
                    item=f"task {task}",
                )
            stopped = f"no stable rate with {tau} threads"
            break
        points.append(ModelPoint(tau, best.rate, best.cpu, best.memory))
        idx = ladder.index(best.rate)
        if len(points) > window:
            a, b = points[-1 - window], points[-1]
            slope = (b.rate - a.rate) / (b.threads - a.threads)
            if slope <= min_slope * a.rate:
                stopped = f"peak rate flat or dropping at {tau} threads"
                break
    model = PerformanceModel.build(task, points, source="streamscale profile (Spark trials)")
    return ProfileResult(model, tuple(trials), stopped)
