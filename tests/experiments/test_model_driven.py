"""Smoke test of ``streamscale reproduce model-driven`` (paper 004)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments import model_driven
from streamscale.experiments.report import figures, read_headline


@pytest.mark.slow
def test_reproduction_writes_results(tmp_path: Path) -> None:
    res = model_driven.run(tmp_path, quick=True, seed=0)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["micro"] == res["micro"]
    assert (tmp_path / "results.md").read_text().startswith("# Model-driven")
    assert (tmp_path / "slots.png").stat().st_size > 0
    keys = {
        "dag",
        "rate",
        "lsa_slots",
        "mba_slots",
        "rsm_extra",
        "sam_extra",
        "lsa_rsm_predicted_rate",
        "mba_sam_predicted_rate",
    }
    assert len(res["micro"]) == 9
    for row in res["micro"]:
        assert keys <= row.keys()
        assert row["mba_slots"] < row["lsa_slots"]  # MBA needs clearly fewer slots
    pairs = {r["pair"]: r for r in res["fixed_cluster"] if r["dag"] == "linear"}
    assert pairs["mba+sam"]["planned_rate"] > pairs["lsa+rsm"]["planned_rate"]
    heads = [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()]
    assert heads == saved["headline"]
    assert all(set(h) == {"figure", "variant", "paper", "measured"} for h in heads)
    sam = {
        h["variant"]: h["measured"]
        for h in heads
        if "where SAM" in h["figure"] and "slots added to ρ" in h["figure"]
    }
    # Counted from the rows the §8.4 mappings produced, independently of the headline code.
    assert sam == {
        "literal": sum(1 for r in res["micro"] if r["sam_literal_extra"] > 0),
        "tuned": sum(1 for r in res["micro"] if r["sam_extra"] > 0),
    }
    for h in heads:
        assert h["figure"].endswith(("[calibration]", "[held out]"))
    md = (tmp_path / "results.md").read_text()
    assert "## Calibration anchors and held-out comparisons" in md


def test_scenario_tiny() -> None:
    models = model_driven.paper_models()
    row = model_driven.scenario(model_driven.load_dag("linear"), models, 50)
    assert (row["lsa_slots"], row["mba_slots"]) == (7, 4)
    assert 0 < row["mba_sam_predicted_rate"] <= row["mba_sam_weighted_rate"] <= 50 + 1e-9
    # Algorithm 6 as written maps a whole bundle whenever τ̂ threads remain: here it
    # needs at least the slots of the bundle-count reading.
    assert row["sam_literal_extra"] >= row["sam_extra"]
    # Extra slots under both acquisition readings and both conventions.
    ex = row["extra"]
    assert (ex["rsm"]["7.1-added"], ex["sam"]["7.1-added"]) == (row["rsm_extra"], row["sam_extra"])
    assert ex["sam-literal"]["7.1-added"] == row["sam_literal_extra"]
    for by in ex.values():
        # §7.1 buys D3 + D3 for ρ = 7 (one slot beyond ρ), so "bought" ≥ "added"
        assert by["7.1-bought"] >= by["7.1-added"] >= 0 and by["8.2"] >= 0
    assert ex["sam"]["7.1-bought"] == ex["sam"]["7.1-added"]  # MBA's ρ = 4: one D3, none beyond


def _figures(path: Path) -> dict[tuple[str, str], object]:
    heads = [json.loads(x) for x in path.read_text().splitlines()]
    return {(h["figure"], h["variant"]): h["measured"] for h in heads}


def test_full_headline_differs_from_quick_only_on_the_fixed_cluster() -> None:
    # The full run refines only the fixed cluster's rate steps (§8.5); §8.4 is shared.
    quick = _figures(model_driven.HEADLINE_FILE)
    full = _figures(model_driven.FULL_HEADLINE_FILE)
    assert quick.keys() == full.keys()
    assert {k: v for k, v in full.items() if "§8.4" in k[0]} == {
        k: v for k, v in quick.items() if "§8.4" in k[0]
    }
    # RSM's two variants both take the best-fit slot (RSM_SLOT_CHOICE)
    for (figure, variant), v in full.items():
        if "RSM" in figure and variant == "literal":
            assert full[(figure, "tuned")] == v


def test_paper_page_quotes_the_full_run() -> None:
    full = _figures(model_driven.FULL_HEADLINE_FILE)

    def fig(pair: str, how: str) -> object:
        name = f"004 §8.5 Linear, 5 × 4 slots, {pair} predicted rate ({how}) [held out]"
        return full[(name, "tuned")]

    readme = (Path(__file__).parents[2] / "docs" / "papers" / "model-driven.md").read_text()
    start = readme.index("Full run (`streamscale reproduce model-driven --seed 1`")
    text = " ".join(readme[start : readme.index("Why the Diamond", start)].split())
    planned = full[("004 §8.5 Linear, 5 × 4 slots, MBA planned rate [calibration]", "tuned")]
    assert f"MBA plans {planned:g} t/s" in text
    for pair in ("MBA+DSM", "MBA+RSM", "MBA+SAM"):
        assert f"{pair} {fig(pair, 'shuffle'):g} / {fig(pair, 'capacity sum'):g}" in text


@pytest.mark.slow
def test_full_headline_is_what_reproduce_prints(tmp_path: Path) -> None:
    model_driven.run(tmp_path, quick=False, seed=1)
    # every field but the run's provenance (command, commit, time): figure, paper, measured
    fresh = figures(read_headline(tmp_path / "headline.jsonl"))
    assert fresh == figures(read_headline(model_driven.FULL_HEADLINE_FILE))
