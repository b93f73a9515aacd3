"""``streamscale run JOB.yaml --policy P``: run a job on Spark under a policy."""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from streamscale.cli.output import Output
from streamscale.control.controller import CONTROLLER_SETTINGS
from streamscale.control.policies import POLICIES, POLICY_SETTINGS
from streamscale.control.watch import WATCH_SETTINGS
from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import RUN_SETTINGS, RunConfig, parse_run
from streamscale.settings import parse_pairs

if TYPE_CHECKING:
    from streamscale.model.cluster import Cluster
    from streamscale.runtime.spark.driver.graph import JobGraph

__all__ = ["ITEMS", "ensure_dir", "register", "run", "run_config"]


_PARAM_HELP = (
    "KEY=VALUE, repeatable. Policy settings: "
    + POLICY_SETTINGS.help()
    + ". Controller settings: "
    + CONTROLLER_SETTINGS.help()
    + ". Watch settings (decisions while a batch runs; one keyed operator on a cluster): "
    + WATCH_SETTINGS.help()
    + "."
)

#: The option that sets each run setting (named in the one-line error).
ITEMS = {
    "policy": "--policy",
    "duration_s": "--duration",
    "max_batches": "--max-batches",
    "seed": "--seed",
    "master": "--master",
    "cluster": "--cluster",
    "state_url": "--state-url",
    "metrics_port": "--metrics-port",
    "spark_ui": "--spark-ui",
    "available_now": "--available-now",
    "executor_cores": "--executor-cores",
    "min_executors": "--min-executors",
    "max_executors": "--max-executors",
}


#: The run settings' declared defaults and help lines (the options show them).
_D = RUN_SETTINGS.defaults()
_H = {s.name: s.help() for s in RUN_SETTINGS.settings}


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run_config(values: dict[str, object], pairs: list[str]) -> RunConfig:
    """The options and ``--param`` pairs of ``streamscale run``, parsed once (before
    anything starts) into the run's frozen configuration."""
    return parse_run(values, parse_pairs(pairs), items=ITEMS)


