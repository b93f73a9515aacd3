"""Where a run's core-seconds go: the split adds up to what was billed, by hand and at random."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.runtime.spark.sources.rate_trace import RateTrace, TraceWindow
from streamscale.scenarios.excess import CAUSES, Held, excess_split


def _load(rates: list[float], interval: float) -> RateTrace:
    starts = tuple(interval * i for i in range(len(rates)))
    n = len(rates)
    return RateTrace("x", TraceWindow(), n * interval / 60, 100.0, starts, tuple(rates),
                     n * interval, 1.0)  # fmt: skip


def test_a_burst_held_after_it_ends_is_holding() -> None:
    # 20 ms a tuple, 2-core executors: 50 t/s needs 1 executor, 250 t/s 3. The run holds 1
    # throughout; 2 more requested at 10 s, usable at 12 s (2 s start-up), kept to 30 s,
    # 10 s after the burst (10–20 s) ended; the oracle's start-up is 0 (no foresight)
    load = _load([50.0, 250.0, 50.0, 50.0], 10.0)
    held = [Held(0.0, 0.0, None), Held(10.0, 12.0, 30.0), Held(10.0, 12.0, 30.0)]
    s = excess_split(held, load, cost_ms=20.0, executor_cores=2, startup_s=0.0,
                     target_s=10.0, oracle_core_seconds=100.0, step_s=0.05)  # fmt: skip
    # billed from their request at the burst's start: needed then, so neither overshoot
    # nor under (the 2 s they were not yet usable cost the backlog, not core-seconds)
    assert s["startup_overshoot_core_s"] == pytest.approx(0.0, abs=0.3)
    assert s["under_core_s"] == pytest.approx(0.0, abs=0.3)
    assert s["holding_core_s"] == pytest.approx(2 * 2 * 10.0, abs=0.3)  # 20–30 s
    assert s["headroom_core_s"] == pytest.approx(0.0, abs=0.3)
    # rounding: 50 t/s is 1 core of a 2-core executor (30 s), 250 t/s 5 of 6 (10 s)
    assert s["rounding_core_s"] == pytest.approx(1.0 * 30 + 1.0 * 10, abs=0.3)
    assert s["holding"] == pytest.approx(s["holding_core_s"] / 100.0)


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 400.0), min_size=1, max_size=6),
    spans=st.lists(
        st.tuples(st.floats(0.0, 50.0), st.floats(0.0, 5.0), st.floats(0.0, 60.0)), max_size=6
    ),
    startup=st.floats(0.0, 5.0),
)
def test_the_split_adds_up_to_the_billed_core_seconds(
    rates: list[float], spans: list[tuple[float, float, float]], startup: float
) -> None:
    load = _load(rates, 10.0)
    held = [Held(b, b + w, (b + w + d) if d < 55 else None) for b, w, d in spans]
    s = excess_split(held, load, cost_ms=20.0, executor_cores=2, startup_s=startup,
                     target_s=10.0, oracle_core_seconds=1.0, step_s=0.01)  # fmt: skip
    # billed core-seconds, integrated exactly from the spans (an independent reckoning)
    end = load.length_s
    billed = sum(2 * max(0.0, min(end, h.removed_s if h.removed_s is not None else end)
                         - min(end, h.billed_s)) for h in held)  # fmt: skip
    # the rate's fractional cores, exactly: rate × 20 ms ÷ 2 cores per executor × 2 cores
    fractional = load.offered(0.0, end) * 0.02
    parts = sum(s[f"{k}_core_s"] for k in CAUSES if k != "under")
    assert fractional + parts - s["under_core_s"] == pytest.approx(
        billed, abs=0.05 * (1 + len(held))
    )
    assert all(s[f"{k}_core_s"] >= -1e-9 for k in CAUSES)


def test_executors_billed_while_starting_beyond_the_floor_are_overshoot() -> None:
    # 50 t/s throughout (1 executor); a second asked for at 5 s, usable at 8 s, gone at
    # 10 s: 3 s of start-up overshoot, then 2 s of headroom; the first 5 s one short of
    # nothing; and with no executor at all from 10 s, 10 s under the floor
    load = _load([50.0, 50.0], 10.0)
    held = [Held(0.0, 0.0, 10.0), Held(5.0, 8.0, 10.0)]
    s = excess_split(held, load, cost_ms=20.0, executor_cores=2, startup_s=0.0,
                     target_s=1.0, oracle_core_seconds=40.0, step_s=0.05)  # fmt: skip
    assert s["startup_overshoot_core_s"] == pytest.approx(2 * 3.0, abs=0.3)
    assert s["headroom_core_s"] == pytest.approx(2 * 2.0, abs=0.3)
    assert s["under_core_s"] == pytest.approx(2 * 10.0, abs=0.3)
