"""Task allocation (paper 001): TD/TL throughput and optimality ratios.

Prints one JSON line per figure, each with a ``"bench"`` key:

* ``td_per_s`` / ``tl_per_s`` — allocations per second on the 4 groups ×
  100 tasks pipeline of §7.2 (median of timing windows; each allocation is
  expanded to a task → node map). Target: TD ≥ 2,640/s (10× the paper's 264).
* ``optimality`` — total IMC gain of naive, TL, TL-IMC and TD as % of the
  CP-SAT optimum over random jobs of §7.3, and how many optima were proven.

Run: ``.venv/bin/python benchmarks/bench_task_allocation.py [--quick] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json

from streamscale.experiments.task_allocation_runs import optimality, throughput

__all__ = ["main"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer jobs and shorter windows")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    thr = throughput(window_s=0.5 if args.quick else 2.0, windows=3 if args.quick else 5)
    for name in ("td", "tl", "tl-imc"):
        print(
            json.dumps(
                {
                    "bench": f"{name.replace('-', '_')}_per_s",
                    "value": thr[f"{name}_per_s"],
                    "windows": thr[f"{name}_windows"],
                    "job": thr["job"],
                }
            )
        )
    print(json.dumps({"bench": "td_over_tl", "value": thr["td_over_tl"]}))
    opt = optimality(200 if args.quick else 2000, args.seed)
    print(
        json.dumps(
            {
                "bench": "optimality",
                "graphs": opt["graphs"],
                "proven_optimal": opt["proven_optimal"],
                "pct_of_optimal": opt["pct_of_optimal"],
                "median_ratio": opt["median_ratio"],
            }
        )
    )


if __name__ == "__main__":
    main()