def ensure_dir(path: Path, option: str) -> None:
    """Create ``path`` (a directory a command writes to) or fail naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StreamscaleError(
            f"cannot create: {exc.strerror or exc}", item=f"{option} {path}"
        ) from None


def run(
    ctx: typer.Context,
    job_file: Path = typer.Argument(
        ..., help="Topology YAML of the job (functions by import path)."
    ),
    policy: str = typer.Option(
        _D["policy"], "--policy", help="Policy: " + ", ".join(POLICIES) + "."
    ),
    master: str = typer.Option(_D["master"], "--master", help=_H["master"]),
    duration: float = typer.Option(_D["duration_s"], "--duration", help=_H["duration_s"]),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Directory for metrics.jsonl, dead letters and file sinks."
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="Checkpoint directory (reuse it to resume; default OUT/checkpoint or a new temporary one).",
    ),
    state_url: str | None = typer.Option(None, "--state-url", help=_H["state_url"]),
    cluster_file: Path | None = typer.Option(None, "--cluster", help=_H["cluster"]),
    param: list[str] = typer.Option([], "--param", help=_PARAM_HELP),
    max_batches: int | None = typer.Option(None, "--max-batches", help=_H["max_batches"]),
    seed: int | None = typer.Option(None, "--seed", help=_H["seed"]),
    executor_cores: int = typer.Option(
        _D["executor_cores"], "--executor-cores", help=_H["executor_cores"]
    ),
    max_executors: int = typer.Option(
        _D["max_executors"], "--max-executors", help=_H["max_executors"]
    ),
    min_executors: int = typer.Option(
        _D["min_executors"], "--min-executors", help=_H["min_executors"]
    ),
    metrics_port: int | None = typer.Option(None, "--metrics-port", help=_H["metrics_port"]),
    spark_ui: bool = typer.Option(_D["spark_ui"], "--spark-ui/--no-spark-ui", help=_H["spark_ui"]),
    available_now: bool = typer.Option(
        _D["available_now"],
        "--available-now",
        help="Process what the source holds, then the batches that advance the watermark "
        "and fire due timers, then stop (Spark's trigger(availableNow=True)).",
    ),
) -> None:
    """Run JOB_FILE on Spark with elastic keyed operators; print a live table and a summary.

    On a cluster master (spark://, k8s://, yarn) the plan's cores become executors,
    requested and released at batch boundaries (Spark's dynamic allocation stays off).
    """
    out: Output = ctx.obj
    # absolute: a cluster's executors (and a local worker forked elsewhere) resolve a
    # relative path against their own working directory
    out_dir = None if out_dir is None else out_dir.absolute()
    checkpoint = None if checkpoint is None else checkpoint.absolute()
    given = {
        "policy": policy, "master": master, "duration_s": duration, "max_batches": max_batches,
        "seed": seed, "cluster": None if cluster_file is None else str(cluster_file),
        "state_url": state_url, "metrics_port": metrics_port, "spark_ui": spark_ui,
        "available_now": available_now, "executor_cores": executor_cores,
        "min_executors": min_executors, "max_executors": max_executors,
    }  # fmt: skip
    cfg = run_config({k: v for k, v in given.items() if v is not None}, param)
    from streamscale.model.io import load_cluster
    from streamscale.runtime.spark.driver.command import load_job

    # what cannot run is named before Spark starts
    graph = load_job(job_file)
    cluster = load_cluster(Path(cfg.cluster)) if cfg.cluster is not None else None
    for path, option in ((out_dir, "--out"), (checkpoint, "--checkpoint")):
        if path is not None:
            ensure_dir(path, option)
    summary = _run_live(out, graph, cfg, cluster=cluster, checkpoint=checkpoint, out_dir=out_dir)
    if out.json:
        out.emit(summary)
        return
    _print_summary(out, graph.topology.name, cfg.policy, summary, out_dir)


def _run_live(
    out: Output, graph: JobGraph, cfg: RunConfig, *, cluster: Cluster | None,
    checkpoint: Path | None, out_dir: Path | None,
) -> dict[str, Any]:  # fmt: skip
    """:func:`~streamscale.runtime.spark.driver.command.run_command`, with a live table of
    the last batches unless the output is JSON; returns its summary."""
    from streamscale.runtime.spark.driver.command import run_command
    from streamscale.runtime.spark.driver.graph_batch import GraphBatch
    from streamscale.runtime.spark.driver.metrics import live_table

    title = f"{graph.topology.name} · {cfg.policy}"
    # the live table shows the last 10 batches: keep no more (a run lasts weeks)
    records: deque[GraphBatch] = deque(maxlen=10)
    live = None
    if not out.json:
        from rich.live import Live

        live = Live(live_table([], title=title), console=out.console)
        live.start()

    def on_batch(rec: GraphBatch) -> None:
        records.append(rec)
        if live is not None:
            live.update(live_table(records, title=title))

    try:
        return run_command(
            graph, cfg, cluster=cluster, checkpoint=checkpoint, out_dir=out_dir,
            on_batch=on_batch,
        )  # fmt: skip
    finally:
        if live is not None:
            live.stop()


def _print_summary(
    out: Output, name: str, policy: str, summary: dict[str, Any], out_dir: Path | None
) -> None:
    """The run's summary table, its rows per operator and sink, and where it wrote."""
    eff = summary["efficiency"]
    out.table(
        f"{name} under {policy}",
        ["batches", "rows", "tuples/s", "efficiency", "p50 ms", "p99 ms", "dead letters"],
        [
            [
                summary["batches"],
                summary["rows"],
                summary["throughput"],
                "-" if math.isnan(eff) else f"{100 * eff:.1f} %",
                summary["p50_ms"],
                summary["p99_ms"],
                summary["dead_letters"],
            ]
        ],
    )
    if len(summary["keyed_rows"]) > 1 or summary["sink_rows"]:
        out.line(
            f"rows per keyed operator: {summary['keyed_rows']} · per sink: {summary['sink_rows']}"
        )
    out.line(
        f"checkpoint: {summary['checkpoint']}"
        + (f" · metrics: {out_dir / 'metrics.jsonl'}" if out_dir else "")
    )
