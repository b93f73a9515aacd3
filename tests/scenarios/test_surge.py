"""The surge scenario's schedule, sizings and figures, hand-checked on a made-up run."""

from __future__ import annotations

import pytest

from streamscale.runtime.spark.sources.sources import GeneratorSpec
from streamscale.scenarios.scoring import BatchSpan, ExecutorSpan, Request
from streamscale.scenarios.surge import SurgeConfig, SurgeOutcome, policy_instances
from streamscale.scenarios.surge_score import reaction, summarize_surge, timeline


def test_schedule_puts_the_surge_after_the_warmup_and_the_window_closes_before_the_tail() -> None:
    cfg = SurgeConfig(base_rate=10.0, peak_factor=3.0, phase_s=20.0, warmup_s=5.0)
    spec = GeneratorSpec.from_options(cfg.source_options())
    # tuples offered: 25 s at 10/s, then 20 s at 30/s, then 10/s
    assert spec.available(25.0) == 250
    assert spec.available(45.0) == 250 + 600
    assert spec.available(55.0) == 250 + 600 + 100
    assert cfg.window == (5.0, 85.0)
    assert cfg.surge_at == 25.0
    # the run goes on for the latency target and two triggers after the window
    assert cfg.duration_s == 85.0 + 10.0 + 4.0


def test_static_sizings_run_one_task_per_slot() -> None:
    cfg = SurgeConfig()  # 100 -> 300 t/s at 20 ms: 2 and 6 cores; executors of 2 cores
    assert policy_instances(cfg, "static-peak") == 8  # (6 + 1) cores -> 4 executors
    assert policy_instances(cfg, "static-base") == 4  # (2 + 1) cores -> 2 executors
    assert policy_instances(cfg, "spark-dynamic") == 16  # every slot of the cluster


def test_oracle_ratio_counts_whole_executors_per_phase_by_hand() -> None:
    # 2-core executors: base 2 cores -> 1, peak 6 -> 3; static-peak 7 cores -> 4 executors
    assert SurgeConfig().oracle_core_ratio() == (3 * 1 + 3) / (4 * 4)
    # 1-core: base 2, peak 6, static 7: (6 + 6) / 28; 4-core: base 1, peak 2, static 2
    assert SurgeConfig().oracle_core_ratio(1) == 12 / 28
    assert SurgeConfig().oracle_core_ratio(4) == 5 / 8


def _outcome() -> tuple[SurgeOutcome, SurgeConfig]:
    # 10 t/s (a tuple every 0.1 s), 30 t/s from 30 s to 50 s, then 10 t/s; the scored
    # window is [10, 90] s of the generator's clock (t0 = 1000 epoch s); target 10 s.
    cfg = SurgeConfig(base_rate=10.0, phase_s=20.0, warmup_s=10.0, cost_ms=20.0)
    o = SurgeOutcome("elastic", t0=1000.0, end_s=1000.0 + 104.0)
    spec = GeneratorSpec.from_options(cfg.source_options())
    # (emitted after, emitted up to, committed at): every 5 s, 0.5 s after the last
    # tuple, except one long batch of the whole surge committed at 62.5 s
    ranges = [(t - 5.0, t, t + 0.5) for t in range(5, 35, 5)]
    ranges += [(30.0, 50.0, 62.5), (50.0, 55.0, 63.0), (55.0, 60.0, 64.0)]
    ranges += [(t - 5.0, t, t + 0.5) for t in range(65, 105, 5)]
    for i, (a, b, c) in enumerate(ranges):
        o.spans.append(BatchSpan(i, 1000.0 + c, spec.available(a), spec.available(b)))
    o.executors = [
        ExecutorSpan("1", 2, 990.0, None),
        ExecutorSpan("2", 2, 1028.0, 1060.0),  # requested at 1022 s
    ]
    o.requests = [Request(989.0, 1), Request(1022.0, 2), Request(1060.0, 1)]
    o.samples = [(1027.5, {"1": 9000.0}), (1029.0, {"1": 9100.0, "2": 100.0}),
                 (1030.0, {"1": 9200.0, "2": 800.0})]  # fmt: skip
    return o, cfg


