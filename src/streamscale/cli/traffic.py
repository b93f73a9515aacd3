"""``streamscale traffic``: elasticity on real traffic — a load trace replayed on a cluster.

What ``make demo`` runs: the bundled trace (road-sensor occupancy, NAB, MIT licence)
replayed as the micro-benchmark's offered load at a deployment's time scale
(``--deployment``: every time constant compressed with the trace, see
:mod:`streamscale.scenarios.deployment`) under ``elastic`` and ``static-peak``, with the
tuples each kept within the latency target, the core-hours each was billed, the saving,
and the oracle's floor. The days of the file before the replayed window are the
forecast's history (``--history`` gives another file).
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
        help="A timestamp,value CSV (default: the bundled days of traffic).",
    ),
    deployment: str = typer.Option(
        "minutes", "--deployment",
        help="The deployment the replay stands for: minutes (c = 60: trigger 2 min, target "
        "10 min, start-up 60 s), seconds (c = 10: trigger 20 s, target 100 s, real start-up) "
        "or compressed (a day in 4 minutes).",
    ),
    window: str | None = typer.Option(
        None, "--window",
        help="START,HOURS of the trace (default: the deployment's, around the steepest rise "
        "of the file's 8th day, or of its first).",
    ),
    hours: float | None = typer.Option(
        None, "--hours", help="Hours of the default window (default: the deployment's quick one)."
    ),
    history: Path | None = typer.Option(
        None, "--history",
        help="The load's earlier days (the trace format) for the forecast (default: the "
        "trace's rows before the window).",
    ),
    peak_rate: float = typer.Option(
        300.0, "--peak-rate", help="Tuples/s the window's 99th percentile maps to."
    ),
    out_dir: Path = typer.Option(Path("report"), "--out", help="Report directory."),
    policies: str = typer.Option(
        "elastic,static-peak", "--policies", help="Comma-separated policies (see 'surge')."
    ),
    startup: str | None = typer.Option(
        None, "--startup",
        help="Executor start-up: real, or emulated (started beforehand; default: the "
        "deployment's).",
    ),
    startup_delay: float | None = typer.Option(
        None, "--startup-delay",
        help="Replayed seconds an emulated request takes to become usable (default: the "
        "deployment's start-up, compressed).",
    ),
    warmup: float = typer.Option(20.0, "--warmup", help="Seconds before the replay (not scored)."),
    workers: int = typer.Option(2, "--workers", help="Loopback workers to start."),
    worker_cores: int = typer.Option(8, "--worker-cores", help="Task slots (cores) per worker."),
    executor_cores: int = typer.Option(2, "--executor-cores", help="Cores per executor."),
    master: str | None = typer.Option(
        None, "--master", help="Use this running cluster (spark://…) instead of starting one."
    ),
) -> None:  # fmt: skip
    """Replay the trace under each policy; write summary.md, summary.json, timeline.png."""
    require_extra("papers")  # the timeline picture (matplotlib)
    out: Output = ctx.obj
    names = policy_names(policies)
    cfg = _config(trace, deployment, window, hours, history, peak_rate, startup,
                  startup_delay, warmup, workers, worker_cores, executor_cores, master,
                  out_dir)  # fmt: skip
    summary = _run(out, cfg, names, master, workers, worker_cores, out_dir,
                   oracle_of=lambda outcomes: _oracle(cfg, outcomes))  # fmt: skip
    if out.json:
        out.emit(summary)
    else:
        out.console.print((out_dir / "summary.md").read_text(), markup=False)
        out.line(f"report written to {out_dir}/")


def _config(
    trace: Path, name: str, window: str | None, hours: float | None, history: Path | None,
    peak_rate: float, startup: str | None, startup_delay: float | None, warmup: float,
    workers: int, worker_cores: int, executor_cores: int, master: str | None, out_dir: Path,
) -> Any:  # fmt: skip
    """The replay from the options: every bad value one line, before anything starts."""
    from streamscale.scenarios.deployment import deployment
    from streamscale.scenarios.traffic import TrafficConfig

    dep = deployment(name)
    check_values({"--peak-rate": peak_rate, "--hours": hours},
                 {"--warmup": warmup, "--startup-delay": startup_delay})  # fmt: skip
    check_cluster(workers, worker_cores, executor_cores, master)
    ensure_dir(out_dir, "--out")
    max_ex = workers * (worker_cores // executor_cores)
    extra = {} if startup_delay is None else {"startup_delay_s": startup_delay}
    return TrafficConfig.for_deployment(
        str(trace), dep, quick=True, window=window, hours=hours, history=None if history is None else str(history),
        history_out=out_dir / "history.csv", peak_rate=peak_rate,
        executor_cores=executor_cores, max_executors=max_ex, elastic_instances=max_ex,
        warmup_s=warmup, startup=startup or dep.startup, **extra,
    )  # fmt: skip


def _oracle(cfg: Any, outcomes: list[Any]) -> Any:
    """The floor, with the start-up the elastic run observed (the emulated delay in that
    mode; ``cfg.startup_delay_s`` when no executor was added)."""
    from streamscale.scenarios.traffic import observed_startup, oracle

    startup = cfg.startup_delay_s
    if cfg.startup == "real":  # the deployment's until one was seen
        runs = [o for o in outcomes if o.policy == "elastic" and o.error is None]
        startup = observed_startup(runs[0], startup) if runs else startup
    return oracle(cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
                  startup_s=startup)  # fmt: skip
