"""profile_stages.py on its smallest chain: per batch, the fused keyed part, the driver's
parts and the batch line with Spark's own trigger times (its progress listener)."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import Run


@pytest.mark.spark
@pytest.mark.slow
def test_a_small_chain_prints_each_batch_its_parts_and_spark_s_trigger_times(
    run_script: Run,
) -> None:
    lines = run_script("profile_stages", "--workloads", "chain3", "--rows", "200",
                       "--batches", "2")  # fmt: skip
    batches = [x for x in lines if x.get("part") == "batch"]
    assert [x["batch"] for x in batches] == [0, 1]
    assert all(x["rows"] == 200 and x["triggerExecution"] > 0 for x in batches)
    keyed = [x for x in lines if str(x.get("part", "")).startswith("keyed:")]
    assert {x["part"] for x in keyed} == {"keyed:op1+op2+op3"}  # one fused chain
    assert next(x for x in lines if x.get("part") == "run")["wall_s"] > 0
