"""Tables beside paper 000's figures, dip analysis and plots for the Elasticutor reproduction."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.experiments.report import markdown_table
from streamscale.sim.run import Sample

__all__ = ["ORDER", "PAPER", "dips", "render"]

#: The paper's reported figures (paper 000, §5).
PAPER: dict[str, Any] = {
    "dip_s": {"rc": "10-20", "elastic": "1-3"},
    "sync_ms": {"elastic": "~2", "rc": "2-3 orders of magnitude longer"},
    "table2": {
        "naive_migration_mb_s": 13.9,
        "elastic_migration_mb_s": 2.4,
        "naive_remote_mb_s": 235.3,
        "elastic_remote_mb_s": 21.6,
    },
    "table3": {8: (66.6, 4.1), 16: (121.3, 5.2), 32: (218.6, 5.7)},
}


def dips(
    samples: Sequence[Sample],
    shuffles: Sequence[float],
    end: float,
    *,
    window: float = 5.0,
    recover: float = 0.9,
) -> dict[str, Any]:
    """Throughput dips after the key shuffles at times ``shuffles`` (paper 000, Fig. 7).

    The baseline is the median throughput over the ``window`` seconds before a
    shuffle; the dip lasts until two consecutive samples are back at
    ``recover`` × baseline (a dip not over by the next shuffle counts until it).
    ``depth`` is the largest relative loss during the dip.
    """
    none: dict[str, Any] = {
        "shuffles": 0,
        "mean_dip_s": 0.0,
        "max_dip_s": 0.0,
        "mean_depth": 0.0,
        "dips_s": [],
    }
    if not samples:
        return none
    t = np.array([s.time for s in samples])
    x = np.array([s.throughput for s in samples])
    step = float(t[0])
    durations: list[float] = []
    depths: list[float] = []
    times = sorted(shuffles)
    for j, ts in enumerate(times):
        if ts >= end - step:
            break
        before = x[(t > ts - window) & (t <= ts + 1e-9)]
        if before.size == 0 or float(np.median(before)) <= 0:
            continue
        base = float(np.median(before))
        nxt = min(times[j + 1], end) if j + 1 < len(times) else end
        idx = np.flatnonzero((t > ts + 1e-9) & (t <= nxt + 1e-9))
        dur = nxt - ts
        stop = idx.size
        for j, i in enumerate(idx):
            ok = x[i] >= recover * base
            ok_next = j + 1 >= idx.size or x[idx[j + 1]] >= recover * base
            if ok and ok_next:
                dur = max(0.0, float(t[i]) - step - ts)
                stop = j
                break
        seg = x[idx[: max(stop, 1)]] if idx.size else np.array([base])
        durations.append(dur)
        depths.append(max(0.0, 1.0 - float(seg.min()) / base))
    if not durations:
        return none
    return {
        "shuffles": len(durations),
        "mean_dip_s": float(np.mean(durations)),
        "max_dip_s": float(np.max(durations)),
        "mean_depth": float(np.mean(depths)),
        "dips_s": [float(d) for d in durations],
    }


def _k(x: float) -> float:
    return x / 1e3


def _by(rows: Sequence[Mapping[str, Any]], key: str) -> dict[Any, dict[str, Mapping[str, Any]]]:
    out: dict[Any, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(r[key], {})[r["policy"]] = r
    return out


ORDER: list[str] = ["static", "rc", "rc-damped", "naive-ec", "elastic"]


def _sweep_table(
    rows: Sequence[Mapping[str, Any]], key: str, label: str, policies: Sequence[str]
) -> str:
    by = _by(rows, key)
    cols = [label]
    ceiling = any("ceiling" in r for r in rows)
    offered = any("offered" in r for r in rows)
    if offered:
        cols.append("offered K t/s")
    if ceiling:
        cols.append("hot-shard ceiling K t/s")
    for p in policies:
        cols += [f"{p} K t/s", f"{p} mean ms", f"{p} p99 ms"]
    body = []
    for v, per in by.items():
        line: list[Any] = [v]
        first = next(iter(per.values()))
        if offered:
            line.append(_k(first.get("offered", math.nan)))
        if ceiling:
            line.append(_k(first.get("ceiling", math.nan)))
        for p in policies:
            r = per.get(p)
            line += (
                [_k(r["throughput"]), r["mean_latency_ms"], r["p99_ms"]] if r else ["-", "-", "-"]
            )
        body.append(line)
    return markdown_table(cols, body)


_NAME = {"rc": "RC", "elastic": "Elasticutor"}


def _sustained(results: Mapping[str, Any], pols: Sequence[str]) -> list[str]:
    rows = results.get("omega_sustained", [])
    if not rows:
        return []
    r = rows[0]
    return [
        "### Sustained load",
        "",
        f"Sources at {r['share']:g} × {_NAME.get(r['basis'], r['basis'])}'s saturation "
        f"throughput at ω = "
        f"{r['omega']:g} (the lower of RC's and Elasticutor's), a rate both serve: the "
        "latency ratio without a throughput shortfall.",
        "",
        _sweep_table(rows, "omega", "ω", pols),
        "",
    ]


def render(results: Mapping[str, Any], out: Path) -> str:
    """The ``results.md`` text; writes the PNG plots into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    present = {r["policy"] for r in results["omega_sweep"]}
    pols = [p for p in ORDER if p in present]
    md = [
        *_head(results),
        *_settings(results),
        *_omega(results, pols),
        *_dips_and_moves(results),
        *_skew_and_state(results),
        *_sse(results),
        *_table2(results),
        *_instances_table(results),
        *_scalability(results),
    ]
    _plots(results, out)
    return "\n".join(md)


