"""``streamscale demo``: paper 000's micro-benchmark under each policy, live, then a report."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import typer

from streamscale.cli.output import Output
from streamscale.cli.run import ensure_dir
from streamscale.errors import StreamscaleError, require_extra

__all__ = ["check_values", "demo", "register"]


def register(app: typer.Typer) -> None:
    app.command("demo", help="Run paper 000's micro-benchmark on Spark under each policy.")(demo)


def _f(v: Any, fmt: str = "{:.4g}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return fmt.format(v)


class _Live:
    """Per-policy rows for the live table, updated from Spark's batch callbacks."""

    def __init__(self, policies: tuple[str, ...]) -> None:
        self.rows: dict[str, dict[str, Any]] = {p: {"status": "waiting"} for p in policies}
        self.done = 0
        self.lock = threading.Lock()

    def table(self) -> Any:
        from rich.table import Table

        t = Table(title="streamscale demo", title_justify="left")
        for c in ("policy", "status", "batches", "rows", "tuples/s", "p50 ms", "p99 ms", "δ"):
            t.add_column(c, justify="right" if c not in ("policy", "status") else "left")
        with self.lock:
            for p, r in self.rows.items():
                t.add_row(
                    p,
                    r["status"],
                    _f(r.get("batches"), "{}"),
                    _f(r.get("rows"), "{}"),
                    _f(r.get("throughput")),
                    _f(r.get("p50")),
                    _f(r.get("p99")),
                    _f(r.get("delta"), "{:.2f}"),
                )
        return t


def demo(
    ctx: typer.Context,
    out_dir: Path = typer.Option(Path("report"), "--out", help="Report directory."),
    duration: float = typer.Option(
        30.0, "--duration", help="Seconds of micro-batches per policy (after a warm-up batch)."
    ),
    policies: str = typer.Option(
        "elastic,static,rc,naive-ec,spark-native",
        "--policies",
        help="Comma-separated policies to run in turn (spark-native = Spark's own state store).",
    ),
    master: str = typer.Option("local[*]", "--master", help="Spark master URL."),
    rate: float | None = typer.Option(
        None, "--rate", help="Offered tuples/s (default 1.1 × the physical limit)."
    ),
    alpha: float = typer.Option(0.5, "--alpha", help="Zipf skew of key frequencies."),
    omega: float = typer.Option(2.0, "--omega", help="Key-frequency shuffles per minute."),
    cost_ms: float = typer.Option(1.0, "--cost-ms", help="Mean CPU cost per tuple (ms)."),
    keys: int = typer.Option(10_000, "--keys", help="Key space size."),
    trigger: float = typer.Option(2.0, "--trigger", help="Micro-batch interval (s)."),
    seed: int = typer.Option(7, "--seed", help="Generator seed."),
) -> None:
    """Run the micro-benchmark and write summary.json, summary.md and timeline.png to --out."""
    from streamscale.scenarios.demo import DemoConfig

    require_extra("papers")  # the timeline picture (matplotlib)
    out: Output = ctx.obj
    names = tuple(p.strip() for p in policies.split(",") if p.strip())
    _check_policies(names)
    check_values(
        {"--duration": duration, "--trigger": trigger, "--rate": rate},
        {"--cost-ms": cost_ms, "--alpha": alpha, "--omega": omega},
    )
    if keys < 1:
        raise StreamscaleError(f"must be >= 1, got {keys}", item="--keys")
    ensure_dir(out_dir, "--out")
    config = DemoConfig(
        duration_s=duration,
        policies=names,
        keys=keys,
        alpha=alpha,
        omega=omega,
        cost_ms=cost_ms,
        rate=rate,
        trigger_s=trigger,
        seed=seed,
    )
    summary = _run(out, config, out_dir, master)
    if out.json:
        out.emit(summary)
    else:
        out.console.print((out_dir / "summary.md").read_text(), markup=False)
        out.line(f"report written to {out_dir}/")
    failed = [p for p, f in summary["policies"].items() if "error" in f]
    if failed:
        raise StreamscaleError(f"{len(failed)} polic(ies) failed: {', '.join(failed)}", item="demo")


def check_values(positive: dict[str, float | None], non_negative: dict[str, float | None]) -> None:
    """Finite numbers, > 0 (``positive``) or >= 0 (``non_negative``); ``None`` = unset."""
    for option, v in (*positive.items(), *non_negative.items()):
        if v is None:
            continue
        if not math.isfinite(v):
            raise StreamscaleError(f"must be finite, got {v}", item=option)
        if option in positive and not v > 0:
            raise StreamscaleError(f"must be > 0, got {v:g}", item=option)
        if v < 0:
            raise StreamscaleError(f"must be >= 0, got {v:g}", item=option)


def _check_policies(names: tuple[str, ...]) -> None:
    if not names:
        raise StreamscaleError("no policy given", item="--policies")
    from streamscale.control.policies import POLICIES
    from streamscale.scenarios.native import NATIVE_POLICY

    known = [*POLICIES, NATIVE_POLICY]
    for n in names:
        if n not in known:
            raise StreamscaleError(f"unknown policy (known: {', '.join(known)})", item=n)


def _run(out: Output, config: Any, out_dir: Path, master: str) -> dict[str, Any]:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.scenarios.demo import run_demo, summarize, write_report

    live_rows = _Live(config.policies)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )
    total = config.batches * len(config.policies)
    task = progress.add_task("starting Spark", total=total)

    def on_start(policy: str) -> None:
        with live_rows.lock:
            live_rows.rows[policy]["status"] = "running"
        progress.update(task, description=f"policy {policy}")

    def on_batch(policy: str, rec: Any) -> None:
        with live_rows.lock:
            r = live_rows.rows[policy]
            r["batches"] = r.get("batches", 0) + 1
            r["rows"] = r.get("rows", 0) + rec.rows
            r["throughput"], r["p50"], r["p99"] = (
                rec.input_rate,
                rec.latency_p50_ms,
                rec.latency_p99_ms,
            )
            r["delta"] = rec.delta
            done = live_rows.done * config.batches + min(r["batches"], config.batches)
        progress.update(task, completed=done)

    def on_done(outcome: Any) -> None:
        with live_rows.lock:
            r = live_rows.rows[outcome.policy]
            if outcome.result is not None:
                res = outcome.result
                r.update(status="done", throughput=res.throughput, p50=res.p50_ms, p99=res.p99_ms)
            else:
                r["status"] = "failed"
            live_rows.done += 1
        progress.update(task, completed=live_rows.done * config.batches)

    stop = threading.Event()

    def tick(live: Any) -> None:
        while not stop.wait(0.5):
            live.update(Group(live_rows.table(), progress))

    spark = build_session(master, app_name="streamscale-demo")
    cores = int(spark.sparkContext.defaultParallelism)
    try:
        with Live(
            Group(live_rows.table(), progress),
            # With --json, stdout carries only the summary; the live view goes to stderr.
            console=Console(stderr=True) if out.json else out.console,
            refresh_per_second=4,
            transient=False,
        ) as live:
            ticker = threading.Thread(target=tick, args=(live,), daemon=True)
            ticker.start()
            try:
                outcomes = run_demo(
                    spark, config, out_dir, on_start=on_start, on_batch=on_batch, on_done=on_done
                )
            finally:
                stop.set()
                ticker.join(timeout=2)
            progress.update(task, completed=total, description="finished")
            live.update(Group(live_rows.table(), progress))
    finally:
        spark.stop()
    summary = summarize(outcomes, config, cores=cores, master=master)
    write_report(out_dir, summary, outcomes)
    return summary
