"""The key-group balancers' settings (paper 003), declared once.

The balancers of :mod:`streamscale.planning.adapters.albic` compose their schemas from
these, and the pure functions (:func:`~streamscale.planning.balancing.milp.solve_milp`,
:func:`~streamscale.planning.balancing.albic.albic`,
:func:`~streamscale.planning.balancing.cola.cola`,
:func:`~streamscale.planning.balancing.potc.potc`) take their defaults from them. The
module imports no solver, so registering the balancers stays cheap.
"""

from __future__ import annotations

from streamscale.settings import Setting

__all__ = [
    "BUDGET",
    "MAX_PARTITION_LOAD",
    "MERGE_FACTOR",
    "PAIR_SHARE",
    "SCORE_FACTOR",
    "SOLVE",
    "SOLVER",
    "SPREAD",
    "TIME_LIMIT",
]

BUDGET = (
    Setting("max_migrations", int, 20, "most key groups moved per round (0: no limit)", low=0),
    Setting(
        "max_migration_bytes",
        float,
        None,
        "most state bytes moved per round (unset: no limit)",
        low=0.0,
    ),
)
TIME_LIMIT = Setting(
    "time_limit_s", float, 2.0, "solver time limit per round (s)", low=0.0, low_open=True
)
SOLVE = (
    TIME_LIMIT,
    Setting(
        "deterministic_limit",
        float,
        None,
        "solver work limit (deterministic units; unset: none) for repeatable plans",
        low=0.0,
        low_open=True,
    ),
)
SOLVER = Setting("solver", str, "highs", "the MILP solver", choices=("highs", "cpsat"))
SPREAD = Setting(
    "max_load_distance_pct", float, 5.0, "load distance (% of mean) the result may keep", low=0.0
)
SCORE_FACTOR = Setting(
    "score_factor", float, 1.0, "weight of a collocation's score (§4.3.2)", low=0.0
)
MAX_PARTITION_LOAD = Setting(
    "max_partition_load_pct",
    float,
    25.0,
    "largest collocation set's load, % of the mean node load (maxPartitionLoad, §4.3.2)",
    low=0.0,
    low_open=True,
)
PAIR_SHARE = Setting(
    "pair_share",
    float,
    0.0,
    "0: one new collocation pair a round (§4.3.2 as written); above 0: pairs, highest "
    "rate first, while their moves fit this share of the budget and maxLoadDistance",
    low=0.0,
    high=1.0,
)
MERGE_FACTOR = Setting(
    "merge_factor",
    float,
    0.1,
    "merge overhead per split key, share of its split-off load (assumed: paper 003 gives none)",
    low=0.0,
)