def _head(results: Mapping[str, Any]) -> list[str]:
    """The title, the cluster and the target figures (paper vs measured)."""
    s = results["setup"]
    return [
        "# Elasticutor (paper 000, §5) on the cluster simulator",
        "",
        f"Micro-benchmark cluster: {s['nodes']} nodes × 8 cores, {s['executors']} instances × "
        f"{s['shards']} shards (static: one instance per core); {s['duration_s']:g} s measured "
        f"after {s['warmup_s']:g} s warm-up; seed {results['seed']}"
        + (" (quick run: smaller cluster than the paper's 32 nodes)." if results["quick"] else "."),
        "",
        "## Target figures (paper vs measured)",
        "",
        markdown_table(
            ["figure", "paper", "measured", "target", "met", "runs"],
            [
                [t["figure"], t["paper"], t["measured"], t["target"], t["met"], t["runs"]]
                for t in results.get("targets", [])
            ],
        ),
        "",
        *_reading(results),
    ]


def _settings(results: Mapping[str, Any]) -> list[str]:
    """The simulator's settings: queues, sources, capacity, RC, SSE instances."""
    s = results["setup"]
    cap = results.get("capacity", {})
    return [
        "## Settings",
        "",
        f"* Queues: {s.get('queue_s', 0.1):g} s of work per core before back-pressure "
        "(100 tuples at 1 ms, 2000 at 0.05 ms); 10 ms simulation step, queue paths "
        "followed inside each step (mean sojourn within 5 % of M/M/1, M/G/1, M/M/k at "
        "30-90 % load).",
        "* Saturation runs: sources emit as fast as back-pressure admits (the paper's "
        "pressured scenarios). Offered-load runs: sources at "
        f"{s.get('offered', 0.9):g} × min(CPU capacity, hot-shard ceiling); tuples held back "
        "at the source count in the latency.",
        f"* CPU capacity: micro-benchmark {_k(cap.get('micro', math.nan)):.1f} K t/s, "
        f"SSE {_k(cap.get('sse', math.nan)):.1f} K orders/s. Hot-shard ceiling: the rate at "
        "which the hottest shard fills one core (a shard never spans cores), worst key "
        "permutation of the run.",
        "* RC as the paper describes it (`rc`: same balancing as Elasticutor, δ > θ = 1.2 "
        "triggers a repartitioning down to θ; global sync = 20 ms per upstream instance + "
        "0.2 ms per moved shard (the per-shard figure is an assumption)); `rc-damped` adds "
        "hysteresis, small-gain holds and no "
        "decisions during a pause (not in the paper). SSE static: the same instances for "
        "every operator (no per-operator cost knowledge), one per core. SSE elastic "
        f"instances: one per {s.get('sse_nodes_per_executor', 2)} nodes and operator "
        "(each holds at least one core).",
        "",
    ]


