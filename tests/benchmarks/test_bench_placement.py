"""bench_placement.py --smoke: spark-default and elastic on a two-worker loopback cluster,
each keyed operator with as many instances as fit the cores, and the ratio line."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_smoke_runs_both_policies_and_the_ratio(run_script: Run) -> None:
    lines = run_script("bench_placement", "--smoke", timeout=600)
    runs = [x for x in lines if x["bench"] == "placement"]
    assert [x["policy"] for x in runs] == ["spark-default", "elastic"]
    default, elastic = runs
    assert default["tasks_pinned"] == 0 and default["placement_hit"] is None
    assert elastic["tasks_pinned"] > 0 and 0 <= elastic["placement_hit"] <= 1
    for x in runs:
        assert x["batches"] >= 1 and x["throughput"] > 0
        assert x["remote_shuffle_bytes"] + x["local_shuffle_bytes"] > 0
    (ratio,) = [x for x in lines if x["bench"] == "placement-ratio"]
    assert ratio["policy"] == "elastic" and ratio["target_hit"] == 0.99
