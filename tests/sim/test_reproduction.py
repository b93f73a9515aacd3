"""Smoke test of ``streamscale reproduce elasticutor`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments.elasticutor import POLICIES, Setup, run
from streamscale.experiments.elasticutor_report import _instances_table, dips
from streamscale.sim.run import Sample


@pytest.mark.slow
def test_reproduction_writes_results(tmp_path: Path) -> None:
    tiny = Setup(
        nodes=2,
        executors=2,
        shards=16,
        warmup_s=1.0,
        duration_s=2.0,
        omegas=(0, 2),
        alphas=(0.5,),
        state_bytes=(32 * 1024,),
        sweep_s=1.0,
        sse_nodes=(2,),
        sse_shards_per_op=16,
        sse_s=1.0,
        offered_omegas=(2,),
        timeline_warmup_s=1.0,
        timeline_s=2.0,
    )
    res = run(tmp_path, quick=True, seed=1, config=tiny, workers=1)
    data = json.loads((tmp_path / "results.json").read_text())
    rows = data["omega_sweep"]
    assert {(r["omega"], r["policy"]) for r in rows} == {(w, p) for w in (0, 2) for p in POLICIES}
    for r in rows:
        assert set(r) >= {"omega", "policy", "throughput", "mean_latency_ms", "p99_ms"}
        assert r["throughput"] > 0
    assert set(data["naive_vs_elastic"]) >= {
        "naive_migration_mb_s",
        "elastic_migration_mb_s",
        "naive_remote_mb_s",
        "elastic_remote_mb_s",
    }
    assert res["scalability"][0]["nodes"] == 2
    ys = {(r["executors_per_operator"], r["policy"]) for r in data["sse_executors"]}
    assert ys == {(1, p) for p in ("naive-ec", "elastic")}
    # Fig. 7 comes from its own run, measured after its warm-up
    assert data["setup"]["timeline_s"] == 2.0
    assert all(len(d["dips_s"]) == d["shuffles"] for d in data["dips_omega2"])
    # every ω and skew row carries the hot-shard ceiling; offered runs their rate
    assert all(r["ceiling"] > 0 for r in rows + data["skew_sweep"])
    offered = data["omega_offered"]
    assert {r["policy"] for r in offered} == set(POLICIES)
    assert all(0 < r["offered"] <= r["ceiling"] for r in offered)
    assert {r["policy"] for r in data["sse_offered"]} == set(POLICIES)
    # the sustained load: 0.75 × the lower of RC's and Elasticutor's saturation throughput
    top = {r["policy"]: r["throughput"] for r in rows if r["omega"] == 2}
    sustained = data["omega_sustained"]
    assert {r["policy"] for r in sustained} == set(POLICIES)
    assert all(
        r["offered"] == pytest.approx(0.75 * min(top["rc"], top["elastic"])) for r in sustained
    )
    figures = {t["figure"] for t in res["targets"]}
    assert {"omega2_dip_s_rc", "sse_migration_naive_over_elastic"} <= figures
    for t in res["targets"]:
        assert set(t) == {"figure", "paper", "measured", "target", "met", "runs"}
        json.dumps(t)
    # the paper page's headline records: one per target figure, met or missed in the label
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert heads == res["headline"] and len(heads) == len(res["targets"])
    for h, t in zip(heads, res["targets"], strict=True):
        provenance = {"command", "commit", "utc", "wall_s"}
        assert set(h) == {"figure", "variant", "paper", "measured"} | provenance
        assert h["command"] is None  # a custom setup: no command reproduces it
        assert h["figure"].endswith("met" if t["met"] else "missed")
    md = (tmp_path / "results.md").read_text()
    assert "Table 2" in md and "218.6" not in md.split("Table 3")[0]
    assert "hot-shard ceiling" in md and "Target figures" in md
    for png in ("omega.png", "timeline_omega2.png", "skew.png", "state.png", "sse.png"):
        assert (tmp_path / png).stat().st_size > 0


def _samples(values: list[float]) -> list[Sample]:
    return [Sample(float(i + 1), v, 1.0, 1.0, 1, 0.0, 0.0, 0.0) for i, v in enumerate(values)]


def test_dips_measure_recovery_after_each_shuffle() -> None:
    # shuffles at 10 and 20 s; first dip recovers at t=13 (2 s), second never (censored)
    x = [100.0] * 10 + [20, 40, 95, 100, 100, 100, 100, 100, 100, 100] + [10.0] * 10
    d = dips(_samples(x), [10.0, 20.0], 30.0)
    assert d["shuffles"] == 2
    assert d["max_dip_s"] == pytest.approx(10.0)
    assert d["mean_dip_s"] == pytest.approx((2.0 + 10.0) / 2)
    assert d["mean_depth"] == pytest.approx((0.8 + 0.9) / 2)
    assert dips(_samples([100.0] * 30), [10.0, 20.0], 30.0)["mean_dip_s"] == 0.0


def test_instance_table_sets_naive_beside_elastic() -> None:
    rows = [
        {
            "executors_per_operator": y,
            "policy": p,
            "throughput": 1000.0 * y,
            "migration_mb_s": m,
            "remote_mb_s": 2 * m,
            "default": y == 8,
        }
        for y, p, m in (
            (8, "naive-ec", 9.0),
            (8, "elastic", 3.0),
            (4, "naive-ec", 4.0),
            (4, "elastic", 2.0),
        )
    ]
    md = "\n".join(_instances_table({"sse_executors": rows}))
    assert "8 (default)" in md and "| 3 |" in md.replace(".0 ", " ")
    assert _instances_table({"sse_executors": rows[:2]}) == []