def _omega(results: Mapping[str, Any], pols: Sequence[str]) -> list[str]:
    """Throughput and latency against ω, saturated and at an offered load (Fig. 6)."""
    return [
        "## Throughput and latency vs ω (Fig. 6)",
        "",
        "Paper: Elasticutor best for ω > 0 and degrades marginally; static low but flat; "
        "RC degrades with ω, its latency 2-3 orders of magnitude worse by ω = 16.",
        "",
        "Saturation runs. Latency is from entering the calculator's queues to completion; "
        "with saturating sources the bottleneck task's queue sits at the back-pressure "
        "bound, so latency mostly shows how full the queues are.",
        "",
        _sweep_table(results["omega_sweep"], "omega", "ω", pols),
        "",
        "### Offered load",
        "",
        "Sources at a fixed rate; waiting at a throttled source counts in the latency.",
        "",
        _sweep_table(results.get("omega_offered", []), "omega", "ω", pols)
        if results.get("omega_offered")
        else "(no offered-load runs)",
        "",
        *_sustained(results, pols),
    ]


def _dips_and_moves(results: Mapping[str, Any]) -> list[str]:
    """The dips after each shuffle (Fig. 7) and the reassignment times (Fig. 11)."""
    s = results["setup"]
    return [
        "## Throughput dips after each shuffle at ω = 2 (Fig. 7)",
        "",
        f"Saturation, a separate run of {s.get('timeline_s', s['duration_s']):g} s after a "
        f"warm-up of {s.get('timeline_warmup_s', s['warmup_s']):g} s (one shuffle period), "
        "so each measured shuffle starts from the policy's steady state. A dip lasts from "
        "the shuffle until two consecutive 1 s samples are back at 0.9 × the median of the "
        "5 s before it.",
        "",
        markdown_table(
            [
                "policy",
                "shuffles",
                "each dip (s)",
                "mean dip (s)",
                "max dip (s)",
                "mean depth",
                "paper dip (s)",
            ],
            [
                [
                    d["policy"],
                    d["shuffles"],
                    " / ".join(f"{x:g}" for x in d.get("dips_s", [])) or "-",
                    d["mean_dip_s"],
                    d["max_dip_s"],
                    d["mean_depth"],
                    PAPER["dip_s"].get(d["policy"], "-"),
                ]
                for d in results["dips_omega2"]
            ],
        ),
        "",
        "## Shard reassignment time at ω = 2 (Fig. 11)",
        "",
        markdown_table(
            [
                "policy",
                "moves",
                "remote moves",
                "sync ms/move",
                "state transfer ms/move",
                "global pauses",
                "mean pause (s)",
                "paper sync",
            ],
            [
                [
                    r["policy"],
                    r["moves"],
                    r["remote_moves"],
                    r["sync_ms_per_move"],
                    r["transfer_ms_per_move"],
                    r["global_pauses"],
                    r["mean_pause_s"],
                    PAPER["sync_ms"].get(r["policy"], "-"),
                ]
                for r in results["reassignment_omega2"]
                if r["policy"] != "static"
            ],
        ),
        "",
    ]


def _skew_and_state(results: Mapping[str, Any]) -> list[str]:
    """Throughput against key skew (Fig. 10) and state size per shard (Fig. 9)."""
    return [
        "## Throughput vs key skew α at ω = 2 (Fig. 10)",
        "",
        "Paper: static suffers most; Elasticutor ahead of RC for α ≤ 0.6, behind it at α ≥ 0.7.",
        "",
        _sweep_table(results["skew_sweep"], "alpha", "α", ["static", "rc", "elastic"]),
        "",
        "The hot-shard ceiling bounds RC and Elasticutor alike (static is bound by its "
        "hottest instance, lower still).",
        "",
        "## Throughput vs state size per shard at ω = 2 (Fig. 9)",
        "",
        "Paper: RC and Elasticutor drop as state grows, Elasticutor ahead of RC; both below "
        "static at 32 MB per shard.",
        "",
        _sweep_table(
            results["state_sweep"], "state_kb_per_shard", "KB/shard", ["static", "rc", "elastic"]
        ),
        "",
    ]


