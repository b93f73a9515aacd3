"""The surge scenario's schedule and figures, hand-checked on a made-up timeline."""

from __future__ import annotations

import pytest

from streamscale.runtime.spark.sources import GeneratorSpec
from streamscale.runtime.spark.surge import SurgeConfig, SurgeOutcome, summarize_surge


def _row(t: float, batch: int, executors: int, p99: float, tasks: int = 2) -> dict:
    return {"t": t, "batch": batch, "executors": executors, "cores": 2 * executors,
            "p99_ms": p99, "backlog": 0.0, "tasks": tasks}  # fmt: skip


def test_schedule_puts_the_surge_after_the_warmup() -> None:
    cfg = SurgeConfig(base_rate=10.0, peak_factor=3.0, phase_s=20.0, warmup_s=5.0)
    spec = GeneratorSpec.from_options({"rate": "10", "schedule": cfg.schedule()})
    # tuples offered: 25 s at 10/s, then 20 s at 30/s, then 10/s
    assert spec.available(25.0) == 250
    assert spec.available(45.0) == 250 + 600
    assert spec.available(55.0) == 250 + 600 + 100
    assert cfg.duration_s == 85.0  # the last base phase lasts two phases


def test_figures_skip_the_warmup_and_count_core_seconds_by_hand() -> None:
    cfg = SurgeConfig(warmup_s=10.0, latency_target_ms=1000.0)
    o = SurgeOutcome("elastic")
    o.timeline = [  # the query's first batch at 5 s: the warm-up ends at 15 s
        _row(5.0, 0, 1, float("nan")),  # warm-up: not scored
        _row(11.0, 1, 1, 5000.0),  # warm-up: not scored
        _row(13.0, 2, 1, 900.0),  # warm-up: not scored
        _row(15.0, 3, 2, 1500.0),
        _row(19.0, 4, 3, 800.0),
        _row(23.0, 5, 1, 700.0),
    ]
    f = summarize_surge(o, cfg)
    assert f["batches"] == 3
    assert f["slo_attainment"] == pytest.approx(2 / 3)
    # cores held between scored boundaries: 4 cores for 4 s, then 6 cores for 4 s
    assert f["core_seconds"] == pytest.approx(4 * 4 + 6 * 4)
    assert (f["peak_executors"], f["scale_ups"], f["scale_downs"]) == (3, 1, 1)
    assert f["scored_s"] == pytest.approx(8.0)
    assert f["mean_cores"] == pytest.approx(40 / 8)


def test_a_run_with_nothing_after_the_warmup_says_so() -> None:
    o = SurgeOutcome("static-base")
    o.timeline = [_row(1.0, 0, 1, 1.0)]
    assert "warm-up" in summarize_surge(o, SurgeConfig(warmup_s=5.0))["error"]


def test_reaction_counts_batches_from_the_surge_to_tasks_on_added_executors() -> None:
    from streamscale.runtime.spark.surge import reaction

    cfg = SurgeConfig(warmup_s=10.0, phase_s=20.0)  # surge at 2 + 10 + 20 = 32 s
    o = SurgeOutcome("elastic")
    o.timeline = [
        _row(2.0, 0, 1, 1.0, tasks=2),
        _row(30.0, 1, 1, 1.0, tasks=2),
        _row(34.0, 2, 2, 1.0, tasks=2),  # an executor arrived, the batch ran on the old plan
        _row(37.0, 3, 2, 1.0, tasks=4),  # tasks on the added executor
        _row(40.0, 4, 3, 1.0, tasks=6),
    ]
    assert reaction(o, cfg) == (2, pytest.approx(5.0))
    o.timeline = [_row(2.0, 0, 3, 1.0, tasks=6), _row(40.0, 1, 3, 1.0, tasks=6)]
    assert reaction(o, cfg) is None


def test_oracle_ratio_counts_whole_executors_per_phase_by_hand() -> None:
    # 100 t/s x 20 ms = 2 cores -> 1 executor of 4; 300 t/s = 6 cores -> 2; static-peak
    # holds 7 one-core instances -> 2 executors. Phases base, peak, base, base: 5 / 8.
    assert SurgeConfig().oracle_core_ratio() == 5 / 8
    # 140 t/s = 2.8 cores -> 1 executor; 420 t/s = 8.4 -> 9 cores -> 3; static-peak
    # 10 instances -> 3 executors: (3 * 1 + 3) / (4 * 3).
    assert SurgeConfig(base_rate=140.0).oracle_core_ratio() == 0.5
    # 2-core executors at 100 t/s: base 1, peak 3, static-peak 7 instances -> 4.
    assert SurgeConfig(executor_cores=2, max_executors=8).oracle_core_ratio() == 6 / 16
