"""``streamscale reproduce task-allocation``: paper 001's naive, TL, TD vs the optimum.

Reproduces §7: optimality over random jobs (§7.3, paper: TD 93.1 %, TL
85.9 % of optimal), allocation throughput on a 4 × 100 pipeline (§7.2,
paper: TD ≈ 264/s on a 2014 Core i3, TL two orders of magnitude fewer), the
prioritisation and task-count micro-benchmarks (Fig. 4) and TD-RC under a
varying input rate (Fig. 9). The paper's "TL" in §7 is prioritised by IMC,
so ``tl_pct`` reports TL-IMC; TL by relative significance is ``tl_rs_pct``.

The §7.3 jobs are the generator's ``multinomial`` reading (see
:mod:`streamscale.planning.random_jobs`); naive is reported as §3.1 first
states it (literal) and with its refinement (tuned), which makes it TL-IMC
without ``pickNode``. ``task_allocation_ablation.jsonl`` (written by
``benchmarks/bench_task_allocation.py --ablation``) shows what moves each
figure. TD's one open case — a roomiest node that takes no minimum balanced
split, where Algorithm 5 as printed never terminates — is completed in both
variants by placing part of one split (``no_split="partial"``); leaving the
pair to R instead (``td-literal-to-r``, ``td-to-r``) costs 9–11 points on
this class, whose nodes hold three tasks each. Modelling differences that
remain: the optimum carries 32 GB/s per 2000 jobs against the paper's 26.3
(29.7 when the groups form a tree; the percentages do not depend on the IMC
scale, so this gap does not move them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamscale.experiments.report import markdown_table, readme_block, write_results
from streamscale.experiments.task_allocation_runs import (
    optimality,
    prioritization,
    task_count,
    throughput,
    varying_rate,
)
from streamscale.planning.placement.groups import GroupJob
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down

__all__ = [
    "FULL_HEADLINE_FILE",
    "HEADLINE_FILE",
    "PAPER",
    "example2",
    "headline",
    "readme_block",
    "run",
]

# The committed copy of the headline figures docs/papers quotes (``--quick``, seed 1).
HEADLINE_FILE = Path(__file__).with_name("task_allocation_headline.jsonl")
# The full-scale run's (``streamscale reproduce task-allocation``, seed 1) headline figures.
FULL_HEADLINE_FILE = Path(__file__).with_name("task_allocation_full_headline.jsonl")

PAPER = {
    "optimal_gbps": 26.3,
    "td_pct": 93.1,
    "tl_pct": 85.9,
    "gain_gbps": {"td": 24.5, "tl-imc": 22.6, "optimal": 26.3},
    "td_per_s": 264.0,
    "graphs": 2000,
}


def run(
    out: Path,
    *,
    quick: bool,
    seed: int,
    graphs: int | None = None,
    noisy_graphs: int | None = None,
    window_s: float | None = None,
) -> dict[str, Any]:
    """Run every experiment, write results.json, results.md and plots into ``out``."""
    graphs = graphs if graphs is not None else (200 if quick else 2000)
    noisy_graphs = noisy_graphs if noisy_graphs is not None else (100 if quick else 500)
    window_s = window_s if window_s is not None else (0.5 if quick else 2.0)
    opt = optimality(graphs, seed)
    noisy = optimality(noisy_graphs, seed + 1, cost_noise=0.5)
    thr = throughput(window_s=window_s, windows=3 if quick else 5)
    pct = opt["pct_of_optimal"]
    results: dict[str, Any] = {
        "optimality": {
            "graphs": opt["graphs"],
            "naive_pct": pct.get("naive"),
            "naive_literal_pct": pct.get("naive-literal"),
            "tl_pct": pct.get("tl-imc"),
            "tl_rs_pct": pct.get("tl"),
            "td_pct": pct.get("td"),
            "td_affinity_pct": pct.get("td-affinity"),
            "td_max_links_pct": pct.get("td-max-links"),
            "detail": opt,
        },
        "optimality_cost_noise": noisy,
        "throughput": {
            "td_per_s": thr["td_per_s"],
            "tl_per_s": thr["tl-imc_per_s"],
            "tl_rs_per_s": thr["tl_per_s"],
            "detail": thr,
        },
        "prioritization": prioritization(),
        "task_count": task_count(),
        "varying_rate": varying_rate(),
        "paper": PAPER,
        "config": {"quick": quick, "seed": seed, "window_s": window_s},
    }
    results["headline"] = headline(results)
    write_results(out, results, _markdown(results))
    lines = [json.dumps(h, sort_keys=False) for h in results["headline"]]
    (out / "headline.jsonl").write_text("\n".join(lines) + "\n")
    for line in lines:
        print(line)
    _plots(out, results)
    return results


def example2(nodes: int = 4) -> GroupJob:
    """Paper 001, Fig. 2 / Example 2: v1 10 tasks, v2 20, v3 10, v4 10; 40 % each."""
    return GroupJob.build(
        [("v1", 10, 40.0), ("v2", 20, 40.0), ("v3", 10, 40.0), ("v4", 10, 40.0)],
        [("v1", "v2", 100.0), ("v2", "v3", 99.0), ("v3", "v4", 20.0)],
        {f"n{i + 1}": 40.0 for i in range(nodes)},
    )


def _links(counts: Any, a: int, b: int) -> int:
    return sum(x * y for x, y in zip(counts[a], counts[b], strict=True))


def headline(r: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per headline figure and variant: figure, variant, paper, measured.

    ``literal`` is the algorithm as written (naive: §3.1 as first stated,
    task-id order; TL: task pairs in task-id order; TD: Algorithm 5 without
    the added fills), ``tuned`` the default.
    """
    d = r["optimality"]["detail"]
    pct = d["pct_of_optimal"]
    opt_gbps = round(d["total_gain_gbps"]["optimal"] * 2000 / max(1, d["graphs"]), 1)

    def rnd(v: float | None) -> float | None:
        return None if v is None else round(v, 1)

    job = example2()
    ex = {
        "literal": _links(task_level(job, order="storm").counts, 0, 1),
        "tuned": _links(task_level(job).counts, 0, 1),
    }
    td_ex = {
        "literal": _links(top_down(job, literal=True).counts, 0, 1),
        "tuned": _links(top_down(job).counts, 0, 1),
    }
    out = []
    rules = (
        ("literal", "td-literal", "tl-imc-storm", "naive-literal"),
        ("tuned", "td", "tl-imc", "naive"),
    )
    for variant, td, tl, naive in rules:
        out += [
            {
                "figure": "001 §7.3 optimum, total IMC gain per 2000 jobs (GB/s)",
                "variant": variant,
                "paper": PAPER["optimal_gbps"],
                "measured": opt_gbps,
            },
            {
                "figure": "001 §7.3 TD IMC gain, % of optimal",
                "variant": variant,
                "paper": PAPER["td_pct"],
                "measured": rnd(pct.get(td)),
            },
            {
                "figure": "001 §7.3 TL (IMC priority) IMC gain, % of optimal",
                "variant": variant,
                "paper": PAPER["tl_pct"],
                "measured": rnd(pct.get(tl)),
            },
            {
                "figure": "001 §7.3 naive IMC gain, % of optimal",
                "variant": variant,
                "paper": "below TL (§3.1)",
                "measured": rnd(pct.get(naive)),
            },
            {
                "figure": "001 Example 2 TL collocated ⟨v1,v2⟩ links",
                "variant": variant,
                "paper": 84,
                "measured": ex[variant],
            },
            {
                "figure": "001 Example 2 TD collocated ⟨v1,v2⟩ links",
                "variant": variant,
                "paper": 100,
                "measured": td_ex[variant],
            },
        ]
    return out