def _sse(results: Mapping[str, Any]) -> list[str]:
    """The SSE-like stock exchange, saturated and at an offered load (Fig. 19)."""
    sse = results["sse"]
    nodes = sse[0]["nodes"] if sse else 0
    return [
        f"## SSE-like stock exchange, {nodes} nodes (Fig. 19)",
        "",
        "Paper: naive-EC and Elasticutor ≈ 2× the throughput of static and RC, latency 1-2 "
        "orders of magnitude lower.",
        "",
        "Saturation runs; hot-shard ceiling "
        f"{_k(sse[0].get('ceiling', math.nan)) if sse else math.nan:.1f} K orders/s.",
        "",
        markdown_table(
            ["policy", "K orders/s", "mean ms", "p99 ms", "migration MB/s", "remote MB/s"],
            [
                [
                    r["policy"],
                    _k(r["throughput"]),
                    r["mean_latency_ms"],
                    r["p99_ms"],
                    r["migration_mb_s"],
                    r["remote_mb_s"],
                ]
                for r in sse
            ],
        ),
        "",
        "Offered load"
        + (
            f" ({_k(results['sse_offered'][0]['offered']):.1f} K orders/s):"
            if results.get("sse_offered")
            else ":"
        ),
        "",
        markdown_table(
            ["policy", "K orders/s", "mean ms", "p99 ms"],
            [
                [r["policy"], _k(r["throughput"]), r["mean_latency_ms"], r["p99_ms"]]
                for r in results.get("sse_offered", [])
            ],
        ),
        "",
    ]


def _table2(results: Mapping[str, Any]) -> list[str]:
    """naive-EC against Elasticutor: migration and remote transfer (Table 2)."""
    nv = results["naive_vs_elastic"]
    t2 = PAPER["table2"]
    return [
        "## naive-EC vs Elasticutor (Table 2)",
        "",
        markdown_table(
            ["metric", "naive-EC", "Elasticutor", "paper naive-EC", "paper Elasticutor"],
            [
                [
                    "state migration (MB/s)",
                    nv["naive_migration_mb_s"],
                    nv["elastic_migration_mb_s"],
                    t2["naive_migration_mb_s"],
                    t2["elastic_migration_mb_s"],
                ],
                [
                    "remote data transfer (MB/s)",
                    nv["naive_remote_mb_s"],
                    nv["elastic_remote_mb_s"],
                    t2["naive_remote_mb_s"],
                    t2["elastic_remote_mb_s"],
                ],
            ],
        ),
        "",
    ]


def _scalability(results: Mapping[str, Any]) -> list[str]:
    """Elasticutor's throughput and scheduler time against the cluster size (Table 3)."""
    return [
        "## Scalability of Elasticutor on the SSE workload (Table 3)",
        "",
        markdown_table(
            ["nodes", "K orders/s", "scheduler ms (median)", "paper K t/s", "paper scheduler ms"],
            [
                [
                    r["nodes"],
                    _k(r["throughput"]),
                    r["scheduler_ms"],
                    PAPER["table3"].get(r["nodes"], ("-", "-"))[0],
                    PAPER["table3"].get(r["nodes"], ("-", "-"))[1],
                ]
                for r in results["scalability"]
            ],
        ),
        "",
        "Scheduler time is the wall time of one whole `elastic` decision in Python "
        "(allocation, Algorithm 1 and shard balancing); the paper's is Algorithm 1 alone in Java.",
        "",
        "Plots: `omega.png`, `timeline_omega2.png`, `skew.png`, `state.png`, `sse.png`, "
        "`scalability.png`.",
    ]


