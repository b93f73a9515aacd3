"""Smoke test of ``streamscale reproduce albic`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments.albic import run

TINY = {
    "setups": ((6, 36, 3),),
    "budgets": (3,),
    "rounds": 2,
    "scale_in_setup": (8, 48, 4),
    "scale_in_rounds": 4,
    "marked": 2,
    "collocation": (0.0, 100.0),
    "cola_setup": (4, 32, 4),
    "periods": 2,
    "sizes": ((3, 24, 3),),
    "job2_periods": 2,
    "job2_max_ld": 10.0,
    "time_limit_s": 0.3,
}


@pytest.mark.slow
def test_tiny_reproduction_writes_results(tmp_path: Path) -> None:
    res = run(tmp_path, quick=True, seed=3, config=TINY)
    data = json.loads((tmp_path / "results.json").read_text())
    row = data["milp_vs_flux"][0]
    assert {
        "nodes",
        "key_groups",
        "max_migrations",
        "milp_distance_pct",
        "flux_distance_pct",
        "milp_solve_s",
    } <= set(row)
    assert row["milp_distance_pct"] <= row["initial_distance_pct"]
    ac = data["albic_vs_cola"]
    assert [r["max_collocation_pct"] for r in ac] == [0.0, 0.0, 100.0, 100.0]
    assert [r["albic_variant"] for r in ac] == ["literal", "tuned"] * 2
    # maxMigrations is 5 % of the key groups: 2 at 32.
    assert all(r["max_migrations"] == 2 and r["albic_migrations"] <= 2 for r in ac)
    assert [r["setup"] for r in data["albic_vs_cola_sizes"]] == ["3x24x3"] * 2
    assert [r["albic_variant"] for r in data["real_job2"]] == ["literal", "tuned"]
    for r in ac:
        assert {
            "albic_collocation_pct",
            "cola_collocation_pct",
            "albic_migrations",
            "cola_migrations",
        } <= set(r)
    assert len(data["scale_in"]) == 4
    md = (tmp_path / "results.md").read_text()
    assert "MILP vs Flux" in md and "## Headline figures" in md
    for png in ("milp_vs_flux.png", "scale_in.png", "albic_vs_cola.png", "albic_periods.png"):
        assert (tmp_path / png).stat().st_size > 0
    assert set(res) >= {"milp_vs_flux", "albic_vs_cola", "scale_in"}
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert heads == data["headline"]
    assert all(set(h) == {"figure", "variant", "paper", "measured"} for h in heads)
    assert {h["variant"] for h in heads} == {"literal", "tuned"}
    # Fig. 12's points: one line per run and period (2 factors x 2 variants + job 2 x 2).
    lines = [json.loads(x) for x in (tmp_path / "periods.jsonl").read_text().splitlines()]
    assert len(lines) == 6 * 2 and {x["period"] for x in lines} == {1, 2}
    assert len((tmp_path / "collocation.jsonl").read_text().splitlines()) == 4


def test_albic_starts_low_and_builds_collocation_up() -> None:
    from streamscale.experiments.albic_collocation import albic_vs_cola

    row, series = albic_vs_cola(
        100.0, 2, nodes=4, key_groups=32, operators=4, max_migrations=8, time_limit_s=0.3
    )
    # Dealt round-robin over 4 nodes: about a quarter of the traffic is collocated at
    # the start; COLA's own allocation serves as the contrast.
    assert row["albic_start"] == "spread"
    assert row["albic_start_collocation_pct"] < 50.0
    assert row["albic_final_collocation_pct"] == series["albic_coll"][-1]
    assert row["albic_final_collocation_pct"] > row["albic_start_collocation_pct"]
