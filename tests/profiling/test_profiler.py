"""Algorithm 1 of paper 004 (§5.1) with a fake trial backend."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from streamscale.errors import InfeasibleError, StreamscaleError
from streamscale.profiling.profiler import TrialResult, latency_slope, profile


def fake(capacity: dict[int, float]):
    calls: list[tuple[int, float]] = []

    def run(threads: int, rate: float, then: Sequence[float] = ()) -> TrialResult:
        calls.append((threads, rate))
        ok = rate <= capacity[threads]
        return TrialResult(threads, rate, ok, 0.0 if ok else 0.5, rate, 10.0 * threads, 5.0)

    return run, calls


def test_io_bound_task_keeps_adding_threads() -> None:
    run, calls = fake({1: 20, 2: 40, 4: 75, 8: 76})
    res = profile("io", run, threads=[1, 2, 4, 8], rates=[5, 10, 20, 40, 60, 80])
    assert [(p.threads, p.rate) for p in res.model.points] == [(1, 20), (2, 40), (4, 60), (8, 60)]
    # τ = 2 starts at the previous peak (20), not at the bottom of the ladder
    assert calls[:5] == [(1, 5), (1, 10), (1, 20), (1, 40), (2, 20)]
    assert res.stopped == "peak rate flat or dropping at 8 threads"


def test_stops_when_peak_drops_and_walks_down() -> None:
    run, calls = fake({1: 100, 2: 60, 4: 50})
    res = profile("cpu", run, threads=[1, 2, 4], rates=[25, 50, 100, 200])
    assert [(p.threads, p.rate) for p in res.model.points] == [(1, 100), (2, 50)]
    assert res.stopped == "peak rate flat or dropping at 2 threads"
    assert (2, 100) in calls and (2, 50) in calls and all(t < 4 for t, _ in calls)
    assert res.model.points[0].cpu == 10.0


def test_geometric_ladder_and_errors() -> None:
    run, _ = fake({1: 30, 2: 70})
    res = profile("g", run, threads=[1, 2], start_rate=10, growth=2)
    assert [p.rate for p in res.model.points] == [20, 40]
    with pytest.raises(InfeasibleError, match="task g"):
        profile("g", fake({1: 1})[0], threads=[1], rates=[5])
    with pytest.raises(StreamscaleError, match="threads"):
        profile("g", run, threads=[2, 4])


def test_latency_slope() -> None:
    assert latency_slope([0, 1, 2, 3], [1, 1.5, 2, 2.5]) == pytest.approx(0.5)
    assert latency_slope([0, 1], [0, 9]) == 0.0
