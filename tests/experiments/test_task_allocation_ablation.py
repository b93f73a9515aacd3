"""The task-allocation ablation (paper 001, §7.3) on a few jobs, and its committed table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.experiments.task_allocation_ablation import (
    READINGS,
    RULES,
    TD_RULES,
    TD_RULES_FILE,
    reading_row,
    td_rules_row,
)

TABLE = Path(__file__).parents[2] / "src/streamscale/experiments/task_allocation_ablation.jsonl"


def test_a_row_scores_every_rule_against_the_proven_optimum() -> None:
    label, kw, seed = READINGS[-2]  # the tree reading
    row = reading_row(label, kw, seed, graphs=12)
    assert row["shape"] == "tree" and row["graphs"] == row["proven_optimal"] == 12
    assert set(row["pct_of_optimal"]) == set(RULES)
    assert all(0.0 < v <= 100.0 + 1e-9 for v in row["pct_of_optimal"].values())


@pytest.mark.parametrize("total_cost", [500.0, 400.0])
def test_k0_partial_split_never_loses_to_to_r_on_coarse_jobs(total_cost: float) -> None:
    # On these 20 jobs the partial split of a pair no node takes whole only adds
    # collocation; the optimum bounds both.
    row = reading_row("x", {"split": "multinomial", "total_cost": total_cost}, 4, graphs=20)
    pct = row["pct_of_optimal"]
    assert pct["td-literal"] >= pct["td-literal-to-r"]
    assert pct["td"] >= pct["td-to-r"]


def test_committed_table_has_every_reading_and_rule() -> None:
    rows = [json.loads(x) for x in TABLE.read_text().splitlines()]
    assert [r["generator"] for r in rows] == [label for label, _, _ in READINGS]
    assert all(set(r["pct_of_optimal"]) == set(RULES) for r in rows)
    assert all(r["proven_optimal"] == r["graphs"] == 2000 for r in rows)


def test_td_rules_row_scores_every_rule_against_the_proven_optimum() -> None:
    row = td_rules_row(12, seed=2)
    assert row["graphs"] == row["proven_optimal"] == 12
    assert set(row["pct_of_optimal"]) == set(TD_RULES) == set(row["incomplete"])
    assert all(0.0 < v <= 100.0 + 1e-9 for v in row["pct_of_optimal"].values())


def test_committed_td_rules_row() -> None:
    rows = [json.loads(x) for x in TD_RULES_FILE.read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert row["proven_optimal"] == row["graphs"] == 2000
    assert set(row["pct_of_optimal"]) == set(TD_RULES)
    # TD is literal TD with both of §4's rules; either alone lies between the two.
    pct = row["pct_of_optimal"]
    for rule in ("td-literal + all partner nodes", "td-literal + spare fill"):
        assert pct["td-literal"] - 0.05 <= pct[rule] <= pct["td"] + 0.05
