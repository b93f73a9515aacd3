"""Which generator reading and which rule move paper 001's §7.3 figures.

Paper 001, §7.3 describes its random jobs in one paragraph (3–7 groups, 17
tasks "distributed" to them, 500 % of processing cost "correlated" with
their task counts, fan-out 1/2/3 with probability .70/.25/.05, 5–20 MB/s per
edge, 8 single-core nodes) and reports three figures: the optimum's total
IMC gain over 2000 jobs (26.3 GB/s), TD at 93.1 % and TL (prioritised by
IMC) at 85.9 % of it. Each row here is one reading of the generator, with
the total gain of every heuristic as a percentage of the CP-SAT optimum:

* ``split``: how the 17 tasks are shared out (uniform over compositions, or
  one task each and the rest multinomially);
* ``cost_noise``: costs only loosely proportional to task counts;
* ``imc``: the edge IMC range (the percentages do not depend on its scale);
* ``seed``: the spread between job samples of the same reading.

The rule columns: naive as §3.1 first states it (``naive-literal``) and with
its refinement (``naive``), TL-IMC in task-id order (``tl-imc-storm``) and
in the tuned diagonal order (``tl-imc``), TD as Algorithm 5 is printed
(``td-literal``) and with the fills §4's text describes (``td``).
"""

from __future__ import annotations

import time
from typing import Any

from streamscale.experiments.task_allocation_runs import optimality

__all__ = ["READINGS", "RULES", "ablation", "reading_row"]

# (label, generator keywords, seed)
READINGS: tuple[tuple[str, dict[str, Any], int], ...] = (
    ("compositions", {"split": "compositions"}, 1),
    ("multinomial", {"split": "multinomial"}, 1),
    ("multinomial", {"split": "multinomial"}, 2),
    ("multinomial", {"split": "multinomial"}, 3),
    ("compositions, cost noise 0.5", {"split": "compositions", "cost_noise": 0.5}, 1),
    ("multinomial, cost noise 0.5", {"split": "multinomial", "cost_noise": 0.5}, 1),
    ("multinomial, IMC 5-15 MB/s", {"split": "multinomial", "imc": (5.0, 15.0)}, 1),
)
RULES = ("naive-literal", "naive", "tl-imc-storm", "tl-imc", "tl", "td-literal", "td")


def reading_row(label: str, kw: dict[str, Any], seed: int, graphs: int) -> dict[str, Any]:
    """One generator reading: optimum level and every rule's % of it."""
    t0 = time.perf_counter()
    opt = optimality(graphs, seed, **kw)
    pct = opt["pct_of_optimal"]
    return {
        "bench": "task_allocation_ablation",
        "generator": label,
        "split": opt["split"],
        "cost_noise": opt["cost_noise"],
        "imc": opt["imc"],
        "seed": seed,
        "graphs": opt["graphs"],
        "proven_optimal": opt["proven_optimal"],
        "optimal_gbps_per_2000_jobs": round(
            opt["total_gain_gbps"]["optimal"] * 2000 / max(1, opt["graphs"]), 2
        ),
        "paper_optimal_gbps_per_2000_jobs": 26.3,
        "optimal_share_of_imc_pct": round(opt["optimal_share_of_imc_pct"] or 0.0, 2),
        "pct_of_optimal": {r: round(pct[r], 2) for r in RULES},
        "paper_pct_of_optimal": {"td": 93.1, "tl-imc": 85.9},
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }


def ablation(graphs: int) -> list[dict[str, Any]]:
    """Every row of :data:`READINGS` over ``graphs`` jobs each."""
    return [reading_row(label, kw, seed, graphs) for label, kw, seed in READINGS]
