"""bench_model_driven.py --quick: plan time, slots and routing of the model-driven planners."""

from __future__ import annotations

from tests.benchmarks.conftest import Run


def test_quick_prints_plan_time_per_dag_slots_and_routing(run_bench: Run) -> None:
    lines = run_bench("bench_model_driven", "--quick")
    plan = [x for x in lines if x["bench"] == "plan_time"]
    assert [x["dag"] for x in plan] == ["linear", "diamond", "star", "grid"]
    for x in plan:
        assert x["median_ms"] > 0 and x["lsa_rsm_slots"] >= 1 and x["mba_sam_slots"] >= 1
    (slots,) = [x for x in lines if x["bench"] == "slots"]
    assert slots["cases"] == 9 and slots["mba_over_lsa_max"] >= slots["mba_over_lsa_median"] > 0
    (routing,) = [x for x in lines if x["bench"] == "routing"]
    assert routing["shuffle_over_planned_median"] > 0
    assert len(lines) == 6
