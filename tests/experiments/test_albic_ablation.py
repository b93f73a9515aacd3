"""The ALBIC ablation's rows on a tiny instance (the committed table is 40 × 800 × 20)."""

from __future__ import annotations

from streamscale.experiments.albic_ablation import ROWS, ablation_row


def test_rows_differ_in_the_rule_they_name() -> None:
    lit = ablation_row(*ROWS[0], periods=3, size=(4, 32, 4), time_limit_s=0.3)
    tun = ablation_row(*ROWS[3], periods=3, size=(4, 32, 4), time_limit_s=0.3)
    assert (lit["new_pairs"], lit["protect_existing"]) == (1, False)
    assert (tun["new_pairs"], tun["pair_share"], tun["protect_existing"]) == (None, 0.5, True)
    for r in (lit, tun):
        assert r["periods"] == 3 and r["max_migrations"] == 2
        assert r["albic_migrations"] <= 2
        assert r["target_met"] == (
            r["albic_minus_cola_final_points"] >= -10.0 and r["cola_over_albic_migrations"] >= 10
        )
    half = ablation_row(*ROWS[10], periods=1, size=(4, 32, 4), time_limit_s=0.3)
    assert half["max_collocation_pct"] == 50.0
