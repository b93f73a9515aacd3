"""Benchmarks of ALBIC's planners (paper 003, §5) against the issue's targets.

Prints one JSON line per figure, each with a ``"bench"`` key:

* ``milp_vs_flux`` — 40 nodes × 800 key groups × 20 operators (§5.1 setup),
  maxMigrations 20, rounds of balancing from the same perturbed start: the
  load distance (% of the mean node load) per round for the MILP and Flux,
  the MILP's wall time per round (median and max, measured here around
  ``solve_milp``, model building included), the first round at ≤ 1 %, and
  whether the target holds (MILP ≤ 1 % with every round ≤ 2 s, Flux never ≤ 1 %).
* ``solver`` — the same rounds with the default HiGHS (``scipy.optimize.milp``)
  and with CP-SAT inside the windowed MILP.
* ``albic_vs_cola`` — 40 × 800 × 20, maximum collocation factor 100 %, both
  from a spread allocation, then 40 adaptation periods (10 with ``--quick``)
  where 20 % of the nodes change load; ALBIC (literal and tuned) within
  maxMigrations 40 a period, COLA re-partitioning: collocation at the start
  and in the last period, migrations per period, and whether the target
  holds (ALBIC within 10 points of COLA in the last period with ≥ 10× fewer
  migrations).
* ``albic_ablation`` (with ``--ablation``, instead of the above) — one line
  per rule or parameter changed against ALBIC's literal or tuned variant,
  40 periods against COLA (:mod:`streamscale.experiments.albic_ablation`);
  ``--write`` also stores the lines (the committed table:
  ``bench_albic.py --ablation --write src/streamscale/experiments/albic_ablation.jsonl``).

Run: ``.venv/bin/python benchmarks/bench_albic.py [--quick | --smoke] [--seed N] [--ablation
[--write F]]`` (``--smoke``: one round and 2 periods, seconds long).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from streamscale.experiments.albic_ablation import ablation
from streamscale.experiments.albic_collocation import albic_vs_cola
from streamscale.experiments.albic_setup import synthetic
from streamscale.planning.balancing.flux import flux
from streamscale.planning.balancing.metrics import load_distance_pct
from streamscale.planning.balancing.milp import solve_milp


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _milp_rounds(
    rounds: int, budget: int, seed: int, solver: str
) -> tuple[list[float], list[float]]:
    p = synthetic(40, 800, 20, seed=seed)
    dist, wall = [load_distance_pct(p)], []
    for _ in range(rounds):
        t = time.perf_counter()
        res = solve_milp(p, max_migrations=budget, time_limit_s=2.0, seed=seed, solver=solver)
        wall.append(time.perf_counter() - t)
        p = p.replace(assignment=res.assignment)
        dist.append(load_distance_pct(p))
    return dist, wall


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--smoke", action="store_true", help="one round, 2 periods: runs at all")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ablation", action="store_true", help="the rule/parameter ablation only")
    ap.add_argument("--write", type=Path, help="with --ablation: also write the lines here")
    args = ap.parse_args(argv)
    if args.ablation:
        lines = []
        for row in ablation(periods=2 if args.smoke else 10 if args.quick else 40):
            lines.append(json.dumps(row))
            print(lines[-1], flush=True)
        if args.write:
            args.write.write_text("\n".join(lines) + "\n")
        return
    if args.write:
        ap.error("--write goes with --ablation")
    rounds = 1 if args.smoke else 6 if args.quick else 10
    budget = 20

    dist, wall = _milp_rounds(rounds, budget, args.seed, "highs")
    q = synthetic(40, 800, 20, seed=args.seed)
    fdist = [load_distance_pct(q)]
    for _ in range(rounds):
        q = q.replace(assignment=flux(q, max_migrations=budget).assignment)
        fdist.append(load_distance_pct(q))
    first = next((i for i, d in enumerate(dist) if d <= 1.0), None)
    _emit(
        bench="milp_vs_flux",
        nodes=40,
        key_groups=800,
        operators=20,
        max_migrations=budget,
        rounds=rounds,
        milp_distance_pct=dist,
        flux_distance_pct=fdist,
        milp_round_wall_s_median=statistics.median(wall),
        milp_round_wall_s_max=max(wall),
        milp_rounds_to_1pct=first,
        flux_best_pct=min(fdist),
        target_met=bool(first is not None and max(wall) <= 2.0 and min(fdist) > 1.0),
    )

    cdist, cwall = _milp_rounds(rounds, budget, args.seed, "cpsat")
    _emit(
        bench="solver",
        nodes=40,
        key_groups=800,
        max_migrations=budget,
        rounds=rounds,
        highs_distance_pct=dist,
        cpsat_distance_pct=cdist,
        highs_round_wall_s_median=statistics.median(wall),
        cpsat_round_wall_s_median=statistics.median(cwall),
    )

    for variant in ("literal", "tuned"):
        periods = 2 if args.smoke else 10 if args.quick else 40
        row, _ = albic_vs_cola(100.0, periods, variant=variant, seed=args.seed)
        _emit(
            bench="albic_vs_cola",
            **row,
            target_met=bool(
                row["albic_minus_cola_final_points"] >= -10.0
                and (row["cola_over_albic_migrations"] or 0.0) >= 10.0
            ),
        )


if __name__ == "__main__":
    main()
