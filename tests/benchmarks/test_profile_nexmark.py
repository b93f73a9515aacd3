"""profile_nexmark.py: Q8 (its default) over a few thousand events, in a process of its own (it patches
the driver's batch body and counts py4j calls)."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_small_query_prints_batches_jobs_and_py4j_callers(run_script: Run) -> None:
    lines = run_script("profile_nexmark", "--query", "q8", "--events", "2000", "--files", "3")
    assert lines and all(x["bench"] == "profile_nexmark" for x in lines)
    batches = [x for x in lines if "body_s" in x]
    assert len(batches) >= 2
    for b in batches:
        assert b["body_s"] > 0 and b["py4j"] > 0 and b["jobs_ms"] >= 0
    (total,) = [x for x in lines if "wall_s" in x]
    assert total["query"] == "q8" and total["batches"] >= 2 and total["spark_jobs"] > 0
    assert any("job" in x for x in lines)
    (callers,) = [x for x in lines if "py4j_by_caller" in x]
    assert callers["py4j_by_caller"]
