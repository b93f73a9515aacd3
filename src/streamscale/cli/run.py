"""``streamscale run JOB.yaml --policy P``: run a job on Spark under a policy."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path
from typing import Any

import typer

from streamscale.cli.output import Output
from streamscale.control.controller import ControllerConfig
from streamscale.control.policies import PARAMS, POLICIES
from streamscale.errors import StreamscaleError

__all__ = ["register", "run"]


_PARAM_HELP = (
    "KEY=VALUE, repeatable. Policy: "
    + ", ".join(PARAMS)
    + "; controller: "
    + ", ".join(f.name for f in dataclasses.fields(ControllerConfig))
    + "."
)


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def _params(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise StreamscaleError("expected KEY=VALUE", item=f"--param {p}")
        try:
            out[key] = float(value)
        except ValueError:
            out[key] = value
    return out


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
    cluster_file: Path | None = typer.Option(
        None, "--cluster", help="Cluster file to plan for (default: the Spark cores)."
    ),
    param: list[str] = typer.Option([], "--param", help=_PARAM_HELP),
    max_batches: int | None = typer.Option(
        None, "--max-batches", help="Stop after this many batches."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed passed to the policy."),
) -> None:
    """Run JOB_FILE on Spark with elastic keyed operators; print a live table and a summary."""
    out: Output = ctx.obj
    from streamscale.model.io import load_cluster
    from streamscale.runtime.spark.job import Job
    from streamscale.runtime.spark.metrics import BatchRecord, live_table
    from streamscale.runtime.spark.runner import run_job
    from streamscale.runtime.spark.session import build_session

    if not duration > 0:
        raise StreamscaleError("must be > 0", item="--duration")
    job = Job.from_yaml(job_file)
    cluster = load_cluster(cluster_file) if cluster_file else None
    params = _params(param)
    ckpt = checkpoint or (
        out_dir / "checkpoint" if out_dir else Path(tempfile.mkdtemp(prefix="streamscale-ckpt-"))
    )
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None
    spark = build_session(master, app_name=f"streamscale-{job.topology.name}")
    records: list[BatchRecord] = []
    live = None
    if not out.json:
        from rich.live import Live

        live = Live(live_table([], title=f"{job.topology.name} · {policy}"), console=out.console)
        live.start()

    def on_batch(rec: BatchRecord) -> None:
        records.append(rec)
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
        )
    finally:
        if live is not None:
            live.stop()
        if owned:
            spark.stop()
    summary = {
        "job": job.topology.name,
        "policy": policy,
        "batches": len(res.records),
        "rows": sum(r.rows for r in res.records),
        "throughput": res.throughput,
        "physical_limit": res.physical_limit,
        "efficiency": res.efficiency,
        "p50_ms": res.p50_ms,
        "p99_ms": res.p99_ms,
        "dead_letters": res.dead_letters,
        "busy_s": res.busy_s,
        "cpu_s": res.cpu_s,
        "checkpoint": str(ckpt),
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
