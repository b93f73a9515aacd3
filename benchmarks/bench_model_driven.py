"""Benchmarks of paper 004's planners with the paper's task models.

Prints one JSON line per figure, each with a ``"bench"`` key:

* ``plan_time`` — per DAG (Linear, Diamond, Star, Grid) at 200 t/s: median wall
  time of allocation + mapping + prediction for LSA+RSM and MBA+SAM (repeats
  measured in one run), the threads each plan maps and the slots it uses.
* ``slots`` — MBA/LSA slot ratio over the micro DAGs at 50/100/200 t/s (paper:
  about 0.5) and how many cases needed extra slots with RSM and SAM.
* ``routing`` — MBA+SAM's predicted rate over the planned rate, shuffle
  grouping against capacity-weighted routing, median over the micro DAGs.

Run: ``.venv/bin/python benchmarks/bench_model_driven.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from streamscale.experiments.model_driven import load_dag, paper_models, scenario


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else 9
    models = paper_models()
    for dag in ("linear", "diamond", "star", "grid"):
        topo = load_dag(dag)
        times = []
        row: dict[str, Any] = {}
        for _ in range(repeats):
            t = time.perf_counter()
            row = scenario(topo, models, 200.0)
            times.append(time.perf_counter() - t)
        _emit(
            bench="plan_time",
            dag=dag,
            rate=200.0,
            median_ms=round(1000 * statistics.median(times), 2),
            lsa_rsm_slots=row["lsa_slots"] + row["rsm_extra"],
            mba_sam_slots=row["mba_slots"] + row["sam_extra"],
        )
    rows = [
        scenario(load_dag(d), models, r)
        for d in ("linear", "diamond", "star")
        for r in (50, 100, 200)
    ]
    ratios = [r["mba_slots"] / r["lsa_slots"] for r in rows]
    _emit(
        bench="slots",
        mba_over_lsa_median=round(statistics.median(ratios), 3),
        mba_over_lsa_max=round(max(ratios), 3),
        rsm_extra_cases=sum(1 for r in rows if r["rsm_extra"]),
        sam_extra_cases=sum(1 for r in rows if r["sam_extra"]),
        cases=len(rows),
    )
    _emit(
        bench="routing",
        shuffle_over_planned_median=round(
            statistics.median(r["mba_sam_predicted_rate"] / r["rate"] for r in rows), 3
        ),
        weighted_over_planned_median=round(
            statistics.median(r["mba_sam_weighted_rate"] / r["rate"] for r in rows), 3
        ),
    )


if __name__ == "__main__":
    main()
