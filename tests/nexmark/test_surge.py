"""The Nexmark surge's schedule, cost and substitution, without a cluster."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import streamscale.runtime.spark.driver.runner as runner
import streamscale.scenarios.surge as surge
from streamscale.errors import StreamscaleError
from streamscale.nexmark import surge as nx
from streamscale.nexmark.generator import GeneratorConfig, generate
from streamscale.nexmark.source import NexmarkSpec
from streamscale.runtime.spark.sources.source_registry import source_offered
from streamscale.runtime.spark.sources.sources import GeneratorSpec
from streamscale.scenarios.surge import SurgeConfig


@pytest.mark.parametrize("q", ["q5", "q8"])
def test_the_source_offers_events_when_the_scorer_expects_them(q: str) -> None:
    # the scorer dates tuple n by the scenario's generator schedule: the Nexmark source
    # must offer the same counts at every time, warm-up, surge and after it
    cfg = SurgeConfig(phase_s=15.0, warmup_s=25.0, base_rate=100.0, peak_factor=3.0)
    offered = NexmarkSpec.from_options(nx.nexmark_options(cfg, q))
    scored = GeneratorSpec.from_options(cfg.source_options())
    for t in np.arange(0.05, cfg.duration_s + 30.0, 0.37):
        assert abs(offered.available(float(t)) - scored.available(float(t))) <= 1, t
    assert offered.available(cfg.surge_at + cfg.phase_s) - offered.available(cfg.surge_at) == (
        pytest.approx(cfg.phase_s * 300.0, abs=1)
    )


def test_rows_per_event_are_the_generated_proportions() -> None:
    ev = generate(GeneratorConfig.constant(1000, seed=3), 0, 5000)
    assert nx.ROWS_PER_EVENT["q5"] == pytest.approx(5 * len(ev.bid) / 5000)
    assert nx.ROWS_PER_EVENT["q8"] == pytest.approx((len(ev.person) + len(ev.auction)) / 5000)
    cfg = SurgeConfig()
    # the waited cost per row makes the load per event the scenario's cost_ms
    for q in ("q5", "q8"):
        assert nx.wait_ms(cfg, q) * nx.ROWS_PER_EVENT[q] == pytest.approx(cfg.cost_ms)


def test_the_nexmark_job_is_passed_not_patched_and_other_queries_refused() -> None:
    job, run_job = surge._job, runner.run_job
    work = nx.nexmark_job("Q8")
    built = work.build(SurgeConfig(), 4)
    assert isinstance(built, nx.NexmarkSurgeJob) and built.query == "q8"
    assert built.instances == 4 and work.run is nx.run_nexmark_job
    assert (surge._job, runner.run_job) == (job, run_job)  # nothing of the scenario changed
    assert surge.micro_benchmark_job().run is run_job
    with pytest.raises(StreamscaleError, match="the surge runs on q5, q8 only"):
        nx.wait_ms(SurgeConfig(), "q7")


@pytest.mark.spark
def test_a_nexmark_surge_job_feeds_the_scenarios_progress_line(spark, tmp_path) -> None:
    # the job that bench_nexmark.py --surge runs, for a few batches on the test session:
    # every batch's record must carry what the scenario's progress line reads
    cfg = SurgeConfig(phase_s=5.0, warmup_s=2.0, base_rate=100.0, trigger_s=1.0)
    rows: list[dict] = []
    sc = spark.sparkContext
    job = nx.nexmark_job("q8").build(cfg, 2)
    nx.run_nexmark_job(
        spark, job, policy="static", duration_s=12.0, checkpoint=tmp_path / "ck",
        on_batch=lambda rec: rows.append(surge._row("static", rec, sc)),
    )  # fmt: skip
    assert len(rows) >= 2
    assert [r["batch"] for r in rows] == list(range(len(rows)))
    assert all(r["time"] > 0 and r["duration_s"] > 0 and r["units"] == 2 for r in rows)
    # the rows into Q8's first keyed operator: persons and auctions offered so far
    assert sum(r["rows"] for r in rows) > 0
    # what waits is never more than the Nexmark source offered on the scenario's schedule
    # (the run's clock starts after the source's), not the bundled generator's default
    # schedule (1,000 t/s); the job declares the source its DataFrame reads, so what
    # arrived while a batch ran is seen at its boundary
    offered = source_offered("streamscale_nexmark", nx.nexmark_options(cfg, "q8"))
    assert offered is not None
    got = [(r["backlog"], offered(r["time"] + 5.0)) for r in rows]
    assert all(0 <= b <= most for b, most in got), got
    assert any(b > 0 for b, _ in got), got


@pytest.mark.spark
def test_an_elastic_nexmark_surge_job_decides_on_every_keyed_operator(spark, tmp_path) -> None:
    # Q5's three keyed operators under elastic: each instance holds a core, so with more
    # instances than cores every decision was infeasible and the job kept its first plan
    cfg = SurgeConfig(phase_s=5.0, warmup_s=2.0, base_rate=100.0, trigger_s=1.0,
                      max_executors=2, executor_cores=1)  # fmt: skip
    seen: list[tuple[Any, Any]] = []
    job = nx.nexmark_job("q5").build(cfg, 4)
    nx.run_nexmark_job(
        spark, job, policy="elastic", duration_s=15.0, checkpoint=tmp_path / "ck",
        params={"interval_s": 0.0, "stabilization_s": 0.0},
        on_batch=lambda rec: seen.append((rec.extra.get("decision"), rec.extra.get("control_error"))),
    )  # fmt: skip
    assert len(seen) >= 2
    assert all(err is None for _, err in seen), seen
    assert all(d for d, _ in seen), seen  # a decision at every boundary
