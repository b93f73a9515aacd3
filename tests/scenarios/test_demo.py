"""The demo: a tiny run of two policies writes a complete report; bad flags fail cleanly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from streamscale.cli.app import main
from streamscale.scenarios.demo import DemoConfig, PolicyOutcome, summarize, write_report


def test_config_counts_batches_and_derives_the_rate() -> None:
    cfg = DemoConfig(duration_s=30, trigger_s=2.0, cost_ms=1.0, load=1.1)
    assert cfg.batches == 16
    assert cfg.rate_for(2) == pytest.approx(2200.0)
    assert DemoConfig(rate=500).rate_for(8) == 500
    assert cfg.executors_for(2) == 2 and DemoConfig(instances=4).executors_for(2) == 4


def test_a_failed_policy_is_reported_not_hidden(tmp_path: Path) -> None:
    cfg = DemoConfig(policies=("elastic",))
    outcomes = [PolicyOutcome("elastic", error="policy elastic: not available yet")]
    summary = summarize(outcomes, cfg, cores=2, master="local[2]")
    write_report(tmp_path, summary, outcomes)
    got = json.loads((tmp_path / "summary.json").read_text())
    assert got["policies"] == {"elastic": {"error": "policy elastic: not available yet"}}
    assert "failed" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "timeline.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--policies", "bogus"], "bogus"), (["--duration", "0", "--policies", "static"], "duration")],
)
def test_bad_flags_fail_with_one_line(args: list[str], needle: str, capsys, tmp_path) -> None:
    assert main(["demo", "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


@pytest.mark.spark
@pytest.mark.slow
def test_tiny_demo_writes_summary_for_each_policy(spark, tmp_path: Path) -> None:
    from streamscale.scenarios.demo import run_demo

    cfg = DemoConfig(
        duration_s=1.0,
        trigger_s=1.0,
        policies=("static", "spark-native"),
        keys=200,
        cost_ms=0.2,
        rate=400.0,
        instances=2,
        shards=4,
    )
    seen: list[str] = []
    outcomes = run_demo(spark, cfg, tmp_path, on_batch=lambda p, r: seen.append(p))
    summary = summarize(outcomes, cfg, cores=2, master="local[2]")
    write_report(tmp_path, summary, outcomes)
    got = json.loads((tmp_path / "summary.json").read_text())
    assert list(got["policies"]) == ["static", "spark-native"]
    for name, figures in got["policies"].items():
        assert "error" not in figures, figures
        assert {"throughput", "efficiency", "p50_ms", "p99_ms"} <= set(figures)
        assert figures["batches"] == cfg.batches == 2
        assert figures["throughput"] > 0 and math.isfinite(figures["p99_ms"])
        assert (tmp_path / name / "metrics.jsonl").exists()
    assert set(seen) == {"static", "spark-native"}
    assert "| static |" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "timeline.png").stat().st_size > 0


def test_zero_cost_report_has_no_physical_limit(tmp_path: Path) -> None:
    cfg = DemoConfig(policies=("static",), cost_ms=0.0, rate=60000)
    outcomes = [PolicyOutcome("static", error="stopped")]
    summary = summarize(outcomes, cfg, cores=2, master="local[2]")
    write_report(tmp_path, summary, outcomes)
    assert json.loads((tmp_path / "summary.json").read_text())["physical_limit"] is None
    assert "no physical limit" in (tmp_path / "summary.md").read_text()
