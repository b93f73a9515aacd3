"""ALBIC vs COLA over adaptation periods (paper 003, §5.3-5.4): set-up and summaries."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.experiments.albic_collocation import (
    migration_budget,
    period_lines,
    real_job2,
    real_job2_problem,
    remote_rate,
    spread,
    summarise,
)
from streamscale.planning.balancing.metrics import collocation_factor


def test_remote_rate_against_a_loop() -> None:
    p, _ = real_job2_problem(nodes=3, per_node=2, seed=4)
    asg = np.array([0, 1, 2, 0, 1, 2, 0, 0, 2, 2, 1, 1])
    want = np.zeros(p.k)
    for a, b, r in p.traffic:
        if asg[int(a)] != asg[int(b)]:
            want[int(a)] += r
            want[int(b)] += r
    assert remote_rate(p, asg) == pytest.approx(want)


def test_real_job2_starts_split_with_half_its_load_communication() -> None:
    p, ser = real_job2_problem(nodes=4, per_node=5, comm_share=0.5, seed=2)
    assert p.k == 40 and collocation_factor(p) == 0.0
    comm = ser * remote_rate(p, p.assignment).sum()
    assert comm == pytest.approx(p.load.sum())  # half of processing + communication
    # every node holds ten key groups
    assert np.bincount(p.assignment, minlength=4).tolist() == [10] * 4


def test_spread_deals_key_groups_evenly() -> None:
    p, _ = real_job2_problem(nodes=4, per_node=3, seed=1)
    q = spread(p, seed=5)
    assert np.bincount(q.assignment, minlength=4).tolist() == [6] * 4
    assert migration_budget(800) == 40 and migration_budget(10) == 1


def test_summarise_reach_and_ratio() -> None:
    s = {
        "start_coll": [0.0],
        "albic_coll": [10.0, 50.0, 75.0],
        "cola_coll": [80.0, 80.0, 80.0],
        "albic_ld": [3.0, 2.0, 1.0],
        "cola_ld": [1.0, 1.0, 1.0],
        "albic_mig": [10.0, 10.0, 10.0],
        "cola_mig": [200.0, 190.0, 210.0],
        "albic_index": [1.0, 0.9, 0.8],
        "cola_index": [0.7, 0.7, 0.7],
    }
    row = summarise(s)
    assert row["periods_to_within_10_points"] == 3
    assert row["cola_over_albic_migrations"] == pytest.approx(20.0)
    assert row["albic_minus_cola_final_points"] == pytest.approx(-5.0)
    lines = period_lines({"x": s})
    assert [ln["period"] for ln in lines] == [1, 2, 3]
    assert lines[1]["albic_coll"] == 50.0 and lines[2]["cola_mig"] == 210.0


def test_real_job2_albic_builds_collocation_within_its_budget() -> None:
    row, s = real_job2(3, max_migrations=4, time_limit_s=0.5)
    assert all(m <= 4 for m in s["albic_mig"])
    assert s["albic_coll"][-1] > s["albic_coll"][0] > 0.0
    assert row["cola_final_collocation_pct"] > 90.0  # COLA re-partitions: pairs together
