"""GMA speed (paper 002, §IV.E, Algorithm 1): placements per second and search effort.

Prints one JSON line per figure, each with a ``"bench"`` key:

* ``gma_setting`` — the reproduction's setting (top-k, 10 units on 10 loaded
  nodes, 1200 tuples/s): median wall time per GMA placement, placements/s,
  median candidate evaluations, and the same for Even as a floor.
* ``gma_scale`` — random tight instances of growing size (nodes × units;
  at 10 × 20 about half have no feasible placement at all): median wall time, median
  evaluations, the share placed feasibly and the share that exhausted the
  default budget (the rest were proven infeasible or solved).

Run: ``.venv/bin/python benchmarks/bench_gma.py [--quick] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from streamscale.experiments.elastic_allocator_feasibility import random_instance
from streamscale.experiments.elastic_allocator_setup import setting
from streamscale.planning.placement.elastic_allocator import even_placement
from streamscale.planning.placement.gma import gma

__all__ = ["main"]

T = TypeVar("T")


def _timed(fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    t0 = time.perf_counter()
    res = fn(*args)
    return res, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="2 repeats: runs at all")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    reps = 2 if args.smoke else 10 if args.quick else 50

    problems = [setting(1200.0, args.seed * 1000 + r) for r in range(reps)]
    g = [_timed(gma, p) for p in problems]
    e = [_timed(even_placement, p) for p in problems]
    g_ms = statistics.median(t for _, t in g) * 1e3
    print(
        json.dumps(
            {
                "bench": "gma_setting",
                "placements": reps,
                "gma_median_ms": g_ms,
                "gma_per_s": 1e3 / g_ms,
                "gma_median_evaluations": statistics.median(r.operations for r, _ in g),
                "even_median_ms": statistics.median(t for _, t in e) * 1e3,
                "gma_feasible_share": float(np.mean([r.feasible for r, _ in g])),
            }
        )
    )
    rng = np.random.default_rng(args.seed)
    for nodes, units in ((10, 20), (20, 50), (50, 100)):
        runs = [_timed(gma, random_instance(rng, nodes, units)) for _ in range(reps // 2 or 1)]
        print(
            json.dumps(
                {
                    "bench": "gma_scale",
                    "nodes": nodes,
                    "units": units,
                    "instances": len(runs),
                    "median_ms": statistics.median(t for _, t in runs) * 1e3,
                    "median_evaluations": statistics.median(r.operations for r, _ in runs),
                    "feasible_share": float(np.mean([r.feasible for r, _ in runs])),
                    "exhausted_share": float(np.mean([r.exhausted for r, _ in runs])),
                }
            )
        )


if __name__ == "__main__":
    main()
