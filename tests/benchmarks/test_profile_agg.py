"""profile_agg.py: one timed batch of the elastic-agg path, in a process of its own (it
patches the keyed operator and reads Spark's UI)."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_one_small_batch_prints_the_batch_stages_and_totals(run_script: Run) -> None:
    lines = run_script("profile_agg", "--rows", "2000", "--batches", "1")
    assert lines and all(x["bench"] == "profile_agg" for x in lines)
    batches = [x for x in lines if "batch" in x]
    assert [x["batch"] for x in batches] == [1]
    assert batches[0]["rows"] == 2000 and batches[0]["foreach_batch_s"] > 0
    assert batches[0]["run_agg_s"] > 0 and batches[0]["task_busy_s"]
    assert any("stage" in x for x in lines)
    (total,) = [x for x in lines if "run_wall_s" in x]
    assert total["stages"] > 0 and total["executor_run_s_by_kind"]
