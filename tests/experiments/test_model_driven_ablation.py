"""The Diamond (paper 004, §8.4.1) ablation: LSA + RSM at 50 t/s, one rule changed a row."""

from __future__ import annotations

import json

import pytest

from streamscale.experiments.model_driven import paper_models
from streamscale.experiments.model_driven_ablation import (
    TABLE_FILE,
    ablation,
    paper_table_mapping,
)


def test_paper_table_mapping_is_the_papers_arithmetic() -> None:
    # Table's model: 2 threads on a slot sustain 5 t/s, 9 threads 10 t/s (both read
    # off §8.4.1). Capacity sum 4·5 + 10 = 30 (the paper's figure); under shuffle
    # grouping each of the 17 threads gets 1/17 of the rate and the 9-thread slot,
    # 10/9 t/s a thread, decides: 17·10/9 = 18.89.
    r = paper_table_mapping(paper_models())
    assert r["predicted_capacity_sum"] == pytest.approx(30.0)
    assert r["predicted_shuffle"] == pytest.approx(17 * 10 / 9, abs=0.01)


def test_rows_place_every_table_thread_and_stay_below_the_lsa_plan() -> None:
    rows = ablation()
    first = rows[0]
    assert first["slot_choice"] == "first-fit" and first["table_threads"] == 17
    assert first["predicted_shuffle"] <= first["predicted_capacity_sum"] <= 50.0
    for r in rows[:-1]:
        assert sum(r["table_threads_per_slot"]) == r["table_threads"]
        # shuffle grouping never beats capacity-weighted routing on the same mapping
        assert r["predicted_shuffle"] <= r["predicted_capacity_sum"] + 1e-9
        assert min(r["task_rates_capacity_sum"].values()) == pytest.approx(
            r["predicted_capacity_sum"], abs=0.01
        )
    # first-fit crowds Table into fewer slots than best-fit
    best = next(r for r in rows if r["slot_choice"] == "best-fit" and r["table_threads"] == 17)
    assert len(best["table_threads_per_slot"]) > len(first["table_threads_per_slot"])


def test_committed_table_is_what_the_module_prints() -> None:
    committed = [json.loads(x) for x in TABLE_FILE.read_text().splitlines()]
    assert committed == ablation()