def test_figures_from_a_made_up_run_by_hand() -> None:
    o, cfg = _outcome()
    f = summarize_surge(o, cfg)
    # emitted in [10, 90]: the tuple at 10.0 s, 200 in (10, 30], 600 in the surge,
    # 400 in (50, 90]. Met: everything before the surge (201); none of the surge's
    # (latency 12.5-32.5 s); of (50, 55] committed at 63 s those emitted at 53.0 s or
    # later (21); all 350 of (55, 90].
    assert f["scored_tuples"] == 1201 and f["pending_tuples"] == 0
    assert f["slo_tuples"] == pytest.approx((201 + 21 + 350) / 1201)
    # batches holding window tuples: (5,10] ... (25,30] (5), the surge (1), (50,55] ...
    # (85,90] (8); the surge's and (50,55]'s p99 miss the target
    assert f["batches"] == 14 and f["slo_batches"] == pytest.approx(12 / 14)
    # executor 1 for the whole window (80 s × 2 cores); executor 2 billed from its
    # request at 22 s to its removal at 60 s (38 s × 2 cores)
    assert f["core_seconds"] == pytest.approx(160 + 76)
    assert f["mean_cores"] == pytest.approx(236 / 80)
    assert (f["peak_executors"], f["scale_ups"], f["scale_downs"]) == (2, 1, 1)
    # the surge starts at 30 s: the request at 22 s came before it
    assert f["reaction_decision_s"] is None


def test_reaction_marks_request_arrival_and_first_tasks() -> None:
    o, _ = _outcome()
    cfg = SurgeConfig(base_rate=10.0, phase_s=10.0, warmup_s=10.0)  # surge at 20 s (1020)
    r = reaction(o, cfg)
    assert r["decision_s"] == pytest.approx(2.0)  # request at 1022
    assert r["arrival_s"] == pytest.approx(8.0)  # added at 1028
    assert r["tasks_s"] == pytest.approx(10.0)  # 800 ms of tasks sampled at 1030
    rows = timeline(o, cfg)
    assert [r["batch"] for r in rows] == list(range(len(o.spans)))
    # batches ending at 30.5 s (both alive), 62.5 s and 63 s (executor 2 left at 60 s)
    assert [r["executors"] for r in rows[5:8]] == [2, 1, 1]


def test_warm_capacity_variants_are_elastic_with_a_valid_watch_setting() -> None:
    from streamscale.control.watch import WatchConfig
    from streamscale.scenarios.surge import SURGE_POLICIES, VARIANTS

    cfg = SurgeConfig()
    for name, (base, extra) in VARIANTS.items():
        assert name in SURGE_POLICIES and base == "elastic"
        assert policy_instances(cfg, name) == policy_instances(cfg, "elastic")
        config = WatchConfig.from_params(dict(extra))  # raises on an unknown setting
        assert config != WatchConfig.from_params({})
    assert WatchConfig.from_params(dict(VARIANTS["elastic-standby"][1])).standby_executors == 1


def test_host_cpu_means_split_at_the_surge_by_hand() -> None:
    from streamscale.scenarios.surge_score import host_cpu

    o, _ = _outcome()  # t0 = 1000
    cfg = SurgeConfig(base_rate=10.0, phase_s=10.0, warmup_s=10.0)  # window from 1010, surge 1020
    o.cpu = [(1005.0, 1.0), (1012.0, 0.2), (1018.0, 0.4), (1021.0, 0.9), (1029.0, 1.0),
             (1031.0, 0.0)]  # fmt: skip
    got = host_cpu(o, cfg)
    # base: samples in (1010, 1020]; surge: (1020, 1030] (the phase is 10 s, under 30 s)
    assert got["base"] == pytest.approx(0.3) and got["surge"] == pytest.approx(0.95)
    o.cpu = []
    assert host_cpu(o, cfg) == {"base": None, "surge": None}


def test_reaction_counts_from_the_request_in_force_not_the_largest() -> None:
    from dataclasses import replace

    from streamscale.scenarios.scoring import Request
    from streamscale.scenarios.surge_score import in_force, up_requests

    o, _ = _outcome()
    cfg = SurgeConfig(base_rate=10.0, phase_s=10.0, warmup_s=10.0)  # surge at 20 s (1020)
    # 8 asked while warming up, back to 2 before the surge, 8 again 1.5 s into it
    o = replace(o, requests=[Request(1005.0, 8), Request(1012.0, 2), Request(1021.5, 8)])
    assert in_force(o.requests, 1020.0) == 2 and in_force(o.requests, 1000.0) == 0
    assert reaction(o, cfg)["decision_s"] == pytest.approx(1.5)
    assert up_requests(o, cfg) == [1021.5]
