"""Docs drift: every reproduction's headline figures live in one committed file.

Each paper's page (``docs/papers/NAME.md``) quotes its committed ``*_headline.jsonl``
as a table between ``<!-- headline:NAME -->`` markers; ``streamscale reproduce NAME
--quick`` (seed 1) regenerates the file. Either side drifting fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from streamscale.experiments import (
    albic,
    elastic_allocator,
    elasticutor,
    model_driven,
    task_allocation,
)
from streamscale.experiments.albic_collocation import VARIANTS, albic_vs_cola, real_job2
from streamscale.experiments.albic_setup import headline as albic_headline
from streamscale.experiments.elastic_allocator_feasibility import headline as ea_headline
from streamscale.experiments.elastic_allocator_feasibility import objective_gap
from streamscale.experiments.report import read_headline, readme_block

PAPERS = Path(__file__).parents[2] / "docs" / "papers"
MODULES: dict[str, ModuleType] = {
    "task-allocation": task_allocation,
    "elastic-allocator": elastic_allocator,
    "albic": albic,
    "model-driven": model_driven,
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_paper_page_quotes_the_committed_headline_figures(name: str) -> None:
    readme = (PAPERS / f"{name}.md").read_text()
    tag = f"<!-- headline:{name} -->"
    start = readme.index(tag) + len(tag)
    end = readme.index(f"<!-- /headline:{name} -->")
    committed = read_headline(MODULES[name].HEADLINE_FILE)
    assert readme[start:end].strip() == readme_block(committed).strip()


#: what each Elasticutor headline record carries: the figure and the run that produced it
ELASTICUTOR_KEYS = {"figure", "variant", "paper", "measured", "command", "commit", "utc", "wall_s"}


@pytest.mark.parametrize(
    ("tag", "path", "command"),
    [
        ("elasticutor", elasticutor.HEADLINE_FILE, "streamscale reproduce elasticutor --seed 1"),
        (
            "elasticutor-quick",
            elasticutor.QUICK_HEADLINE_FILE,
            "streamscale reproduce elasticutor --quick --seed 1",
        ),
    ],
)
def test_paper_page_quotes_the_committed_elasticutor_figures(
    tag: str, path: Path, command: str
) -> None:
    # the target figures (faithful baselines only: no tuned variant), each record naming
    # the command and the clean commit that produced the file
    readme = (PAPERS / "elasticutor.md").read_text()
    start = readme.index(f"<!-- headline:{tag} -->") + len(f"<!-- headline:{tag} -->")
    end = readme.index(f"<!-- /headline:{tag} -->")
    committed = read_headline(path)
    assert committed and all(
        set(h) == ELASTICUTOR_KEYS and h["variant"] == "literal" for h in committed
    )
    assert {h["command"] for h in committed} == {command}
    assert len({h["commit"] for h in committed}) == 1
    assert all(re.fullmatch(r"[0-9a-f]{12}", h["commit"]) for h in committed)
    assert readme[start:end].strip() == readme_block(committed).strip()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_committed_headlines_have_both_variants(name: str) -> None:
    heads = read_headline(MODULES[name].HEADLINE_FILE)
    assert heads and all(set(h) == {"figure", "variant", "paper", "measured"} for h in heads)
    assert {h["variant"] for h in heads} == {"literal", "tuned"}


@pytest.mark.slow
def test_elastic_allocator_headline_is_what_reproduce_quick_prints(tmp_path: Path) -> None:
    elastic_allocator.run(tmp_path, quick=True, seed=1)
    committed = read_headline(elastic_allocator.HEADLINE_FILE)
    assert read_headline(tmp_path / "headline.jsonl") == committed
    # The objective-gap figures, recomputed apart from the run: 100 tiny instances.
    gap = ea_headline(objective_gap(100, 1))
    assert gap == [h for h in committed if not h["figure"].startswith("002 §V.B")]


@pytest.mark.slow
def test_model_driven_headline_is_what_reproduce_quick_prints(tmp_path: Path) -> None:
    model_driven.run(tmp_path, quick=True, seed=1)
    assert read_headline(tmp_path / "headline.jsonl") == read_headline(model_driven.HEADLINE_FILE)


def _numbers(v: Any) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", str(v))]


@pytest.mark.slow
def test_albic_headline_is_what_reproduce_quick_prints() -> None:
    # The MILP's steps end on wall-clock limits, so a rerun matches within a tolerance:
    # 3 points of collocation or load distance, 3 periods (5 for a first period), 5 % of a migration figure
    # (+ 1), 45 % of the COLA / ALBIC migration ratio.
    cfg = albic.QUICK
    n, k, o = cfg["cola_setup"]
    top = max(cfg["collocation"])
    tl = cfg["time_limit_s"]
    synth, job2 = {}, {}
    for v in VARIANTS:
        synth[v], _ = albic_vs_cola(
            top, cfg["periods"], nodes=n, key_groups=k, operators=o, variant=v, time_limit_s=tl
        )
        job2[v], _ = real_job2(
            cfg["job2_periods"],
            variant=v,
            max_load_distance_pct=cfg["job2_max_ld"],
            time_limit_s=tl,
        )
    fresh = albic_headline(synth, job2)
    committed = read_headline(albic.HEADLINE_FILE)
    assert [(h["figure"], h["variant"], h["paper"]) for h in fresh] == [
        (h["figure"], h["variant"], h["paper"]) for h in committed
    ]
    for a, b in zip(fresh, committed, strict=True):
        got, want = _numbers(a["measured"]), _numbers(b["measured"])
        assert len(got) == len(want), (a, b)
        for x, y in zip(got, want, strict=True):
            tol = 3.0
            # ALBIC's last-period distance (literal) measured 2.13, 1.35 and, at a load
            # average of 13, 3.73: the general 3 points
            if "COLA / ALBIC migrations" in a["figure"]:
                # A ratio over ALBIC's few migrations: measured 19.5-29.8 for one committed
                # 29.8 as CPU load shortens the MILP's 40 ms steps (docs/papers/albic.md).
                tol = 0.45 * abs(y)
            elif "migrations" in a["figure"]:
                tol = 0.05 * abs(y) + 1.0
            elif "first period" in a["figure"]:
                # A period count: real job 2's tuned reach measured 17 (committed) and 13 in a
                # clean-clone CI run under load, each windowed step's 40 ms ending sooner.
                tol = 5.0
            elif "collocation" in a["figure"]:
                # Real job 2's tuned collocation at period 40 measured 98.2 (committed),
                # 95.6 and 93.0 in clean-clone CI runs at a load average of 10-20: 8 points.
                tol = 8.0
            assert abs(x - y) <= tol, (a, b)


#: Run-to-run spread of ``reproduce elasticutor --quick --seed 1``: none. Three runs


#: every reproduction's full-scale headline file (``streamscale reproduce NAME --seed 1``)
FULL_HEADLINES: dict[str, Path] = {
    "elasticutor": elasticutor.HEADLINE_FILE,
    "task-allocation": task_allocation.FULL_HEADLINE_FILE,
    "model-driven": model_driven.FULL_HEADLINE_FILE,
    "albic": albic.FULL_HEADLINE_FILE,
    "elastic-allocator": elastic_allocator.FULL_HEADLINE_FILE,
}


@pytest.mark.parametrize("name", sorted(FULL_HEADLINES))
def test_full_scale_headline_names_its_run_and_the_paper_page_states_its_time(name: str) -> None:
    # one command regenerates it; each record names that command, one clean commit and
    # the run's wall time, which the paper page states
    heads = read_headline(FULL_HEADLINES[name])
    assert heads
    assert {h["command"] for h in heads} == {f"streamscale reproduce {name} --seed 1"}
    commits = {h["commit"] for h in heads}
    assert len(commits) == 1 and re.fullmatch(r"[0-9a-f]{12}", commits.pop())
    walls = {h["wall_s"] for h in heads}
    assert len(walls) == 1
    wall = walls.pop()
    assert wall > 0
    page = " ".join((PAPERS / f"{name}.md").read_text().split())
    assert f"`streamscale reproduce {name} --seed 1`: {wall:,.1f} s wall" in page


@pytest.mark.parametrize("name", ["albic", "elastic-allocator"])
def test_paper_page_quotes_the_full_scale_headline_figures(name: str) -> None:
    readme = (PAPERS / f"{name}.md").read_text()
    tag = f"<!-- headline:{name}-full -->"
    start = readme.index(tag) + len(tag)
    end = readme.index(f"<!-- /headline:{name}-full -->")
    assert readme[start:end].strip() == readme_block(read_headline(FULL_HEADLINES[name])).strip()
