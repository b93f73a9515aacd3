"""The real-traffic scenario: its sizing from a trace and the oracle, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.rate_trace import RateTrace, TraceWindow
from streamscale.runtime.spark.sources.sources import GeneratorSpec
from streamscale.scenarios.surge import SurgeConfig, policy_instances
from streamscale.scenarios.traffic import TrafficConfig, oracle

TRACES = Path(__file__).resolve().parents[2] / "src" / "streamscale" / "data" / "traces"


def _load(starts: tuple[float, ...], rates: tuple[float, ...], length: float) -> RateTrace:
    return RateTrace("t.csv", TraceWindow(), length / 60, 100.0, starts, rates, length, 1.0)


def test_the_oracle_holds_each_intervals_need_one_start_up_ahead() -> None:
    # 20 ms a tuple, 2-core executors: 100 t/s = 2 cores = 1 executor; 250 = 5 cores = 3;
    # 90 = 1.8 cores = 1; start-up 5 s
    load = _load((0.0, 20.0, 30.0), (100.0, 250.0, 90.0), 60.0)
    o = oracle(load, cost_ms=20.0, executor_cores=2, startup_s=5.0)
    # 1 executor until 15 s, 3 from 15 s (requested 5 s before the burst) to 30 s, then 1
    assert o.times == (0.0, 15.0, 30.0)
    assert o.executors == (1, 3, 1)
    assert o.core_seconds == pytest.approx(2 * (15 * 1 + 15 * 3 + 30 * 1))
    assert o.mean_executors == pytest.approx((15 + 45 + 30) / 60)


def test_without_start_up_the_oracle_is_the_sum_of_the_needs() -> None:
    load = _load((0.0, 10.0, 20.0, 30.0), (10.0, 400.0, 0.0, 160.0), 40.0)
    o = oracle(load, cost_ms=20.0, executor_cores=4, startup_s=0.0)
    # 0.2 cores -> 1; 8 cores -> 2 executors; nothing offered still holds one; 3.2 -> 1
    assert o.executors == (1, 2, 1)
    assert o.core_seconds == pytest.approx(4 * 10 * (1 + 2 + 1 + 1))


def test_a_start_up_longer_than_a_dip_holds_through_it() -> None:
    load = _load((0.0, 10.0, 12.0), (250.0, 50.0, 250.0), 30.0)
    o = oracle(load, cost_ms=20.0, executor_cores=2, startup_s=3.0)
    assert o.executors == (3,)  # releasing for 2 s would have to re-request 1 s before
    assert o.core_seconds == pytest.approx(2 * 3 * 30)


def test_the_scenario_is_sized_from_the_trace(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text(
        "timestamp,value\n2015-01-01 00:00:00,10\n2015-01-01 00:05:00,20\n"
        "2015-01-01 00:10:00,40\n2015-01-01 00:15:00,30\n2015-01-01 00:20:00,100\n"
    )
    cfg = TrafficConfig.from_trace(str(p), minutes=2.5, peak_rate=100.0, warmup_s=20.0)
    assert cfg.window == (20.0, 170.0)
    assert cfg.duration_s == 170.0 + cfg.tail_s
    # the steepest rise, 30 -> 100, starts 120 s into the replay
    assert cfg.surge_at == 140.0
    # static-peak is sized for the window's largest rate: 100/97.6 x 100 t/s = 2.05 cores
    assert cfg.base_rate * cfg.peak_factor == pytest.approx(100 * 100 / 97.6)
    assert policy_instances(cfg, "static-peak") == 2 * 2  # (3 cores + 1) in 2-core executors
    spec = GeneratorSpec.from_options(cfg.source_options())
    # 20 s at the first rate, then the replay: the generator offers what the trace says
    assert spec.available(20.0) == int(20 * 1000 / 97.6)
    assert spec.available(50.0) == int(50 * 1000 / 97.6)
    assert cfg.trace.offered(0, 150) == pytest.approx(30 * 100 * (10 + 20 + 40 + 30 + 100) / 97.6)


def test_a_bad_startup_mode_is_refused() -> None:
    with pytest.raises(StreamscaleError, match="startup warm: unknown start-up mode"):
        SurgeConfig(startup="warm")
    with pytest.raises(StreamscaleError, match="startup delay: must be >= 0"):
        SurgeConfig(startup="emulated", startup_delay_s=-1.0)


def test_the_bundled_trace_reads() -> None:
    cfg = TrafficConfig.from_trace(str(TRACES / "occupancy_6005.csv"), minutes=3.0)
    assert cfg.trace.length_s == 180.0
    assert len(cfg.trace.starts) == 157  # its first day: 5 minutes a row, with gaps
    assert max(cfg.trace.rates) <= 1.25 * 300.0


def test_the_start_up_a_run_observed_matches_requests_to_arrivals_in_order() -> None:
    from types import SimpleNamespace

    from streamscale.scenarios.scoring import ExecutorSpan, Request
    from streamscale.scenarios.traffic import observed_startup

    run = SimpleNamespace(
        # 2 at the start (arrived 3 s and 4 s later), 4 at 100 s (arrived 112 s, 118 s),
        # back to 2 at 150 s (two released), 3 at 200 s (arrived 209 s)
        requests=[Request(0.0, 2), Request(100.0, 4), Request(150.0, 2), Request(200.0, 3)],
        executors=[ExecutorSpan("1", 2, 3.0, None), ExecutorSpan("2", 2, 4.0, None),
                   ExecutorSpan("3", 2, 112.0, 150.0), ExecutorSpan("4", 2, 118.0, 150.0),
                   ExecutorSpan("5", 2, 209.0, None)],
    )  # fmt: skip
    assert observed_startup(run, 20.0) == 18.0  # the longest: 100 s -> 118 s
    assert observed_startup(SimpleNamespace(requests=[], executors=[]), 20.0) == 20.0


def test_the_summary_says_what_elastic_saved_against_static_peak_and_the_floor() -> None:
    from streamscale.scenarios.surge_report import markdown

    cfg = TrafficConfig.from_trace(str(TRACES / "occupancy_6005.csv"), minutes=3.0)
    base = {"slo_batches": 1.0, "mean_cores": 0.0, "peak_executors": 1, "scale_ups": 0,
            "scale_downs": 0, "reaction_tasks_s": None, "p99_ms": 1.0}  # fmt: skip
    figures = {
        "elastic": {**base, "slo_tuples": 0.991, "core_seconds": 600.0},
        "static-peak": {**base, "slo_tuples": 1.0, "core_seconds": 1000.0},
    }
    ora = oracle(cfg.trace, cost_ms=20.0, executor_cores=2, startup_s=10.0)
    md = markdown(figures, cfg, oracle=ora)
    assert "| elastic | 99 % | 100 % | 600 | 0.60 |" in md
    assert (
        "**elastic** kept 99.1 % of the tuples within the target for 600 core-seconds: 40 % "
        "less than static-peak's 1000 (which kept 100.0 %), "
        f"{600 / ora.core_seconds:.2f}× the oracle's floor."
    ) in md
    assert f"| {ora.core_seconds:.0f} | {ora.core_seconds / 1000:.2f} |" in md
