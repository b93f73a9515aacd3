"""``streamscale reproduce elastic-allocator``: GMA vs Random vs Even (paper 002, §V, Figs. 4–5).

For each workload (200…1200 tuples/s) and each of ``repetitions`` clusters
(the other work's load drawn from the seed; the same clusters at every rate),
top-k is placed by GMA, Random and Even next to the running join and word
count (:mod:`.elastic_allocator_setup`), and the cluster's CPU and bandwidth
utilisation and deviation are measured on effective usage (an overloaded node
throttles the query, see :mod:`streamscale.planning.placement.elastic_allocator`).
``runs`` holds the medians over the clusters; ``paired`` compares GMA with
each baseline cluster by cluster; ``variants`` holds GMA with the utilisation
objective and Algorithm 1 run literally. A second part checks that GMA is
never infeasible where a feasible placement exists, in the setting (CP-SAT
decides GMA's failures) and on random tight instances
(:mod:`.elastic_allocator_feasibility`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.experiments.elastic_allocator_feasibility import (
    check_feasibility,
    cp_sat_feasible,
    headline,
    objective_gap,
)
from streamscale.experiments.elastic_allocator_setup import NODES, setting
from streamscale.experiments.report import markdown_table, write_results
from streamscale.planning.placement.elastic_allocator import (
    AllocatorProblem,
    AllocatorResult,
    even_placement,
    random_placement,
)
from streamscale.planning.placement.gma import gma

__all__ = [
    "ALGORITHMS",
    "DEFINITIONS",
    "FULL_HEADLINE_FILE",
    "HEADLINE_FILE",
    "METRICS",
    "VARIANTS",
    "run",
    "run_config",
]

# The committed copy of the headline figures docs/papers quotes (``--quick``, seed 1).
HEADLINE_FILE = Path(__file__).with_name("elastic_allocator_headline.jsonl")
# The full-scale run's (``streamscale reproduce elastic-allocator --seed 1``) headline records, each
# naming the command, the commit and the run's wall time.
FULL_HEADLINE_FILE = Path(__file__).with_name("elastic_allocator_full_headline.jsonl")

RATES: tuple[int, ...] = (200, 400, 600, 800, 1000, 1200)
ALGORITHMS: tuple[str, ...] = ("gma", "random", "even")
VARIANTS: tuple[str, ...] = ("gma-utilization", "gma-literal")
METRICS: tuple[str, ...] = (
    "cpu_utilization",
    "bw_utilization",
    "cpu_deviation",
    "bw_deviation",
    "link_utilization",
)
# How the report defines its figures (printed in results.md).
DEFINITIONS = (
    "CPU utilisation: Σ_i min(C0_i + λ·cpu_i, C_i) / Σ_i C_i, other work included, at the "
    "query's achieved throughput λ. Bandwidth utilisation: the query's own traffic at λ, "
    "λ·Σ_f r_f / Σ_i bw_i — every flow counted once whether it crosses the network or stays "
    "inside a node, so collocating operators cannot lower it; it differs between placements "
    "only through λ. Link usage (not an objective): what the links carry, "
    "Σ_i min(B0_i + λ·traffic_i, bw_i) / Σ_i bw_i with traffic_i the query's inter-node "
    "traffic through node i's link (sent plus received); it falls as flows are collocated. "
    "Deviations R_dev = sqrt(Σ_i (R_i − R_avg)²) of node CPU loads and of link loads."
)
_HIGHER_IS_BETTER = {"cpu_utilization": True, "bw_utilization": True}


def _place(name: str, problem: AllocatorProblem, seed: int) -> AllocatorResult:
    if name == "gma":
        return gma(problem)
    if name == "gma-literal":
        return gma(problem, search=False)
    if name == "gma-utilization":
        return gma(problem, objective="utilization")
    if name == "random":
        return random_placement(problem, seed=seed)
    return even_placement(problem)


def _measure(
    rates: tuple[int, ...],
    repetitions: int,
    seed: int,
    algorithms: tuple[str, ...],
    time_limit_s: float,
) -> tuple[list[dict[str, Any]], list[float]]:
    samples: list[dict[str, Any]] = []
    gma_ms: list[float] = []
    for rate in rates:
        for rep in range(repetitions):
            cluster_seed = seed * 100_003 + rep
            problem = setting(float(rate), cluster_seed)
            for name in algorithms:
                t0 = time.perf_counter()
                res = _place(name, problem, cluster_seed)
                if name == "gma":
                    gma_ms.append((time.perf_counter() - t0) * 1e3)
                ev = res.evaluation
                # Where GMA fails, ask CP-SAT whether a feasible placement exists at all.
                oracle = None
                if name == "gma" and not ev.feasible:
                    oracle = cp_sat_feasible(problem, time_limit_s=time_limit_s)
                samples.append(
                    {
                        "rate": rate,
                        "algorithm": name,
                        "cluster": rep,
                        **{m: getattr(ev, m) for m in METRICS},
                        "feasible": ev.feasible,
                        "throughput": ev.throughput,
                        "oracle": oracle,
                    }
                )
    return samples, gma_ms


def _summarise(
    samples: list[dict[str, Any]], rates: tuple[int, ...], algs: tuple[str, ...]
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for rate in rates:
        for name in algs:
            sel = [s for s in samples if s["rate"] == rate and s["algorithm"] == name]
            row: dict[str, Any] = {"rate": rate, "algorithm": name}
            for m in METRICS:
                vals = np.array([s[m] for s in sel])
                row[m] = float(np.median(vals))
                row[f"{m}_p25"] = float(np.percentile(vals, 25))
                row[f"{m}_p75"] = float(np.percentile(vals, 75))
            row["feasible_fraction"] = float(np.mean([s["feasible"] for s in sel]))
            row["throughput"] = float(np.median([s["throughput"] for s in sel]))
            row["clusters"] = len(sel)
            runs.append(row)
    return runs


def _paired(samples: list[dict[str, Any]], rates: tuple[int, ...]) -> list[dict[str, Any]]:
    """Per workload and baseline, GMA minus the baseline on the same cluster: medians and wins."""
    key = {(s["rate"], s["cluster"], s["algorithm"]): s for s in samples}
    clusters = sorted({s["cluster"] for s in samples})
    out: list[dict[str, Any]] = []
    for rate in rates:
        for base in ("random", "even"):
            row: dict[str, Any] = {"rate": rate, "baseline": base}
            for m in METRICS:
                sign = 1.0 if _HIGHER_IS_BETTER.get(m) else -1.0
                diff = np.array([key[rate, c, "gma"][m] - key[rate, c, base][m] for c in clusters])
                row[f"{m}_diff"] = float(np.median(diff))
                row[f"{m}_gma_not_worse"] = float(np.mean(sign * diff >= -1e-9))
            out.append(row)
    return out


def _winners(
    runs: list[dict[str, Any]], rates: tuple[int, ...], candidate: str = "gma"
) -> dict[str, Any]:
    """Per metric, workloads where ``candidate``'s median beats Random and Even, or ties (1e-9)."""
    out: dict[str, Any] = {}
    for m in METRICS:
        best_at, tied_at = [], []
        for rate in rates:
            vals = {r["algorithm"]: r[m] for r in runs if r["rate"] == rate}
            sign = 1.0 if _HIGHER_IS_BETTER.get(m) else -1.0
            mine = sign * vals[candidate]
            others = [sign * v for a, v in vals.items() if a in ("random", "even")]
            if all(mine > o + 1e-9 for o in others):
                best_at.append(rate)
            elif all(mine >= o - 1e-9 for o in others):
                tied_at.append(rate)
        out[m] = {"best_at": best_at, "tied_at": tied_at, "of": len(rates)}
    return out