def _instances_table(results: Mapping[str, Any]) -> list[str]:
    """SSE figures of naive-EC and Elasticutor for other instance counts per operator."""
    rows = results.get("sse_executors", [])
    if len({r["executors_per_operator"] for r in rows}) < 2:
        return []
    by = _by(rows, "executors_per_operator")
    body = []
    for y, per in sorted(by.items()):
        n, e = per.get("naive-ec"), per.get("elastic")
        if n is None or e is None:
            continue
        body.append(
            [
                f"{y}" + (" (default)" if e.get("default") else ""),
                _k(e["throughput"]),
                _k(n["throughput"]),
                n["migration_mb_s"],
                e["migration_mb_s"],
                n["migration_mb_s"] / e["migration_mb_s"] if e["migration_mb_s"] > 0 else "-",
                n["remote_mb_s"],
                e["remote_mb_s"],
            ]
        )
    return [
        "### Instances per operator (SSE, saturation)",
        "",
        "Every instance holds at least one core, so the instances per operator fix how much "
        "room each has to scale and how many cores the light operators hold; naive-EC and "
        "Elasticutor only differ in how cores are assigned.",
        "",
        markdown_table(
            [
                "instances per operator",
                "Elasticutor K orders/s",
                "naive-EC K orders/s",
                "naive-EC migration MB/s",
                "Elasticutor migration MB/s",
                "ratio",
                "naive-EC remote MB/s",
                "Elasticutor remote MB/s",
            ],
            body,
        ),
        "",
    ]