def _markdown(r: dict[str, Any]) -> str:
    o, d = r["optimality"], r["optimality"]["detail"]
    pct, gbps = d["pct_of_optimal"], d["total_gain_gbps"]
    paper_pct = {"td": PAPER["td_pct"], "tl-imc": PAPER["tl_pct"], "optimal": 100.0}
    per2000 = 2000.0 / max(1, d["graphs"])
    rows = [
        [
            name,
            gbps[name] * per2000,
            PAPER["gain_gbps"].get(name, "—"),
            pct[name],
            paper_pct.get(name, "—"),
            d["median_ratio"].get(name, 1.0) * 100.0,
            d["incomplete"].get(name, 0),
        ]
        for name in (
            "naive-literal",
            "naive",
            "tl",
            "tl-storm",
            "tl-imc",
            "tl-imc-storm",
            "td",
            "td-literal",
            "td-to-r",
            "td-literal-to-r",
            "td-imc",
            "td-affinity",
            "td-max-links",
            "optimal",
        )
    ]
    n = r["optimality_cost_noise"]
    noisy_rows = [[k, v] for k, v in n["pct_of_optimal"].items()]
    t = r["throughput"]
    thr_rows = [
        ["TD", t["td_per_s"], PAPER["td_per_s"], 10 * PAPER["td_per_s"]],
        ["TL (IMC)", t["tl_per_s"], "≈ TD/100", "—"],
        ["TL (significance)", t["tl_rs_per_s"], "—", "—"],
    ]
    pr = [
        [x["imc_v2_v3"], x["tl_significance"], x["tl_imc"], x["td"]]
        for x in r["prioritization"]["rows"]
    ]
    tc = [[x["tasks_v2"], x["tl_imc"], x["td"], x["optimal"]] for x in r["task_count"]["rows"]]
    vr = [
        [
            x["minute"],
            x["rate_factor"],
            x["td_gain"],
            x["td_rc_gain"],
            "yes" if x["replanned"] else "",
        ]
        for x in r["varying_rate"]["rows"]
    ]
    return "\n\n".join(
        [
            "# Task allocation (paper 001): naive, TL, TD vs optimal",
            "## Headline figures: literal and tuned beside the paper\n\n"
            "literal: naive as §3.1 first states it (`naive-literal`), TL pairs tasks in "
            "task-id order (`-storm`), TD runs Algorithm 5 as written (`-literal`; a node "
            "that takes no balanced split gets part of one, `-to-r` leaves the pair to R "
            "instead); tuned: the defaults (naive with §3.1's refinement, diagonal pair "
            "order, TD's extra fills).\n\n"
            + markdown_table(
                ["figure", "variant", "paper", "measured"],
                [[h["figure"], h["variant"], h["paper"], h["measured"]] for h in r["headline"]],
            ),
            f"## Optimality over {o['graphs']} random jobs (§7.3)\n\n"
            f"3–7 groups, 17 tasks (one per group, the rest drawn uniformly: the "
            f"`{d['split']}` reading), 500 % spread in proportion to task counts, "
            f"8 × 100 % nodes; optimum by CP-SAT, proven on {d['proven_optimal']} of "
            f"{o['graphs']} jobs. The paper's §7 TL is TL-IMC.\n\n"
            + markdown_table(
                [
                    "algorithm",
                    "total gain GB/s per 2000 jobs",
                    "paper GB/s (2000 jobs)",
                    "% of optimal",
                    "paper %",
                    "median per-job %",
                    "incomplete",
                ],
                rows,
            ),
            f"With costs only loosely proportional to task counts (×U(0.5, 1.5), "
            f"{n['graphs']} jobs):\n\n" + markdown_table(["algorithm", "% of optimal"], noisy_rows),
            "## Allocation throughput, 4 groups × 100 tasks (§7.2)\n\n"
            "Allocations per second, median of timing windows, each allocation "
            "expanded to a task → node map.\n\n"
            + markdown_table(["algorithm", "allocations/s", "paper", "target"], thr_rows)
            + f"\n\nTD / TL = {r['throughput']['detail']['td_over_tl']:.0f}×.",
            "## Prioritisation, Fig. 4(a)\n\nIMC gain (MB/s) as ⟨v2,v3⟩'s IMC shrinks.\n\n"
            + markdown_table(["imc v2–v3", "TL significance", "TL IMC", "TD"], pr),
            "## Task count, Fig. 4(b)\n\nIMC gain (MB/s) as v2's task count grows.\n\n"
            + markdown_table(["tasks of v2", "TL", "TD", "optimal"], tc),
            "## Varying input rate, Fig. 9\n\nIMC gain (MB/s): TD planned once at "
            "the peak rate vs TD-RC re-planning on a > 20 % cost change.\n\n"
            + markdown_table(["minute", "rate ×", "TD", "TD-RC", "re-planned"], vr),
        ]
    )