def _plot(runs: list[dict[str, Any]], out: Path, rates: tuple[int, ...]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for fname, pair, title in (
        ("utilization.png", METRICS[:2], "Fig. 4: resource utilisation"),
        ("deviation.png", METRICS[2:4], "Fig. 5: resource usage deviation"),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, m in zip(axes, pair, strict=True):
            for name, marker in zip(ALGORITHMS, "os^", strict=True):
                rows = [r for r in runs if r["algorithm"] == name]
                ax.plot(rates, [r[m] for r in rows], marker=marker, label=name)
                ax.fill_between(
                    rates, [r[f"{m}_p25"] for r in rows], [r[f"{m}_p75"] for r in rows], alpha=0.15
                )
            ax.set_xlabel("workload (tuples/s)")
            ax.set_ylabel(m.replace("_", " "))
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle(f"{title} (median, band = 25–75 %)")
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        files.append(fname)
    return files


def run(out: Path, *, quick: bool, seed: int) -> dict[str, Any]:
    """Run the reproduction and write results.json, results.md, utilization.png, deviation.png."""
    return run_config(
        out,
        seed=seed,
        rates=RATES,
        repetitions=8 if quick else 40,
        tiny=150 if quick else 1000,
        medium=20 if quick else 200,
        large=6 if quick else 60,
        time_limit_s=5.0 if quick else 10.0,
        gap=100 if quick else 500,
    )


def run_config(
    out: Path,
    *,
    seed: int,
    rates: tuple[int, ...],
    repetitions: int,
    tiny: int,
    medium: int,
    time_limit_s: float,
    large: int = 0,
    gap: int = 0,
) -> dict[str, Any]:
    """:func:`run` with every size explicit (the smoke test uses a tiny configuration)."""
    out.mkdir(parents=True, exist_ok=True)
    samples, gma_ms = _measure(rates, repetitions, seed, (*ALGORITHMS, *VARIANTS), time_limit_s)
    fails = [s for s in samples if s["algorithm"] == "gma" and not s["feasible"]]
    setting_check = {
        "placements": sum(s["algorithm"] == "gma" for s in samples),
        "gma_infeasible": len(fails),
        "no_feasible_placement_exists": sum(s["oracle"] is False for s in fails),
        "gma_missed": sum(s["oracle"] is True for s in fails),
        "undecided": sum(s["oracle"] is None for s in fails),
        "throttled_fraction": {
            a: float(np.mean([s["throughput"] < 1.0 for s in samples if s["algorithm"] == a]))
            for a in ALGORITHMS
        },
    }
    runs = _summarise(samples, rates, ALGORITHMS)
    variants = {v: _summarise(samples, rates, (v,)) for v in VARIANTS}
    variant = variants["gma-utilization"]
    feas = check_feasibility(
        tiny=tiny, medium=medium, large=large, seed=seed, time_limit_s=time_limit_s
    )
    results: dict[str, Any] = {
        "setting": {
            "nodes": NODES,
            "rates": list(rates),
            "clusters_per_rate": repetitions,
            "seed": seed,
            "placed_query": "top-k",
            "running_queries": ["word-count", "join"],
        },
        "runs": runs,
        "variants": variants,
        "paired": _paired(samples, rates),
        "gma_best": _winners(runs, rates),
        "gma_utilization_best": _winners([*runs, *variant], rates, "gma-utilization"),
        "gma_literal_best": _winners([*runs, *variants["gma-literal"]], rates, "gma-literal"),
        "gma_median_ms": float(np.median(gma_ms)) if gma_ms else None,
        "feasibility": feas,
        "objective_gap": objective_gap(gap, seed),
        "setting_check": setting_check,
    }
    results["headline"] = _claims(results, rates) + headline(results["objective_gap"])
    results["plots"] = _plot(runs, out, rates)
    write_results(out, results, _markdown(results, rates))
    lines = [json.dumps(h) for h in results["headline"]]
    (out / "headline.jsonl").write_text("\n".join(lines) + "\n")
    for line in lines:
        print(line)
    return results


_CLAIMS = (
    ("cpu_utilization", "highest CPU utilisation (Fig. 4a)"),
    ("bw_utilization", "highest bandwidth utilisation (Fig. 4b)"),
    ("cpu_deviation", "lowest CPU deviation (Fig. 5a)"),
    ("bw_deviation", "lowest bandwidth deviation (Fig. 5b)"),
)


def _claims(res: dict[str, Any], rates: tuple[int, ...]) -> list[dict[str, Any]]:
    """Workloads where GMA (literal, tuned) beats Random and Even, or ties the best (1e-9)."""
    out = []
    for variant, key in (("literal", "gma_literal_best"), ("tuned", "gma_best")):
        for m, claim in _CLAIMS:
            w = res[key][m]
            out.append(
                {
                    "figure": f"002 §V.B workloads (of {len(rates)}) where GMA has the {claim}",
                    "variant": variant,
                    "paper": f"{len(rates)} best",
                    "measured": f"{len(w['best_at'])} best, {len(w['tied_at'])} tied",
                }
            )
    return out


def _by(runs: list[dict[str, Any]], rate: int, key: str) -> list[Any]:
    return [
        next(r[key] for r in runs if r["rate"] == rate and r["algorithm"] == a) for a in ALGORITHMS
    ]


def _spread(runs: list[dict[str, Any]], name: str, m: str) -> float:
    rows = [r for r in runs if r["algorithm"] == name]
    return float(np.mean([r[f"{m}_p75"] - r[f"{m}_p25"] for r in rows]))


def _markdown(res: dict[str, Any], rates: tuple[int, ...]) -> str:
    """The ``results.md`` text: the claims, the figures, the objective gap, feasibility and
    the GMA variants, in that order."""
    return "\n\n".join(
        [
            *_intro(res, rates),
            *_figures(res, rates),
            *_gap_section(res),
            *_feasibility_section(res),
            *_variants_section(res),
        ]
    )


def _hits(res: dict[str, Any], m: str, n: int) -> str:
    """Where each GMA variant is best and tied best on metric ``m`` (of ``n`` workloads)."""
    parts = []
    for label, key in (
        ("GMA", "gma_best"),
        ("GMA literal", "gma_literal_best"),
        ("GMA-utl", "gma_utilization_best"),
    ):
        w = res[key][m]
        parts.append(
            f"{label} best at {len(w['best_at'])}/{n} "
            f"({', '.join(map(str, w['best_at'])) or 'none'}), "
            f"tied best at {len(w['tied_at'])}/{n}"
        )
    return "; ".join(parts)


def _paper_claims(res: dict[str, Any], rates: tuple[int, ...]) -> list[list[str]]:
    """Each of the paper's claims (§V.B) beside what was measured here."""
    runs, feas = res["runs"], res["feasibility"]
    n = len(rates)
    sc = res["setting_check"]
    spread = ", ".join(f"{a} {_spread(runs, a, 'cpu_deviation'):.4f}" for a in ALGORITHMS)
    throttled = ", ".join(f"{a} {v:.3f}" for a, v in sc["throttled_fraction"].items())
    t, m_ = feas["tiny"], feas["medium"]
    return [
        [
            "EA (GMA) has the highest CPU utilisation, 200–1200 t/s (Fig. 4a)",
            _hits(res, "cpu_utilization", n),
        ],
        ["EA has the highest bandwidth utilisation (Fig. 4b)", _hits(res, "bw_utilization", n)],
        [
            "EA has the lowest CPU deviation, most so at high load (Fig. 5a)",
            _hits(res, "cpu_deviation", n),
        ],
        ["EA has the lowest bandwidth deviation (Fig. 5b)", _hits(res, "bw_deviation", n)],
        [
            "Random fluctuates most",
            f"mean IQR over clusters of CPU deviation: {spread}; "
            f"placements that throttle the query (λ < 1): {throttled}",
        ],
        [
            "GMA never infeasible where a feasible placement exists",
            f"missed {t['gma_missed']} of {t['feasible']} (tiny, exhaustive) and "
            f"{m_['gma_missed']} of {m_['feasible']} (medium, CP-SAT)"
            + (
                f", {feas['large']['gma_missed']} of {feas['large']['feasible']} (large, CP-SAT)"
                if "large" in feas
                else ""
            )
            + "; in the setting above "
            f"GMA was infeasible {sc['gma_infeasible']} times in {sc['placements']}: "
            f"{sc['no_feasible_placement_exists']} proven without a feasible placement "
            f"(CP-SAT), {sc['gma_missed']} missed, {sc['undecided']} undecided",
        ],
    ]


def _intro(res: dict[str, Any], rates: tuple[int, ...]) -> list[str]:
    """The title, the setting, the paper's claims beside the measured and the definitions."""
    st = res["setting"]
    return [
        "# Elastic Allocator (paper 002): GMA vs Random vs Even",
        f"Top-k placed next to running word count and join on {st['nodes']} nodes "
        f"(4 cores, 3 slots, 100 Mbit/s) with other work's load; medians over "
        f"{st['clusters_per_rate']} clusters per workload (seed {st['seed']}). "
        "Utilisation and deviation are on effective usage: an overloaded node or "
        "link throttles the query. The paper reports Figs. 4–5 only as plots "
        "(no numbers survive), so the comparison is with its claims. GMA minimises "
        "deviation (default); GMA-utl maximises planned utilisation.",
        "## Beside the paper's claims (§V.B)",
        markdown_table(["paper 002 claims", "measured here"], _paper_claims(res, rates)),
        "## Definitions",
        DEFINITIONS,
    ]


def _figures(res: dict[str, Any], rates: tuple[int, ...]) -> list[str]:
    """Figs. 4 and 5, link usage, the paired differences, feasibility and throughput."""
    runs = res["runs"]
    heads = [f"{m} {a}" for m in ("CPU", "BW") for a in ALGORITHMS]
    util = [[r, *_by(runs, r, "cpu_utilization"), *_by(runs, r, "bw_utilization")] for r in rates]
    dev = [[r, *_by(runs, r, "cpu_deviation"), *_by(runs, r, "bw_deviation")] for r in rates]
    ok = [[r, *_by(runs, r, "feasible_fraction"), *_by(runs, r, "throughput")] for r in rates]
    return [
        "## Fig. 4: utilisation (Σ used / Σ capacity)",
        markdown_table(["tuples/s", *heads], util),
        "Every placement asks the same CPU of the cluster and carries the same query "
        "traffic, so both utilisations differ only where a placement overloads a node or "
        "link and the query is throttled (λ < 1).",
        "## Link usage (what the links carry; lower at equal λ = less network traffic)",
        markdown_table(
            ["tuples/s", *ALGORITHMS], [[r, *_by(runs, r, "link_utilization")] for r in rates]
        ),
        "## Paired: GMA minus each baseline on the same cluster (median; share of "
        "clusters where GMA is not worse)",
        markdown_table(
            [
                "tuples/s",
                "vs",
                *(f"{m} diff" for m in METRICS),
                "CPU utl not worse",
                "CPU dev not worse",
            ],
            [
                [
                    r["rate"],
                    r["baseline"],
                    *(r[f"{m}_diff"] for m in METRICS),
                    r["cpu_utilization_gma_not_worse"],
                    r["cpu_deviation_gma_not_worse"],
                ]
                for r in res["paired"]
            ],
        ),
        "## Fig. 5: deviation sqrt(Σ (R_i − R_avg)²)",
        markdown_table(["tuples/s", *heads], dev),
        "## Feasible placements (fraction of clusters) and query throughput λ (median)",
        markdown_table(
            [
                "tuples/s",
                *(f"feasible {a}" for a in ALGORITHMS),
                *(f"λ {a}" for a in ALGORITHMS),
            ],
            ok,
        ),
    ]


def _gap_section(res: dict[str, Any]) -> list[str]:
    """The headline figures: Algorithm 1 literally against GMA with the added search."""
    return [
        "## Headline figures: Algorithm 1 literally vs with the added search\n\n"
        f"Objective gap on {res['objective_gap']['instances']} tiny instances (2–3 "
        "nodes, 2–5 operators), optimum of R_dev(CPU) + R_dev(BW) by exhaustive "
        "search over feasible placements.\n\n"
        + markdown_table(
            ["figure", "variant", "paper", "measured"],
            [[h["figure"], h["variant"], h["paper"], h["measured"]] for h in res["headline"]],
        )
        + "\n\n"
        + markdown_table(
            ["variant", "median excess %", "max excess %"],
            [
                [
                    v,
                    res["objective_gap"][v]["median_excess_pct"],
                    res["objective_gap"][v]["max_excess_pct"],
                ]
                for v in ("gma-literal", "gma")
            ],
        ),
    ]


def _feasibility_section(res: dict[str, Any]) -> list[str]:
    """Whether GMA is infeasible where a feasible placement exists, per instance size."""
    feas = res["feasibility"]
    ftab = [
        [
            k,
            v["instances"],
            v["feasible"],
            v["infeasible"],
            v["undecided"],
            v["gma_feasible"],
            v["gma_missed"],
            v["greedy_feasible"],
            v["random_feasible"],
            v["even_feasible"],
        ]
        for k, v in feas.items()
    ]
    return [
        "## Is GMA infeasible where a feasible placement exists?",
        markdown_table(
            [
                "instances",
                "n",
                "feasible",
                "infeasible",
                "undecided",
                "GMA feasible",
                "GMA missed",
                "greedy only",
                "Random",
                "Even",
            ],
            ftab,
        ),
        "Tiny: 2–3 nodes, 2–6 operators, decided by exhaustive enumeration; medium: "
        "4–6 nodes, 8–12 operators, and large: 10 nodes, 20 operators, decided by "
        "CP-SAT (undecided: its time limit ran out). Instances are tight: the "
        'operators need 50–110 % of the CPU free under D_CPU. "greedy only" is one '
        "greedy descent without backtracking (Algorithm 1 read literally).",
    ]


def _variants_section(res: dict[str, Any]) -> list[str]:
    """The GMA variants (utilisation objective; Algorithm 1 literally) and GMA's time."""
    vtab = [
        [
            name,
            r["rate"],
            r["cpu_utilization"],
            r["bw_utilization"],
            r["cpu_deviation"],
            r["bw_deviation"],
            r["feasible_fraction"],
        ]
        for name, rows in res["variants"].items()
        for r in rows
    ]
    return [
        "## GMA variants: utilisation objective; Algorithm 1 literally (no search)",
        markdown_table(
            ["variant", "tuples/s", "CPU utl", "BW utl", "CPU dev", "BW dev", "feasible"],
            vtab,
        ),
        f"GMA median time per placement: {res['gma_median_ms']:.3g} ms. Plots: "
        + ", ".join(res["plots"])
        + ".",
    ]
