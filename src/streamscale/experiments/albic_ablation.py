"""Which rule or parameter moves ALBIC's collocation against COLA (paper 003, §5.3).

ALBIC as §4.3.2 is written adds one collocation pair per adaptation period
(step 3) and keeps only the sets it built itself. Each row here runs ALBIC
and COLA side by side for :data:`~streamscale.experiments.albic_collocation.PERIODS`
periods on 40 nodes × 800 key groups × 20 operators (maximum collocation
100 % unless the row says otherwise), from the same spread start, and
changes one thing against the literal or the tuned variant:

* ``new_pairs``: 1 (the paper's step 3) or as many as fit ``pair_share`` of
  the migration budget and maxLoadDistance (``None``);
* ``protect_existing``: keep qualifying pairs that already share a node;
* ``pair_share``: the budget share the new pairs' moves may take;
* ``max_partition_load_pct``: the largest collocation set, % of the mean load;
* ``max_migrations``: the budget per period (5 % of the key groups = 40);
* ``max_load_distance_pct``: the balance ALBIC keeps;
* ``start``: spread, or COLA's allocation at submission (§5.4's suggestion);
* ``seed``.

Written by ``benchmarks/bench_albic.py --ablation --write
src/streamscale/experiments/albic_ablation.jsonl``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from streamscale.experiments.albic_collocation import PERIODS, VARIANTS, albic_vs_cola

__all__ = ["ROWS", "ablation", "ablation_row"]

_LIT = VARIANTS["literal"]
_TUN = VARIANTS["tuned"]

# (label, planner keywords, run keywords)
ROWS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("literal (§4.3.2: one pair a period)", _LIT, {}),
    ("literal + protect_existing", {**_LIT, "protect_existing": True}, {}),
    (
        "literal, new_pairs=None (pairs in half the budget)",
        {**_LIT, "new_pairs": None, "pair_share": 0.5},
        {},
    ),
    ("tuned (new_pairs=None, share 0.5, protect_existing)", _TUN, {}),
    ("tuned, pair_share 0.25", {**_TUN, "pair_share": 0.25}, {}),
    ("tuned, pair_share 0.75", {**_TUN, "pair_share": 0.75}, {}),
    ("tuned, maxPartitionLoad 50 %", _TUN, {"max_partition_load_pct": 50.0}),
    ("tuned, maxMigrations 20 (2.5 %)", _TUN, {"max_migrations": 20}),
    ("tuned, maxLoadDistance 1.5 %", _TUN, {"max_load_distance_pct": 1.5}),
    ("tuned, start from COLA's allocation", _TUN, {"start": "cola"}),
    ("tuned, max collocation 50 %", _TUN, {"max_collocation_pct": 50.0}),
    ("tuned, seed 2", _TUN, {"seed": 2}),
    ("literal, seed 2", _LIT, {"seed": 2}),
)

_KEEP = (
    "setup",
    "max_collocation_pct",
    "albic_start",
    "max_migrations",
    "albic_max_load_distance_pct",
    "albic_max_partition_load_pct",
    "periods",
    "albic_start_collocation_pct",
    "albic_final_collocation_pct",
    "cola_final_collocation_pct",
    "albic_minus_cola_final_points",
    "periods_to_within_10_points",
    "albic_migrations",
    "cola_migrations",
    "cola_over_albic_migrations",
    "albic_final_distance_pct",
    "cola_final_distance_pct",
)


def ablation_row(
    label: str,
    planner: dict[str, Any],
    run: dict[str, Any],
    *,
    periods: int = PERIODS,
    size: tuple[int, int, int] = (40, 800, 20),
    time_limit_s: float = 2.0,
) -> dict[str, Any]:
    """One row: ALBIC with ``planner``'s keywords against COLA, figures rounded."""
    t0 = time.perf_counter()
    kw = {"max_collocation_pct": 100.0, "seed": 1, **run}
    n, k, o = size
    row, _ = albic_vs_cola(
        kw.pop("max_collocation_pct"),
        periods,
        nodes=n,
        key_groups=k,
        operators=o,
        variant=planner,
        time_limit_s=time_limit_s,
        **kw,
    )
    out: dict[str, Any] = {"bench": "albic_ablation", "row": label, "seed": kw["seed"]}
    out |= {key: planner.get(key) for key in ("new_pairs", "pair_share", "protect_existing")}
    for key in _KEEP:
        v = row[key]
        out[key] = round(v, 2) if isinstance(v, float) else v
    out["target_met"] = bool(
        row["albic_minus_cola_final_points"] >= -10.0
        and (row["cola_over_albic_migrations"] or 0.0) >= 10.0
    )
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def ablation(
    *, periods: int = PERIODS, size: tuple[int, int, int] = (40, 800, 20), time_limit_s: float = 2.0
) -> Iterator[dict[str, Any]]:
    """Every row of :data:`ROWS`, as each finishes."""
    for label, p, r in ROWS:
        yield ablation_row(label, p, r, periods=periods, size=size, time_limit_s=time_limit_s)
