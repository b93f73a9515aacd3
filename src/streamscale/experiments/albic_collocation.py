"""ALBIC against COLA over adaptation periods (paper 003, §5.3–5.4, Figures 11–12).

Every period, 20 % of the nodes change load by up to ±10 % (§5.3); ALBIC
adapts the allocation in force within its migration budget, COLA
re-partitions from scratch. Both start from the same low-collocation
allocation (key groups dealt round-robin in a seeded random order; §5.4
starts real job 2 "such that the initial collocation is as little as
possible"), so ALBIC has to build collocation up — the shape of Fig. 12 —
while COLA reaches its level in the first period.

Choices the paper's text leaves open, and what is taken here:

* **Periods.** The text gives no count for Figs. 11–12 (the axes were lost
  with the figures). :data:`PERIODS` = 40: at 40 nodes × 800 key groups,
  gathering the chains of communicating key groups on common nodes takes
  about 780 migrations, about 20 periods of the budget below.
* **Budget.** maxMigrations = 5 % of the key groups per period
  (:func:`migration_budget`): Fig. 12 has ALBIC moving about 10 of real job
  2's 200 key groups per period. 40 at 800 key groups.
* **Variants** (:data:`VARIANTS`). ``literal`` is §4.3.2 as written: one new
  collocation pair per period, and only the sets ALBIC built itself are
  kept. ``tuned`` adds pairs, highest rate first, while their moves fit half
  the budget and keep every node within maxLoadDistance of its share, and
  keeps qualifying pairs that already share a node. With one pair a period
  the literal algorithm gains one pair's traffic per period (0.13 % of it at
  800 key groups), which is why it cannot follow COLA within 40 periods.
* **maxPartitionLoad** is 25 % of the mean node load (the paper's 25 % is of
  a node's capacity, which the synthetic setup does not fix); a chain of 20
  key groups carries a whole node's mean load, so collocation sets are cut
  into pieces of at most four key groups and ALBIC's collocation levels off
  near 77 %. ``albic_ablation.jsonl`` has the figure at 50 %.
* **Load index** (Fig. 12): communication costs CPU — every tuple that
  crosses nodes costs its sender and its receiver ``serialization`` load
  units per unit of rate — so a node's load depends on the allocation. In
  :func:`real_job2` this cost equals the processing load when every pair is
  split (the paper: collocation cut real job 2's load to about half); the
  level the index falls to is therefore set by that assumption, only its
  course over the periods is measured. Migration overhead is not charged.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from streamscale.experiments.albic_setup import perturb, synthetic
from streamscale.planning.balancing.albic import albic
from streamscale.planning.balancing.cola import cola
from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import (
    collocation_factor,
    load_distance_pct,
    migrations,
)

__all__ = [
    "JOB2_MAX_LD",
    "PERIODS",
    "VARIANTS",
    "albic_vs_cola",
    "migration_budget",
    "period_lines",
    "real_job2",
    "real_job2_problem",
    "remote_rate",
    "run_periods",
    "spread",
    "summarise",
]

PERIODS = 40
# Real job 2 has ten key groups of about equal load per node, so one key group
# moves a node's load by about 10 % of the mean: maxLoadDistance 10 %.
JOB2_MAX_LD = 10.0
VARIANTS: dict[str, dict[str, Any]] = {
    "literal": {"new_pairs": 1, "protect_existing": False},
    "tuned": {"new_pairs": None, "pair_share": 0.5, "protect_existing": True},
}


def migration_budget(key_groups: int) -> int:
    """maxMigrations per period: 5 % of the key groups (Fig. 12: 10 of 200)."""
    return max(1, round(0.05 * key_groups))


def spread(problem: KeyGroupProblem, seed: int) -> KeyGroupProblem:
    """Key groups dealt round-robin over the nodes in a seeded random order."""
    order = np.random.default_rng(seed).permutation(problem.k)
    asg = np.empty(problem.k, dtype=np.int64)
    asg[order] = np.arange(problem.k) % problem.n
    return problem.replace(assignment=asg)


def remote_rate(problem: KeyGroupProblem, assignment: np.ndarray) -> np.ndarray:
    """Per key group: the rate it sends to or receives from other nodes."""
    out = np.zeros(problem.k)
    tr = problem.traffic
    if not tr.size:
        return out
    src, dst = tr[:, 0].astype(np.int64), tr[:, 1].astype(np.int64)
    far = assignment[src] != assignment[dst]
    np.add.at(out, src[far], tr[far, 2])
    np.add.at(out, dst[far], tr[far, 2])
    return out


def _loaded(work: KeyGroupProblem, assignment: np.ndarray, ser: float) -> KeyGroupProblem:
    """``work`` (processing loads) under ``assignment``, communication cost added."""
    load = work.load + ser * remote_rate(work, assignment) if ser else work.load
    return work.replace(load=load, assignment=assignment)


def run_periods(
    start: KeyGroupProblem,
    periods: int,
    *,
    variant: str | dict[str, Any] = "tuned",
    max_migrations: int | None = None,
    serialization: float = 0.0,
    max_load_distance_pct: float = 5.0,
    max_partition_load_pct: float = 25.0,
    cola_start: np.ndarray | None = None,
    time_limit_s: float = 2.0,
    seed: int = 1,
) -> dict[str, list[float]]:
    """ALBIC and COLA side by side for ``periods`` adaptation periods.

    ``start`` holds processing loads and the allocation both begin from
    (COLA from ``cola_start`` when given). Each period: the loads change
    (:func:`~streamscale.experiments.albic_setup.perturb`, on ALBIC's
    allocation), each planner sees them under its own allocation, plans,
    and the period's figures are taken right after its migrations.

    Returns
    -------
    dict
        Per period: ``albic_coll``/``cola_coll`` (collocation factor, %),
        ``albic_ld``/``cola_ld`` (load distance, % of the mean), ``albic_mig``/
        ``cola_mig`` (key groups moved), ``albic_index``/``cola_index`` (total
        load ÷ the start's); ``start_coll`` holds the start's collocation.
    """
    kw = VARIANTS[variant] if isinstance(variant, str) else variant
    budget = migration_budget(start.k) if max_migrations is None else max_migrations
    work = start
    asg_a = np.array(start.assignment, copy=True)
    asg_c = np.array(start.assignment if cola_start is None else cola_start, copy=True)
    first = _loaded(work, asg_a, serialization)
    initial, initial_mean = float(first.load.sum()), first.mean_load
    s: dict[str, list[float]] = {
        k: []
        for k in (
            "albic_coll",
            "cola_coll",
            "albic_ld",
            "cola_ld",
            "albic_mig",
            "cola_mig",
            "albic_index",
            "cola_index",
        )
    }
    s["start_coll"] = [collocation_factor(start)]
    sets: list[list[int]] = []
    for r in range(periods):
        work = perturb(work.replace(assignment=asg_a), 0.2, 10.0, seed=seed * 1000 + r)
        pa = _loaded(work, asg_a, serialization)
        pc = _loaded(work, asg_c, serialization)
        # maxPartitionLoad is a share of a node's capacity, which stays put while
        # collocation lowers the load: here, of the start's mean node load.
        mpl = max_partition_load_pct * initial_mean / pa.mean_load if pa.mean_load else 0.0
        a = albic(
            pa,
            collocated=sets,
            max_migrations=budget,
            max_load_distance_pct=max_load_distance_pct,
            max_partition_load_pct=mpl,
            time_limit_s=time_limit_s,
            seed=seed,
            **kw,
        )
        b = cola(pc, seed=seed)
        s["albic_mig"].append(migrations(pa, a.assignment))
        s["cola_mig"].append(migrations(pc, b.assignment))
        asg_a, asg_c, sets = a.assignment, b.assignment, [list(x) for x in a.collocated]
        for side, asg in (("albic", asg_a), ("cola", asg_c)):
            q = _loaded(work, asg, serialization)
            s[f"{side}_coll"].append(collocation_factor(q))
            s[f"{side}_ld"].append(load_distance_pct(q))
            s[f"{side}_index"].append(float(q.load.sum()) / initial if initial else 0.0)
    return s


def summarise(s: dict[str, list[float]], *, within: float = 10.0) -> dict[str, Any]:
    """One row of figures from :func:`run_periods`' series."""
    gap = [c - a for a, c in zip(s["albic_coll"], s["cola_coll"], strict=True)]
    reach = next((i + 1 for i, g in enumerate(gap) if g <= within), None)
    mig_a, mig_c = statistics.mean(s["albic_mig"]), statistics.mean(s["cola_mig"])
    return {
        "periods": len(s["albic_coll"]),
        "albic_start_collocation_pct": s["start_coll"][0],
        "albic_final_collocation_pct": s["albic_coll"][-1],
        "cola_final_collocation_pct": s["cola_coll"][-1],
        "albic_minus_cola_final_points": s["albic_coll"][-1] - s["cola_coll"][-1],
        "albic_collocation_pct": statistics.mean(s["albic_coll"]),
        "cola_collocation_pct": statistics.mean(s["cola_coll"]),
        f"periods_to_within_{within:g}_points": reach,
        "albic_migrations": mig_a,
        "cola_migrations": mig_c,
        "cola_over_albic_migrations": mig_c / mig_a if mig_a else None,
        "albic_distance_pct": statistics.mean(s["albic_ld"]),
        "cola_distance_pct": statistics.mean(s["cola_ld"]),
        "albic_final_distance_pct": s["albic_ld"][-1],
        "cola_final_distance_pct": s["cola_ld"][-1],
        "albic_final_load_index": s["albic_index"][-1],
        "cola_final_load_index": s["cola_index"][-1],
    }


def albic_vs_cola(
    max_collocation_pct: float,
    periods: int = PERIODS,
    *,
    nodes: int = 40,
    key_groups: int = 800,
    operators: int = 20,
    variant: str | dict[str, Any] = "tuned",
    max_migrations: int | None = None,
    max_load_distance_pct: float = 5.0,
    max_partition_load_pct: float = 25.0,
    start: str = "spread",
    time_limit_s: float = 2.0,
    seed: int = 1,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """One point of Fig. 11: the synthetic job of §5.3 at one maximum collocation factor.

    ``max_collocation_pct`` % of the chains of key groups talk one-to-one;
    ``start="cola"`` begins ALBIC from COLA's allocation (§5.4's suggestion:
    COLA at submission, ALBIC at runtime) instead of a spread one.
    """
    p = synthetic(
        nodes,
        key_groups,
        operators,
        fraction=0.0,
        one_to_one_pct=max_collocation_pct,
        seed=seed,
    )
    p = spread(p, seed)
    if start == "cola":
        p = p.replace(assignment=cola(p, seed=seed).assignment)
    elif start != "spread":
        raise ValueError(f"unknown start {start!r}")
    s = run_periods(
        p,
        periods,
        variant=variant,
        max_migrations=max_migrations,
        max_load_distance_pct=max_load_distance_pct,
        max_partition_load_pct=max_partition_load_pct,
        time_limit_s=time_limit_s,
        seed=seed,
    )
    row = {
        "setup": f"{nodes}x{key_groups}x{operators}",
        "max_collocation_pct": max_collocation_pct,
        "albic_variant": variant if isinstance(variant, str) else "custom",
        "albic_start": start,
        "max_migrations": migration_budget(key_groups)
        if max_migrations is None
        else max_migrations,
        "albic_max_load_distance_pct": max_load_distance_pct,
        "albic_max_partition_load_pct": max_partition_load_pct,
        **summarise(s),
    }
    return row, s


def real_job2_problem(
    nodes: int = 20,
    per_node: int = 5,
    *,
    comm_share: float = 0.5,
    seed: int = 1,
) -> tuple[KeyGroupProblem, float]:
    """Real job 2 of §5.4 as a key-group problem, and its serialization cost.

    Two operators parallelised on the same attribute (extract → sum), five key
    groups per operator per node, key group i of the first sending all its
    output to key group i of the second. Processing loads are 1 ± 20 %; the
    initial allocation puts every pair on two neighbouring nodes (collocation
    0 %). ``comm_share`` of the start's total load is communication.
    """
    rng = np.random.default_rng(seed)
    m = nodes * per_node
    load = 1.0 + rng.uniform(-0.2, 0.2, 2 * m)
    rate = 100.0 * load[:m]
    asg = np.r_[np.arange(m) % nodes, (np.arange(m) + 1) % nodes]
    p = KeyGroupProblem.build(
        [f"extract/{i}" for i in range(m)] + [f"sum/{i}" for i in range(m)],
        [f"n{j + 1}" for j in range(nodes)],
        load,
        asg,
        operators=["extract"] * m + ["sum"] * m,
        output_rate=np.r_[rate, np.zeros(m)],
        traffic=[(i, m + i, float(rate[i])) for i in range(m)],
    )
    # Every pair is split at the start: communication load = 2 · σ · Σ rate.
    ser = comm_share / (1.0 - comm_share) * float(load.sum()) / (2.0 * float(rate.sum()))
    return p, ser


def real_job2(
    periods: int = PERIODS,
    *,
    variant: str = "tuned",
    max_migrations: int = 10,
    max_load_distance_pct: float = JOB2_MAX_LD,
    time_limit_s: float = 2.0,
    seed: int = 1,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Fig. 12: collocation, load distance, load index and migrations per period (§5.4)."""
    p, ser = real_job2_problem(seed=seed)
    s = run_periods(
        p,
        periods,
        variant=variant,
        max_migrations=max_migrations,
        max_load_distance_pct=max_load_distance_pct,
        serialization=ser,
        time_limit_s=time_limit_s,
        seed=seed,
    )
    row = {
        "setup": "real job 2: 20 nodes x 200 key groups x 2 operators",
        "albic_variant": variant,
        "max_migrations": max_migrations,
        "albic_max_load_distance_pct": max_load_distance_pct,
        **summarise(s),
    }
    return row, s


_PER_PERIOD = (
    "albic_coll",
    "cola_coll",
    "albic_ld",
    "cola_ld",
    "albic_mig",
    "cola_mig",
    "albic_index",
    "cola_index",
)


def period_lines(runs: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """One record per run and adaptation period (Fig. 12's points) from :func:`run_periods`."""
    out: list[dict[str, Any]] = []
    for name, s in runs.items():
        for i in range(len(s["albic_coll"])):
            out.append(
                {"figure": "003 Fig. 12", "run": name, "period": i + 1}
                | {k: s[k][i] for k in _PER_PERIOD}
            )
    return out
