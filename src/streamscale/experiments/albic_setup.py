"""Synthetic key-group setups of paper 003, §5.1 and §5.3.

Key groups are spread evenly over the nodes (a random permutation, the same
count per node); each key
group's load is the mean ± a random percentage (``variation``); then a
``fraction`` of the nodes is perturbed: half of them lose ``y`` % of their
load, half gain ``y`` %, by scaling a random half of their key groups. The key
groups belong to a chain of ``operators`` operators; ``one_to_one_pct`` % of
the chains of key groups (group ``c`` of every operator) send all their output
to the same chain's group of the next operator, the others spread it evenly
over every group of the next operator — so the maximum obtainable collocation
factor is about ``one_to_one_pct`` %.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamscale.planning.balancing.keygroups import KeyGroupProblem

__all__ = ["headline", "perturb", "synthetic"]


def _perturb_nodes(
    load: np.ndarray, asg: np.ndarray, nodes: np.ndarray, y: float, rng: np.random.Generator
) -> None:
    half = len(nodes) // 2
    for j, n in enumerate(nodes):
        sign = -1.0 if j < half else 1.0
        idx = np.flatnonzero(asg == n)
        if idx.size == 0:
            continue
        sel = rng.choice(idx, size=max(1, idx.size // 2), replace=False)
        change = y * load[idx].sum()
        load[sel] *= max(0.0, 1.0 + sign * change / load[sel].sum())


def synthetic(
    nodes: int,
    key_groups: int,
    operators: int,
    *,
    variation: float = 0.2,
    fraction: float = 0.5,
    y: float = 0.3,
    one_to_one_pct: float = 0.0,
    rate_per_load: float = 100.0,
    removing: int = 0,
    seed: int | None = None,
) -> KeyGroupProblem:
    """A perturbed synthetic problem (loads in units of one key group's mean load)."""
    rng = np.random.default_rng(seed)
    load = 1.0 + rng.uniform(-variation, variation, key_groups)
    asg = rng.permutation(key_groups) % nodes
    picked = rng.permutation(nodes)[: round(fraction * nodes)]
    _perturb_nodes(load, asg, picked, y, rng)
    per_op = max(1, key_groups // operators)
    op_of = np.minimum(np.arange(key_groups) // per_op, operators - 1)
    chains = round(one_to_one_pct / 100.0 * per_op)
    one_to_one = set(rng.permutation(per_op)[:chains].tolist())
    traffic: list[tuple[int, int, float]] = []
    for g in range(key_groups):
        o, c = int(op_of[g]), g - int(op_of[g]) * per_op
        if o + 1 >= operators:
            continue
        rate = rate_per_load * float(load[g])
        start = (o + 1) * per_op
        end = key_groups if o + 2 >= operators else start + per_op
        if c in one_to_one and start + c < end:
            traffic.append((g, start + c, rate))
        else:
            share = rate / (end - start)
            traffic.extend((g, d, share) for d in range(start, end))
    names = [f"op{op_of[g]}/{g}" for g in range(key_groups)]
    return KeyGroupProblem.build(
        names,
        [f"n{j + 1}" for j in range(nodes)],
        load,
        asg,
        operators=[f"op{o}" for o in op_of],
        output_rate=rate_per_load * load * (op_of + 1 < operators),
        traffic=traffic,
        removing=[f"n{nodes - j}" for j in range(removing)],
    )


def perturb(
    problem: KeyGroupProblem, fraction: float, pct: float, seed: int | None = None
) -> KeyGroupProblem:
    """Scale the key groups of a ``fraction`` of the nodes by a factor in 1 ± ``pct`` % (§5.3).

    Traffic scales with the load of its sender.
    """
    rng = np.random.default_rng(seed)
    load = np.array(problem.load, copy=True)
    picked = rng.permutation(problem.n)[: round(fraction * problem.n)]
    factor = np.ones(problem.k)
    for n in picked:
        idx = np.flatnonzero(problem.assignment == n)
        factor[idx] = 1.0 + rng.uniform(-pct, pct) / 100.0
    load *= factor
    tr = [(int(a), int(b), float(r) * factor[int(a)]) for a, b, r in problem.traffic]
    return problem.replace(load=load, traffic=tr, output_rate=problem.output_rate * factor)


def headline(
    synth: dict[str, dict[str, Any]], job2: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """ALBIC vs COLA over adaptation periods (paper 003, §5.3 Fig. 11 and §5.4 Fig. 12).

    ``synth`` and ``job2`` map the variant (``literal``: §4.3.2 as written,
    one new pair a period; ``tuned``: pairs within half the budget, chance
    collocations kept) to the rows
    :func:`~streamscale.experiments.albic_collocation.albic_vs_cola` and
    :func:`~streamscale.experiments.albic_collocation.real_job2` return.
    Figure, variant, paper, measured.
    """
    out: list[dict[str, Any]] = []
    for variant in ("literal", "tuned"):
        r, j = synth.get(variant), job2.get(variant)
        vals: list[tuple[str, Any, Any]] = []
        if r is not None:
            f = f"003 §5.3 {r['setup']}, max collocation {r['max_collocation_pct']:g} %"
            vals += [
                (
                    f"{f}: ALBIC minus COLA collocation, period {r['periods']} (points)",
                    "up to +10",
                    round(r["albic_minus_cola_final_points"], 1),
                ),
                (
                    f"{f}: ALBIC collocation, start -> period {r['periods']} (%)",
                    "built up to COLA's",
                    f"{r['albic_start_collocation_pct']:.1f} -> "
                    f"{r['albic_final_collocation_pct']:.1f}",
                ),
                (
                    f"{f}: first period ALBIC within 10 points of COLA",
                    "gradually",
                    r["periods_to_within_10_points"],
                ),
                (
                    f"{f}: COLA / ALBIC migrations per period",
                    "about 20 (200 / 10)",
                    round(r["cola_over_albic_migrations"], 1),
                ),
                (
                    f"{f}: ALBIC / COLA load distance, last period (%)",
                    "ALBIC lower",
                    f"{r['albic_final_distance_pct']:.2f} / {r['cola_final_distance_pct']:.2f}",
                ),
            ]
        if j is not None:
            f = "003 §5.4 real job 2"
            vals += [
                (
                    f"{f}: ALBIC / COLA migrations per period",
                    "about 10 / about 200",
                    f"{j['albic_migrations']:.1f} / {j['cola_migrations']:.1f}",
                ),
                (
                    f"{f}: ALBIC / COLA collocation, period {j['periods']} (%)",
                    "equal (optimum)",
                    f"{j['albic_final_collocation_pct']:.1f} / "
                    f"{j['cola_final_collocation_pct']:.1f}",
                ),
                (
                    f"{f}: first period ALBIC within 10 points of COLA",
                    "gradually",
                    j["periods_to_within_10_points"],
                ),
            ]
        out += [
            {"figure": name, "variant": variant, "paper": paper, "measured": m}
            for name, paper, m in vals
        ]
    return out
