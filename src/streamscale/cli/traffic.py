"""``streamscale traffic``: elasticity on real traffic — a load trace replayed on a cluster.

What ``make demo`` runs: the bundled trace (a day of road-sensor occupancy, NAB, MIT
licence) replayed as the micro-benchmark's offered load under ``elastic`` and
``static-peak``, with the tuples each kept within the latency target, the core-seconds
each was billed, the saving, and the oracle's floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from streamscale.cli.demo import check_values
from streamscale.cli.output import Output
from streamscale.cli.run import ensure_dir
from streamscale.cli.surge import _run, check_cluster, policy_names
from streamscale.errors import require_extra

__all__ = ["BUNDLED_TRACE", "register", "traffic"]

#: the trace ``make demo`` replays (shipped with the package, with its licence)
BUNDLED_TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "occupancy_6005.csv"


def register(app: typer.Typer) -> None:
    app.command("traffic", help="Elasticity on real traffic: a load trace replayed on a cluster.")(
        traffic
    )


def traffic(
    ctx: typer.Context,
    trace: Path = typer.Option(
        BUNDLED_TRACE,
        "--trace",
        help="A timestamp,value CSV (default: the bundled day of traffic).",
    ),
    window: str | None = typer.Option(
        None, "--window", help="START,HOURS of the trace (default: its first 24 hours)."
    ),
    minutes: float = typer.Option(2.5, "--minutes", help="Replay the window in M minutes."),
    peak_rate: float = typer.Option(
        300.0, "--peak-rate", help="Tuples/s the window's 99th percentile maps to."
    ),
    out_dir: Path = typer.Option(Path("report"), "--out", help="Report directory."),
    policies: str = typer.Option(
        "elastic,static-peak", "--policies", help="Comma-separated policies (see 'surge')."
    ),
    startup: str = typer.Option(
        "real", "--startup", help="Executor start-up: real, or emulated (started beforehand)."
    ),
    startup_delay: float = typer.Option(
        20.0, "--startup-delay", help="Seconds an emulated request takes to become usable."
    ),
    warmup: float = typer.Option(15.0, "--warmup", help="Seconds before the replay (not scored)."),
    workers: int = typer.Option(2, "--workers", help="Loopback workers to start."),
    worker_cores: int = typer.Option(8, "--worker-cores", help="Task slots (cores) per worker."),
    executor_cores: int = typer.Option(2, "--executor-cores", help="Cores per executor."),
    master: str | None = typer.Option(
        None, "--master", help="Use this running cluster (spark://…) instead of starting one."
    ),
) -> None:
    """Replay the trace under each policy; write summary.md, summary.json, timeline.png."""
    from streamscale.scenarios.traffic import TrafficConfig

    require_extra("papers")  # the timeline picture (matplotlib)
    out: Output = ctx.obj
    names = policy_names(policies)
    check_values({"--minutes": minutes, "--peak-rate": peak_rate},
                 {"--warmup": warmup, "--startup-delay": startup_delay})  # fmt: skip
    check_cluster(workers, worker_cores, executor_cores, master)
    max_ex = workers * (worker_cores // executor_cores)
    cfg = TrafficConfig.from_trace(
        str(trace), window=window, minutes=minutes, peak_rate=peak_rate,
        executor_cores=executor_cores, max_executors=max_ex, elastic_instances=max_ex,
        warmup_s=warmup, startup=startup, startup_delay_s=startup_delay,
    )  # fmt: skip
    ensure_dir(out_dir, "--out")
    summary = _run(out, cfg, names, master, workers, worker_cores, out_dir,
                   oracle_of=lambda outcomes: _oracle(cfg, outcomes))  # fmt: skip
    if out.json:
        out.emit(summary)
    else:
        out.console.print((out_dir / "summary.md").read_text(), markup=False)
        out.line(f"report written to {out_dir}/")


def _oracle(cfg: Any, outcomes: list[Any]) -> Any:
    """The floor, with the start-up the elastic run observed (the emulated delay in that
    mode; ``cfg.startup_delay_s`` when no executor was added)."""
    from streamscale.scenarios.traffic import observed_startup, oracle

    startup = cfg.startup_delay_s
    if cfg.startup == "real":
        runs = [o for o in outcomes if o.policy == "elastic" and o.error is None]
        startup = observed_startup(runs[0], startup) if runs else startup
    return oracle(cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
                  startup_s=startup)  # fmt: skip
