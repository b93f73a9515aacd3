"""The surge's report: a timeline picture per policy and a Markdown summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streamscale.scenarios.surge_score import reaction, timeline, up_requests

__all__ = ["markdown", "plot_surge"]


def plot_surge(path: Path, outcomes: Sequence[Any], cfg: Any, *, oracle: Any = None) -> None:
    """Executors, offered vs committed rate and p99 over the generator's clock, one line
    per policy; the surge's start, and for each policy every request for more executors
    during the surge (▲; filled when made while a batch ran — the decision and the
    request are the same instant), the first executor's arrival (●) and its first
    second of tasks (■)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for o in outcomes:
        rows = timeline(o, cfg)
        if not rows:
            continue
        t = [r["t"] for r in rows]
        (line,) = axes[0].step(t, [r["executors"] for r in rows], where="post", label=o.policy)
        axes[1].plot(t, [r["input_rate"] for r in rows], marker=".", label=o.policy)
        axes[2].plot(t, [r["p99_ms"] for r in rows], marker=".", label=o.policy)
        marks = reaction(o, cfg)
        top = max(r["executors"] for r in rows) + 0.6
        mid = set(getattr(o, "mid_batch", []))
        for t_req in up_requests(o, cfg):  # every request up during the surge
            axes[0].plot([t_req - o.t0], [top], marker="^", linestyle="none",
                         color=line.get_color(),
                         fillstyle="full" if t_req in mid else "none")  # fmt: skip
        for key, marker in (("arrival_s", "o"), ("tasks_s", "s")):
            if marks[key] is not None:
                x = cfg.surge_at + marks[key]
                axes[0].plot([x], [max(r["executors"] for r in rows) + 0.3], marker=marker,
                             color=line.get_color(), linestyle="none")  # fmt: skip
    w = cfg.warmup_s
    offered = cfg.offered_points()
    if oracle is not None:  # the floor: perfect foresight, whole executors
        xs = [w + t for t in oracle.times] + [cfg.window[1]]
        ys = [*oracle.executors, oracle.executors[-1]]
        axes[0].step(xs, ys, where="post", color="black", linestyle="--", linewidth=0.8,
                     label="oracle")  # fmt: skip
    for ax in axes:
        ax.axvspan(0, w, color="grey", alpha=0.12,
                   label="warm-up (not scored)" if ax is axes[0] else None)  # fmt: skip
        ax.axvline(cfg.surge_at, color="black", linestyle=":", linewidth=0.8)
    axes[1].step(*offered, where="post", color="grey", linestyle="--", label="offered")
    axes[2].axhline(cfg.latency_target_ms, color="red", linestyle=":", label="latency target")
    axes[0].set_ylabel("executors alive")
    axes[1].set_ylabel("tuples/s committed")
    axes[2].set_ylabel("batch p99 latency (ms)")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("seconds since the generator started (steepest rise at the dotted line)")
    axes[0].set_title(
        f"{cfg.describe()}; {cfg.cost_ms:g} ms per tuple waited (cost_kind wall: emulated "
        f"cores); start-up {cfg.startup}; ▲ request (filled: while a batch ran) ● arrival "
        "■ tasks",
        fontsize="small",
        wrap=True,
    )
    for ax in axes:
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(v: Any, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def markdown(figures: Mapping[str, Mapping[str, Any]], cfg: Any, *, oracle: Any = None) -> str:
    """The summary table, tuple-weighted SLO first; core-seconds beside ``static-peak``'s
    where it ran, and the ``oracle``'s floor (:func:`~streamscale.scenarios.traffic.oracle`)
    as a last row when given."""
    head = (
        f"# streamscale: {cfg.describe()}, after a {cfg.warmup_s:g} s warm-up (not scored)\n\n"
        f"{cfg.cost_ms:g} ms per tuple *waited* (cost_kind wall: up to {cfg.max_executors} "
        f"executors × {cfg.executor_cores} task slots emulate cores). SLO: a tuple's "
        f"end-to-end latency ≤ {cfg.latency_target_ms:g} ms; `slo tuples` is the fraction of "
        "the tuples emitted in the scored window that met it, `slo batches` the fraction of "
        "batches whose p99 met it. Core-seconds are billed from each executor's request "
        f"(executor start-up: {cfg.startup}"
        f"{f', usable {cfg.startup_delay_s:g} s after the request' if cfg.startup == 'emulated' else ''}"
        ").\n\n"
        "| policy | slo tuples | slo batches | core-seconds | ÷ static-peak | mean cores "
        "| peak executors | scale-ups / downs | first tasks on added executors | p99 ms |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    peak = figures.get("static-peak", {}).get("core_seconds")

    def share(cs: float) -> str:
        return "–" if not peak else f"{cs / peak:.2f}"

    rows = []
    for name, f in figures.items():
        if "error" in f:
            rows.append(f"| {name} | failed: {f['error']} | | | | | | | | |")
            continue
        react = f.get("reaction_tasks_s")
        rows.append(
            f"| {name} | {100 * f['slo_tuples']:.0f} % | {100 * f['slo_batches']:.0f} % | "
            f"{f['core_seconds']:.0f} | {share(f['core_seconds'])} | {f['mean_cores']:.2f} | "
            f"{f['peak_executors']} | "
            f"{f['scale_ups']} / {f['scale_downs']} | "
            f"{'–' if react is None else f'{react:.1f} s after the surge'} | "
            f"{_f(f['p99_ms'], '.0f')} |"
        )
    if oracle is not None:
        window = cfg.window[1] - cfg.window[0]
        rows.append(
            f"| oracle (floor: perfect foresight, {oracle.startup_s:.0f} s start-up) | – | – | "
            f"{oracle.core_seconds:.0f} | {share(oracle.core_seconds)} | "
            f"{oracle.core_seconds / window:.2f} | {max(oracle.executors)} | – | – | – |"
        )
    title, rest = head.split("\n\n", 1)
    saving = _saving(figures, oracle)  # the headline, right under the title
    return (title + "\n\n" + saving + rest + "\n".join(rows) + "\n\n"
            + "![executors, rate and p99 over time](timeline.png)\n")  # fmt: skip


def _saving(figures: Mapping[str, Mapping[str, Any]], oracle: Any) -> str:
    """One sentence: what ``elastic`` kept and spent against ``static-peak`` (and the floor)."""
    el, peak = figures.get("elastic", {}), figures.get("static-peak", {})
    if "core_seconds" not in el or "core_seconds" not in peak:
        return ""
    share = el["core_seconds"] / peak["core_seconds"]
    word = (
        f"{100 * (1 - share):.0f} % less than"
        if share <= 1
        else f"{100 * (share - 1):.0f} % more than"
    )
    floor = (
        ""
        if oracle is None
        else (f", {el['core_seconds'] / oracle.core_seconds:.2f}× the oracle's floor")
    )
    return (
        f"**elastic** kept {100 * el['slo_tuples']:.1f} % of the tuples within the target "
        f"for {el['core_seconds']:.0f} core-seconds: {word} static-peak's "
        f"{peak['core_seconds']:.0f} (which kept {100 * peak['slo_tuples']:.1f} %){floor}.\n\n"
    )
