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
    "cola_rounds": 2,
    "albic_max_ld": (5.0,),
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
    assert [r["max_collocation_pct"] for r in ac] == [0.0, 100.0]
    assert all(r["albic_migrations"] <= 20 for r in ac)
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
    for png in ("milp_vs_flux.png", "scale_in.png", "albic_vs_cola.png"):
        assert (tmp_path / png).stat().st_size > 0
    assert set(res) >= {"milp_vs_flux", "albic_vs_cola", "scale_in"}
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert heads == data["headline"]
    assert all(set(h) == {"figure", "variant", "paper", "measured"} for h in heads)
    assert {h["variant"] for h in heads} == {"literal", "tuned"}
    assert data["albic_vs_cola_literal"]["albic_variant"] == "literal"


def test_albic_starts_low_and_builds_collocation_up() -> None:
    from streamscale.experiments.albic import albic_vs_cola

    row, series = albic_vs_cola(100.0, 2, nodes=4, key_groups=32, operators=4, time_limit_s=0.3)
    # Dealt round-robin over 4 nodes: about a quarter of the traffic is collocated at
    # the start; COLA's own allocation serves as the contrast.
    assert row["albic_start"] == "spread"
    assert row["albic_start_collocation_pct"] < 50.0
    assert row["albic_final_collocation_pct"] == series["albic_coll"][-1]
    assert row["albic_final_collocation_pct"] > row["albic_start_collocation_pct"]
