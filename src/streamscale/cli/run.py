"""``streamscale run JOB.yaml --policy P``: run a job on Spark under a policy."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import typer

from streamscale.cli.output import Output
from streamscale.control.controller import CONTROLLER_SETTINGS
from streamscale.control.policies import POLICIES, POLICY_SETTINGS, check_params, check_policy
from streamscale.control.watch import WATCH_SETTINGS
from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state import check_state_url
from streamscale.runtime.spark.state_api import STATE_URL
from streamscale.settings import parse_pairs, split_params

__all__ = ["check_run_options", "ensure_dir", "register", "run"]


_PARAM_HELP = (
    "KEY=VALUE, repeatable. Policy settings: "
    + POLICY_SETTINGS.help()
    + ". Controller settings: "
    + CONTROLLER_SETTINGS.help()
    + ". Watch settings (decisions while a batch runs; one keyed operator on a cluster): "
    + WATCH_SETTINGS.help()
    + "."
)

_MASTER = re.compile(r"^(local(\[(\*|[1-9]\d*)(,\d+)?\])?|(spark|k8s|mesos)://\S+|yarn)$")


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def check_run_options(policy: str, pairs: list[str], master: str) -> dict[str, Any]:
    """Policy, ``--param`` values and master checked before anything starts; typed params."""
    check_policy(policy)
    raw = parse_pairs(pairs)
    pol, ctl, watch = split_params(raw, POLICY_SETTINGS, CONTROLLER_SETTINGS, WATCH_SETTINGS)
    check_params(pol)
    if not _MASTER.match(master):
        raise StreamscaleError(
            "expected local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL",
            item=f"--master {master}",
        )
    return {**pol, **ctl, **watch}


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
    policy: str = typer.Option("elastic", "--policy", help="Policy: " + ", ".join(POLICIES) + "."),
    master: str = typer.Option(
        "local[*]", "--master", help="Spark master URL (local[N], spark://host:port)."
    ),
    duration: float = typer.Option(30.0, "--duration", help="Seconds to run."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Directory for metrics.jsonl, dead letters and file sinks."
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="Checkpoint directory (reuse it to resume; default OUT/checkpoint or a new temporary one).",
    ),
    state_url: str | None = typer.Option(None, "--state-url", help=STATE_URL.help()),
    cluster_file: Path | None = typer.Option(
        None, "--cluster", help="Cluster file to plan for (default: the Spark cores)."
    ),
    param: list[str] = typer.Option([], "--param", help=_PARAM_HELP),
    max_batches: int | None = typer.Option(
        None, "--max-batches", help="Stop after this many batches."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed passed to the policy."),
    executor_cores: int = typer.Option(
        1, "--executor-cores", help="Cores per executor (cluster masters)."
    ),
    max_executors: int = typer.Option(
        8, "--max-executors", help="Most executors the job may hold (cluster masters)."
    ),
    min_executors: int = typer.Option(
        1, "--min-executors", help="Fewest executors the job keeps (cluster masters)."
    ),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", help="Serve Prometheus /metrics on 127.0.0.1:PORT."
    ),
    spark_ui: bool = typer.Option(True, "--spark-ui/--no-spark-ui", help="Spark's web UI."),
    available_now: bool = typer.Option(
        False,
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
    from streamscale.model.io import load_cluster
    from streamscale.runtime.spark.job import Job
    from streamscale.runtime.spark.metrics import BatchRecord, live_table
    from streamscale.runtime.spark.resources import (
        ExecutorResources,
        executor_conf,
        is_cluster_master,
    )
    from streamscale.runtime.spark.runner import run_job
    from streamscale.runtime.spark.session import build_session

    if not (duration > 0 and math.isfinite(duration)):
        raise StreamscaleError(f"must be > 0, got {duration}", item="--duration")
    if max_batches is not None and max_batches < 1:
        raise StreamscaleError(f"must be >= 1, got {max_batches}", item="--max-batches")
    if metrics_port is not None and not 1 <= metrics_port <= 65535:
        raise StreamscaleError(f"must be 1..65535, got {metrics_port}", item="--metrics-port")
    params = check_run_options(policy, param, master)
    if state_url is not None:
        check_state_url(state_url)
    if not 1 <= min_executors <= max_executors <= 1024 or not 1 <= executor_cores <= 256:
        raise StreamscaleError(
            "need 1 <= --min-executors <= --max-executors <= 1024 and 1 <= --executor-cores <= 256",
            item="executors",
        )
    from streamscale.model.io import load_topology
    from streamscale.runtime.spark.dag import needs_graph, run_graph_command

    # a DAG, or a bounded run: every operator in one batch
    if available_now or needs_graph(load_topology(job_file)):
        from streamscale.runtime.spark.graph import JobGraph

        JobGraph.from_yaml(job_file)  # names what cannot run before Spark starts
        for path, option in ((out_dir, "--out"), (checkpoint, "--checkpoint")):
            if path is not None:
                ensure_dir(path, option)
        summary = run_graph_command(
            job_file,
            master=master,
            duration_s=duration,
            max_batches=max_batches,
            checkpoint=checkpoint,
            out_dir=out_dir,
            policy=policy,
            params=params,
            seed=seed,
            executors=(executor_cores, min_executors, max_executors)
            if is_cluster_master(master) and cluster_file is None
            else None,
            state_url=state_url,
            available_now=available_now,
        )
        if out.json:
            out.emit(summary)
        else:
            out.line(" · ".join(f"{k}: {v}" for k, v in summary.items()))
        return
    job = Job.from_yaml(job_file)
    cluster = load_cluster(cluster_file) if cluster_file else None
    for path, option in ((out_dir, "--out"), (checkpoint, "--checkpoint")):
        if path is not None:
            ensure_dir(path, option)
    ckpt = checkpoint or (
        out_dir / "checkpoint" if out_dir else Path(tempfile.mkdtemp(prefix="streamscale-ckpt-"))
    )
    from pyspark.sql import SparkSession

    exporter = None
    if metrics_port is not None:
        from streamscale.runtime.spark.exporter import MetricsExporter

        exporter = MetricsExporter(metrics_port, job=job.topology.name)

    owned = SparkSession.getActiveSession() is None
    elastic = is_cluster_master(master) and cluster is None
    conf = executor_conf(executor_cores, max_executors) if elastic else None
    spark = build_session(
        master, app_name=f"streamscale-{job.topology.name}", conf=conf, ui=spark_ui
    )
    resources = None
    if elastic:
        resources = ExecutorResources(
            spark.sparkContext,
            cores_per_executor=executor_cores,
            max_executors=max_executors,
            min_executors=min_executors,
        )
        resources.wait_for(min_executors, 120.0)
    records: list[BatchRecord] = []
    live = None
    if not out.json:
        from rich.live import Live

        live = Live(live_table([], title=f"{job.topology.name} · {policy}"), console=out.console)
        live.start()

    def on_batch(rec: BatchRecord) -> None:
        records.append(rec)
        if exporter is not None:
            exporter.observe(rec)
        if live is not None:
            live.update(live_table(records, title=f"{job.topology.name} · {policy}"))

    try:
        res = run_job(
            spark,
            job,
            policy=policy,
            duration_s=duration,
            checkpoint=ckpt,
            out=out_dir,
            params=params,
            on_batch=on_batch,
            max_batches=max_batches,
            seed=seed,
            cluster=cluster,
            resources=resources,
            state_url=state_url,
        )
    finally:
        if exporter is not None:
            exporter.close()
        if live is not None:
            live.stop()
        if owned:
            spark.stop()
    summary = {
        "job": job.topology.name,
        "policy": policy,
        "batches": res.batches,
        "rows": res.rows,
        "throughput": res.throughput,
        "physical_limit": res.physical_limit,
        "efficiency": res.efficiency,
        "p50_ms": res.p50_ms,
        "p99_ms": res.p99_ms,
        "dead_letters": res.dead_letters,
        "busy_s": res.busy_s,
        "cpu_s": res.cpu_s,
        "checkpoint": str(ckpt),
        "state_url": state_url or str(ckpt / "state"),
        "out": str(out_dir) if out_dir else None,
    }
    if out.json:
        out.emit(summary)
        return
    out.table(
        f"{job.topology.name} under {policy}",
        ["batches", "rows", "tuples/s", "efficiency", "p50 ms", "p99 ms", "dead letters"],
        [
            [
                summary["batches"],
                summary["rows"],
                res.throughput,
                "-" if math.isnan(res.efficiency) else f"{100 * res.efficiency:.1f} %",
                res.p50_ms,
                res.p99_ms,
                res.dead_letters,
            ]
        ],
    )
    out.line(
        f"checkpoint: {ckpt}" + (f" · metrics: {out_dir / 'metrics.jsonl'}" if out_dir else "")
    )
