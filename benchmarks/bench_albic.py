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
* ``albic_vs_cola`` — 40 × 800 × 20, maximum collocation factor 50 %, both
  from COLA's allocation at submission, then rounds where 20 % of the nodes
  change load: mean collocation factor and migrations per round, their ratios
  and whether the target holds (ALBIC's collocation ≥ 90 % of COLA's with
  ≥ 10× fewer migrations).

Run: ``.venv/bin/python benchmarks/bench_albic.py [--quick] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from streamscale.experiments.albic import albic_vs_cola
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rounds = 6 if args.quick else 10
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

    row, _ = albic_vs_cola(50.0, 3 if args.quick else 6, seed=args.seed)
    coll_ratio = row["albic_collocation_pct"] / max(row["cola_collocation_pct"], 1e-9)
    mig_ratio = row["cola_migrations"] / max(row["albic_migrations"], 1e-9)
    _emit(
        bench="albic_vs_cola",
        **row,
        collocation_ratio=coll_ratio,
        migration_ratio=mig_ratio,
        target_met=bool(coll_ratio >= 0.9 and mig_ratio >= 10.0),
    )


if __name__ == "__main__":
    main()
