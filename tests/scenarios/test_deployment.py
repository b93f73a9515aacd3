"""Deployments: the compression, the real-world constants it stands for, the window."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.rate_trace import read_trace_rows
from streamscale.scenarios.deployment import DEPLOYMENTS, day_window, deployment, steepest_rise
from streamscale.scenarios.traffic import TrafficConfig

TRACES = Path(__file__).resolve().parents[2] / "src" / "streamscale" / "data" / "traces"


def test_the_minutes_deployment_by_hand() -> None:
    # c = 60: a 5-minute interval of the trace lasts 5 s, the 2-minute trigger 2 s, the
    # 10-minute target 10 s, a 60 s cloud start-up 1 s; 6 h replay in 6 minutes
    d = deployment("minutes")
    assert d.time_scale == 60.0
    assert (d.trigger_s, d.target_s, d.emulated_startup_s) == (2.0, 10.0, 1.0)
    assert d.minutes(6.0) == 6.0 and d.minutes(24.0) == 24.0
    # 360 s of replay on 3 cores: 1,080 core-seconds replayed, 18 real core-hours
    assert d.core_hours(1080.0) == pytest.approx(18.0)
    # a real start-up of 10 s on this host stands for 10 minutes
    f = d.fields(10.0)
    assert f == {"deployment": "minutes", "time_scale": 60.0, "real_trigger_s": 120.0,
                 "real_target_s": 600.0, "real_startup_s": 600.0}  # fmt: skip


def test_the_seconds_and_compressed_deployments_by_hand() -> None:
    s, c = DEPLOYMENTS["seconds"], DEPLOYMENTS["compressed"]
    assert (s.trigger_s, s.target_s, s.emulated_startup_s) == (2.0, 10.0, 3.0)
    assert s.minutes(1.0) == 6.0 and s.real_s(10.0) == 100.0
    # a day in 4 minutes: each 5-minute interval of the trace lasts 0.83 s
    assert c.minutes(24.0) == 4.0 and 300.0 / c.time_scale == pytest.approx(0.8333, abs=1e-4)
    assert (c.trigger_s, c.target_s) == (2.0, 10.0)


def test_a_rescaled_replay_keeps_every_constant_in_proportion() -> None:
    d = DEPLOYMENTS["minutes"].rescaled(120.0)
    assert (d.trigger_s, d.target_s, d.emulated_startup_s) == (1.0, 5.0, 0.5)
    assert d.real_trigger_s == 120.0 and d.core_hours(30.0) == pytest.approx(1.0)
    with pytest.raises(StreamscaleError, match="time scale"):
        DEPLOYMENTS["minutes"].rescaled(0.0)


def test_an_unknown_deployment_names_the_known_ones() -> None:
    with pytest.raises(StreamscaleError, match=r"hours: unknown deployment .*minutes"):
        deployment("hours")


def _daily(days: int, rise_hour: float) -> list[tuple[datetime, float]]:
    t0 = datetime(2015, 3, 1)
    return [
        (t0 + timedelta(minutes=5 * i), 10.0 + 40.0 * ((5 * i / 60.0) % 24 >= rise_hour))
        for i in range(days * 288)
    ]


def test_the_window_is_the_eighth_day_around_its_steepest_rise() -> None:
    rows = _daily(10, 13.0)
    assert steepest_rise([r for r in rows if r[0].date() == datetime(2015, 3, 8).date()]) == (
        datetime(2015, 3, 8, 12, 55)
    )
    w = day_window(rows, 6.0)
    assert w.start == datetime(2015, 3, 8, 9, 55) and w.hours == 6.0
    assert day_window(rows, 24.0).start == datetime(2015, 3, 8)
    # fewer than 8 days: the first, clipped to where the file starts
    assert day_window(rows[: 288 * 3], 24.0).start == datetime(2015, 3, 1)


def test_a_deployment_replay_takes_its_constants_and_a_history_before_its_window(
    tmp_path: Path,
) -> None:
    trace = TRACES / "occupancy_6005.csv"
    cfg = TrafficConfig.for_deployment(str(trace), DEPLOYMENTS["minutes"], quick=True,
                                       history_out=tmp_path / "h.csv", warmup_s=10.0)  # fmt: skip
    assert cfg.trigger_s == 2.0 and cfg.latency_target_ms == 10_000.0
    assert cfg.startup_delay_s == 1.0 and cfg.trace.minutes == 6.0
    assert cfg.trace.scale == pytest.approx(60.0, rel=0.02)
    start = cfg.trace.origin
    assert start is not None and start.date() == datetime(2015, 9, 11).date()
    history = read_trace_rows(tmp_path / "h.csv")
    rows = read_trace_rows(trace)
    # every row of the file before the window, and none of it or after it
    assert history == [(t, v) for t, v in rows if t < start]
    params = cfg.foresight_params()
    assert params["history"] == str(tmp_path / "h.csv")
    assert params["history_origin_s"] == 10.0 and params["latency_slo_s"] == 10.0
    assert params["scale_down_delay_s"] == 3.0
