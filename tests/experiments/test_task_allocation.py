"""Smoke test of ``streamscale reproduce task-allocation`` on a tiny configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments.task_allocation import HEADLINE_FILE, run


@pytest.mark.slow
def test_tiny_reproduction_writes_results(tmp_path: Path) -> None:
    run(tmp_path, quick=True, seed=3, graphs=6, noisy_graphs=3, window_s=0.02)
    saved = json.loads((tmp_path / "results.json").read_text())
    opt = saved["optimality"]
    assert opt["graphs"] == 6
    for key in ("naive_pct", "tl_pct", "td_pct"):
        assert 0.0 < opt[key] <= 100.0 + 1e-9
    thr = saved["throughput"]
    assert thr["td_per_s"] > 0 and thr["tl_per_s"] > 0
    assert len(saved["task_count"]["rows"]) == 7
    assert len(saved["varying_rate"]["rows"]) == 12
    md = (tmp_path / "results.md").read_text()
    assert "93.1" in md and "Fig. 4(b)" in md
    for png in ("optimality.png", "micro.png", "throughput.png"):
        assert (tmp_path / png).stat().st_size > 0
    # One JSON line per headline figure and variant, on stdout and in headline.jsonl.
    lines = (tmp_path / "headline.jsonl").read_text().splitlines()
    heads = [json.loads(x) for x in lines]
    assert heads == saved["headline"]
    assert {h["variant"] for h in heads} == {"literal", "tuned"}
    assert all(set(h) == {"figure", "variant", "paper", "measured"} for h in heads)
    ex2 = {h["variant"]: h["measured"] for h in heads if h["figure"].startswith("001 Example 2 TL")}
    assert ex2 == {"literal": 36, "tuned": 96}  # hand-traced in tests/planning/test_task_level.py
    for name in ("td-literal", "tl-imc-storm"):
        assert 0.0 < opt["detail"]["pct_of_optimal"][name] <= 100.0 + 1e-9


def _committed() -> list[dict[str, object]]:
    return [json.loads(x) for x in HEADLINE_FILE.read_text().splitlines()]


@pytest.mark.slow
def test_committed_headline_is_what_reproduce_quick_prints(tmp_path: Path) -> None:
    # ``streamscale reproduce task-allocation --quick`` (seed 1) regenerates the file.
    run(tmp_path, quick=True, seed=1, window_s=0.02)
    assert [json.loads(x) for x in (tmp_path / "headline.jsonl").read_text().splitlines()] == (
        _committed()
    )


def test_paper_page_quotes_the_full_scale_headline() -> None:
    # The paper page's full-scale sentence states the committed full-run figures.
    from streamscale.experiments.task_allocation import FULL_HEADLINE_FILE

    readme = (Path(__file__).parents[2] / "docs" / "papers" / "task-allocation.md").read_text()
    start = readme.index("Full scale (`streamscale reproduce task-allocation --seed 1`")
    end = readme.find("\n## ", start)
    text = " ".join(readme[start : end if end >= 0 else None].split())
    heads = [json.loads(x) for x in FULL_HEADLINE_FILE.read_text().splitlines()]
    got = {(h["figure"].split(" ")[2], h["variant"]): h["measured"] for h in heads}
    lit = [got[(k, "literal")] for k in ("TD", "TL", "naive")]
    tun = [got[(k, "tuned")] for k in ("TD", "TL", "naive")]
    assert f"TD {lit[0]} %, TL {lit[1]} %, naive {lit[2]} % of it literal" in text
    assert f"{tun[0]} %, {tun[1]} %, {tun[2]} % tuned" in text
    assert f"optimum {got[('optimum,', 'literal')]} GB/s per 2000 jobs" in text