def _reading(results: Mapping[str, Any]) -> list[str]:
    """Measured facts that explain the figures (pauses, instance granularity, caps)."""
    s = results["setup"]
    out = ["Reading the figures (measured in this run):", ""]
    pauses = {r["policy"]: r for r in results.get("reassignment_omega2", [])}
    rc = pauses.get("rc")
    if rc:
        out.append(
            f"* RC at ω = 2: {rc['global_pauses']} global pauses, {rc['mean_pause_s']:.2f} s "
            f"each on average, with {s['nodes']} upstream generator instances (the sync "
            "grows with them and with the shards moved)."
        )
    cap = results.get("capacity", {}).get("micro")
    zero = {r["policy"]: r for r in results["omega_sweep"] if r["omega"] == 0}
    if cap and "elastic" in zero and "rc" in zero:
        out.append(
            f"* Saturation at ω = 0 reaches {zero['elastic']['throughput'] / cap:.0%} "
            f"(Elasticutor) and {zero['rc']['throughput'] / cap:.0%} (RC) of the CPU "
            "capacity: both balance only until δ ≤ θ = 1.2, so the hottest task saturates "
            "first."
        )
    sse = results.get("sse", [])
    if sse:
        nodes = sse[0]["nodes"]
        per = max(1, nodes // s.get("sse_nodes_per_executor", 2))
        out.append(
            f"* SSE on {nodes} nodes: {12 * per} instances (12 operators × "
            f"{per}) on {nodes * 8} cores; each keeps at least one core, "
            "so the 5 light event operators hold cores they use a fraction of."
        )
    out += _misses(results)
    out.append("")
    return out


def _misses(results: Mapping[str, Any]) -> list[str]:
    """The measured figures behind each missed target (nothing is tuned to meet one)."""
    missed = {t["figure"] for t in results.get("targets", []) if not t["met"]}
    out: list[str] = []
    dips_by = {d["policy"]: d for d in results.get("dips_omega2", [])}
    pauses = {r["policy"]: r for r in results.get("reassignment_omega2", [])}
    if "omega2_dip_s_rc" in missed and "rc" in dips_by:
        each = " / ".join(f"{x:g}" for x in dips_by["rc"].get("dips_s", []))
        pause = pauses.get("rc", {}).get("mean_pause_s", math.nan)
        out.append(
            f"* Missed, RC's dip: {each} s after the measured shuffles. RC repartitions "
            "until δ settles, each time a global pause "
            f"({pause:.2f} s on average here); the sync cost per upstream instance "
            "and per moved shard is not raised to reach the paper's 10-20 s."
        )
    cap = results.get("capacity", {}).get("sse")
    sse = {r["policy"]: r for r in results.get("sse", [])}
    if (
        cap
        and {"elastic", "static"} <= set(sse)
        and (missed & {"sse_throughput_elastic_over_static", "sse_throughput_elastic_over_rc"})
    ):
        out.append(
            f"* Missed, SSE throughput: Elasticutor reaches "
            f"{sse['elastic']['throughput'] / cap:.0%} of the CPU capacity and static "
            f"{sse['static']['throughput'] / cap:.0%}. Every instance keeps at least "
            "one core and the allocation starts from ⌊λ/μ⌋ + 1 cores per instance, so "
            "each instance holds up to a core of slack; static with the same instances "
            "for every operator is not the weak baseline the paper's was."
        )
    ys = results.get("sse_executors", [])
    if "sse_migration_naive_over_elastic" in missed and ys:
        by = _by(ys, "executors_per_operator")
        parts = [
            f"{y} per operator {per['naive-ec']['migration_mb_s']:.1f} vs "
            f"{per['elastic']['migration_mb_s']:.1f} MB/s"
            for y, per in sorted(by.items())
            if {"naive-ec", "elastic"} <= set(per)
        ]
        out.append(
            "* Missed, naive-EC ÷ Elasticutor migration: naive-EC vs Elasticutor state "
            f"migration with {'; '.join(parts)}. Both re-plan cores every second at "
            "saturation; instances of one or two cores leave Algorithm 1 little to "
            "choose between, and Elasticutor still moves shards to and from the remote "
            "cores its φ doubling admits."
        )
    return out


def _plots(results: Mapping[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def sweep(rows: Sequence[Mapping[str, Any]], key: str, name: str, xlabel: str) -> None:
        by = _by(rows, key)
        xs = list(by)
        policies = sorted({r["policy"] for r in rows}, key=ORDER.index)
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for p in policies:
            pts = [(i, by[x][p]) for i, x in enumerate(xs) if p in by[x]]
            ax[0].plot([i for i, _ in pts], [_k(r["throughput"]) for _, r in pts], "o-", label=p)
            ax[1].plot([i for i, _ in pts], [r["mean_latency_ms"] for _, r in pts], "o-", label=p)
        for a in ax:
            a.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
            a.set_xlabel(xlabel)
        ax[0].set_ylabel("throughput (K tuples/s)")
        ax[1].set_ylabel("mean latency (ms)")
        ax[1].set_yscale("log")
        ax[0].legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)

    sweep(results["omega_sweep"], "omega", "omega.png", "ω (shuffles per minute)")
    sweep(results["skew_sweep"], "alpha", "skew.png", "Zipf α")
    sweep(results["state_sweep"], "state_kb_per_shard", "state.png", "state per shard (KB)")

    for name, series, title in (
        ("timeline_omega2.png", results["timeline_omega2"], "micro-benchmark, ω = 2"),
        ("sse.png", results["sse_timeline"], "SSE-like workload"),
    ):
        fig, ax = plt.subplots(figsize=(10, 4))
        for p, pts in series.items():
            ax.plot([x["time"] for x in pts], [_k(x["throughput"]) for x in pts], label=p)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("throughput (K tuples/s, 1 s windows)")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)

    sc = results["scalability"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot([r["nodes"] for r in sc], [_k(r["throughput"]) for r in sc], "o-", label="simulated")
    ax[1].plot([r["nodes"] for r in sc], [r["scheduler_ms"] for r in sc], "o-", label="simulated")
    paper = PAPER["table3"]
    ax[0].plot(list(paper), [v[0] for v in paper.values()], "s--", label="paper")
    ax[1].plot(list(paper), [v[1] for v in paper.values()], "s--", label="paper")
    ax[0].set_ylabel("throughput (K orders/s)")
    ax[1].set_ylabel("scheduler time (ms)")
    for a in ax:
        a.set_xlabel("nodes")
        a.legend()
    fig.tight_layout()
    fig.savefig(out / "scalability.png", dpi=110)
    plt.close(fig)
