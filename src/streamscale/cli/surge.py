"""``streamscale surge``: the elasticity demo — cores follow a load surge on a real cluster."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer

from streamscale.cli.demo import check_values
from streamscale.cli.output import Output
from streamscale.cli.run import ensure_dir
from streamscale.errors import StreamscaleError, require_extra
from streamscale.scenarios.surge import SurgeConfig

__all__ = ["check_cluster", "policy_names", "register", "surge"]


def register(app: typer.Typer) -> None:
    app.command("surge", help="Elasticity demo: executors follow a load surge on a cluster.")(surge)


def surge(
    ctx: typer.Context,
    out_dir: Path = typer.Option(Path("report"), "--out", help="Report directory."),
    policies: str = typer.Option(
        "elastic,static-base",
        "--policies",
        help="Comma-separated: elastic, proportional, static-peak, static-base, "
        "spark-dynamic, spark-dynamic-tuned, restart-ds2.",
    ),
    phase: float = typer.Option(30.0, "--phase", help="Seconds of base, peak, base load."),
    base_rate: float = typer.Option(
        SurgeConfig.base_rate, "--base-rate", help="Base offered load (tuples/s)."
    ),
    peak_factor: float = typer.Option(
        SurgeConfig.peak_factor, "--peak-factor", help="Peak load ÷ base load."
    ),
    cost_ms: float = typer.Option(
        SurgeConfig.cost_ms,
        "--cost-ms",
        help="Per-tuple cost, waited (cost_kind wall: emulated cores).",
    ),
    warmup: float = typer.Option(
        SurgeConfig.warmup_s,
        "--warmup",
        help="Seconds at the base load before the scenario (not scored).",
    ),
    latency_target_ms: float = typer.Option(
        SurgeConfig.latency_target_ms,
        "--latency-target-ms",
        help="End-to-end latency each tuple should meet (the SLO, scored); not the planner's "
        "latency_target_ms, the queueing model's T_max, which the scenario sets to one trigger.",
    ),
    workers: int = typer.Option(2, "--workers", help="Loopback workers to start."),
    worker_cores: int = typer.Option(8, "--worker-cores", help="Task slots (cores) per worker."),
    executor_cores: int = typer.Option(
        SurgeConfig.executor_cores, "--executor-cores", help="Cores per executor."
    ),
    master: str | None = typer.Option(
        None, "--master", help="Use this running cluster (spark://…) instead of starting one."
    ),
) -> None:
    """Start a loopback cluster, run the surge under each policy, write summary and timeline."""
    require_extra("papers")  # the timeline picture (matplotlib)
    out: Output = ctx.obj
    names = policy_names(policies)
    check_values(
        {"--phase": phase, "--base-rate": base_rate, "--cost-ms": cost_ms,
         "--latency-target-ms": latency_target_ms, "--warmup": warmup},
        {},
    )  # fmt: skip
    if not (math.isfinite(peak_factor) and peak_factor >= 1):
        raise StreamscaleError(f"must be >= 1, got {peak_factor}", item="--peak-factor")
    check_cluster(workers, worker_cores, executor_cores, master)
    ensure_dir(out_dir, "--out")
    cfg = SurgeConfig(
        base_rate=base_rate,
        peak_factor=peak_factor,
        phase_s=phase,
        cost_ms=cost_ms,
        latency_target_ms=latency_target_ms,
        executor_cores=executor_cores,
        max_executors=workers * (worker_cores // executor_cores),
        warmup_s=warmup,
    )
    summary = _run(out, cfg, names, master, workers, worker_cores, out_dir)
    if out.json:
        out.emit(summary)
    else:
        out.console.print((out_dir / "summary.md").read_text(), markup=False)
        out.line(f"report written to {out_dir}/")


def policy_names(policies: str) -> list[str]:
    """The comma-separated ``--policies``, each a scenario policy; one-line errors."""
    from streamscale.scenarios.surge import SURGE_POLICIES

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if not names:
        raise StreamscaleError("no policy given", item="--policies")
    for n in names:
        if n not in SURGE_POLICIES:
            raise StreamscaleError(f"unknown policy (known: {', '.join(SURGE_POLICIES)})", item=n)
    return names


def check_cluster(workers: int, worker_cores: int, executor_cores: int, master: str | None) -> None:
    """The loopback cluster's size and a given master, checked before anything starts."""
    if not (1 <= workers <= 32 and 1 <= worker_cores <= 16):
        raise StreamscaleError("need 1 <= --workers <= 32, 1 <= --worker-cores <= 16", item="surge")
    if not 1 <= executor_cores <= worker_cores:
        raise StreamscaleError(
            f"must be between 1 and --worker-cores ({worker_cores})",
            item=f"--executor-cores {executor_cores}",
        )
    if master is not None and not master.startswith("spark://"):
        raise StreamscaleError("expected spark://HOST:PORT", item=f"--master {master}")


def _run(
    out: Output,
    cfg: Any,
    names: list[str],
    master: str | None,
    workers: int,
    cores: int,
    out_dir: Path,
    *,
    oracle_of: Any = None,
) -> dict[str, Any]:
    """Run ``names`` on ``master`` (else a loopback cluster started here) and write the
    report; ``oracle_of(outcomes)`` gives the floor to print beside them (or ``None``)."""
    from streamscale.cli.progress import BatchProgress
    from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
    from streamscale.scenarios.surge import config_dict, run_surge
    from streamscale.scenarios.surge_report import markdown, plot_surge
    from streamscale.scenarios.surge_score import summarize_surge, timeline

    d = None
    if master is None:
        d = Path(tempfile.mkdtemp(prefix="streamscale-surge-cluster-"))
        print(f"starting a loopback cluster: {workers} workers × {cores} slots", file=sys.stderr)
        master = cluster_up(workers, cores, memory=f"{cores}g", directory=d).master_url
    try:
        # one live line on a terminal, a plain line per batch otherwise; none with --json
        with BatchProgress(
            cores_per_executor=cfg.executor_cores, live=False if out.json else None
        ) as show:
            outcomes = run_surge(
                master, cfg, names, on_batch=(lambda row: None) if out.json else show
            )
    finally:
        if d is not None:
            cluster_down(d)
    figures = {o.policy: summarize_surge(o, cfg) for o in outcomes}
    ora = None if oracle_of is None else oracle_of(outcomes)
    config = {k: v for k, v in config_dict(cfg).items() if k != "load"}
    summary = {"policies": figures, "config": config, "master": master}
    if ora is not None:
        summary["oracle"] = {"core_seconds": ora.core_seconds, "startup_s": ora.startup_s,
                             "mean_executors": ora.mean_executors}  # fmt: skip
    peak = figures.get("static-peak", {}).get("core_seconds")
    if peak:
        summary["core_seconds_vs_static_peak"] = {
            n: f["core_seconds"] / peak for n, f in figures.items() if "core_seconds" in f
        }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (out_dir / "timeline.json").write_text(
        json.dumps({o.policy: timeline(o, cfg) for o in outcomes}, default=str)
    )
    plot_surge(out_dir / "timeline.png", outcomes, cfg, oracle=ora)
    (out_dir / "summary.md").write_text(markdown(figures, cfg, oracle=ora))
    return summary