def _plots(out: Path, r: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = r["optimality"]["detail"]
    names = ["naive-literal", "naive", "tl-imc-storm", "tl-imc", "td"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(names, [d["pct_of_optimal"][n] for n in names], color="tab:blue", label="measured")
    ax.scatter(
        ["tl-imc-storm", "td"],
        [PAPER["tl_pct"], PAPER["td_pct"]],
        color="tab:red",
        zorder=3,
        label="paper",
    )
    ax.set_ylim(50, 100)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_ylabel("total IMC gain, % of optimal")
    ax.set_title(f"Optimality over {d['graphs']} random jobs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "optimality.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    pr = r["prioritization"]["rows"]
    x = [row["imc_v2_v3"] for row in pr]
    axes[0].plot(x, [row["tl_significance"] for row in pr], "o-", label="TL significance")
    axes[0].plot(x, [row["tl_imc"] for row in pr], "s-", label="TL IMC")
    axes[0].invert_xaxis()
    axes[0].set_xlabel("IMC of ⟨v2,v3⟩ (MB/s)")
    axes[0].set_ylabel("IMC gain (MB/s)")
    axes[0].set_title("Fig. 4(a) prioritisation")
    axes[0].legend()
    tc = r["task_count"]["rows"]
    x = [row["tasks_v2"] for row in tc]
    for key, label in (("tl_imc", "TL"), ("td", "TD"), ("optimal", "optimal")):
        axes[1].plot(x, [row[key] for row in tc], "o-", label=label)
    axes[1].set_xlabel("tasks of v2")
    axes[1].set_title("Fig. 4(b) task count")
    axes[1].legend()
    vr = r["varying_rate"]["rows"]
    x = [row["minute"] for row in vr]
    axes[2].plot(x, [row["td_gain"] for row in vr], "o-", label="TD (planned at peak)")
    axes[2].plot(x, [row["td_rc_gain"] for row in vr], "s-", label="TD-RC")
    axes[2].set_xlabel("minute")
    axes[2].set_title("Fig. 9 varying input rate")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(out / "micro.png", dpi=120)
    plt.close(fig)

    t = r["throughput"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(["TD", "TL (IMC)", "TL (sig.)"], [t["td_per_s"], t["tl_per_s"], t["tl_rs_per_s"]])
    ax.axhline(PAPER["td_per_s"], color="tab:red", ls="--", label="paper TD (2014)")
    ax.set_yscale("log")
    ax.set_ylabel("allocations / s")
    ax.set_title("4 groups × 100 tasks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=120)
    plt.close(fig)
