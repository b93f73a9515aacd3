"""bench_albic.py --smoke: the MILP against Flux, the two solvers, ALBIC against COLA."""

from __future__ import annotations

from tests.benchmarks.conftest import Run


def test_smoke_prints_every_figure(run_bench: Run) -> None:
    lines = run_bench("bench_albic", "--smoke")
    assert [x["bench"] for x in lines] == [
        "milp_vs_flux", "solver", "albic_vs_cola", "albic_vs_cola",
    ]  # fmt: skip
    milp, solver, *cola = lines
    assert milp["rounds"] == 1 and len(milp["milp_distance_pct"]) == 2
    assert len(milp["flux_distance_pct"]) == 2 and milp["milp_round_wall_s_max"] > 0
    assert isinstance(milp["target_met"], bool)
    assert len(solver["highs_distance_pct"]) == len(solver["cpsat_distance_pct"]) == 2
    for x in cola:
        assert isinstance(x["target_met"], bool)
        assert "albic_minus_cola_final_points" in x
