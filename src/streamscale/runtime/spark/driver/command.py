"""``streamscale run JOB.yaml``'s body: any job file, run by the one driver.

One path for every shape: the job file is read (and refused, naming the item, before
Spark starts), a session is built for ``--master`` (on a cluster master without a
cluster file the plan's cores become executors), Prometheus ``/metrics`` is served with
``--metrics-port``, and :func:`~streamscale.runtime.spark.driver.dag.run_graph` runs the
graph. A job of the linear shape (one keyed operator in a chain,
:func:`~streamscale.runtime.spark.driver.job.fused_job`) runs fused, as it would if built in
Python, and its summary adds the physical limit and the efficiency
(:func:`~streamscale.runtime.spark.driver.runner.linear_setup`).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from streamscale.model import Cluster
from streamscale.runtime.run_config import RunConfig, parse_params
from streamscale.runtime.spark.driver.dag import run_graph
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.job import fused_job
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.driver.runner import linear_setup, physical_limit

__all__ = ["load_job", "run_command"]


def load_job(job_file: Path) -> JobGraph:
    """The job file as a graph (its run chooses the data path from its shape); an error
    names what cannot run (before anything starts)."""
    return JobGraph.from_yaml(job_file)


def run_command(
    graph: JobGraph,
    config: RunConfig,
    *,
    cluster: Cluster | None = None,
    checkpoint: Path | None,
    out_dir: Path | None,
    on_batch: Callable[[GraphBatch], None] | None = None,
) -> dict[str, Any]:
    """Run the job (:func:`load_job`'s ``graph``) as ``config`` says; the run's summary.

    ``cluster``: the nodes of ``config.cluster``, read by the caller (None: the executors'
    capacity on a cluster master, else the local cores). ``checkpoint`` defaults to
    ``out_dir/checkpoint`` (a new temporary directory without ``out_dir``); with
    ``out_dir`` each batch's line goes to ``out_dir/metrics.jsonl``.
    ``on_batch`` sees every committed batch (after the exporter)."""
    from pyspark.sql import SparkSession

    from streamscale.runtime.spark.executors.resources import (
        ExecutorResources,
        executor_conf,
        is_cluster_master,
    )
    from streamscale.runtime.spark.executors.session import build_session

    ckpt = checkpoint or (
        out_dir / "checkpoint" if out_dir else Path(tempfile.mkdtemp(prefix="streamscale-ckpt-"))
    )
    name = graph.topology.name
    elastic = is_cluster_master(config.master) and cluster is None
    conf = executor_conf(config.executor_cores, config.max_executors) if elastic else None
    exporter = None
    if config.metrics_port is not None:
        from streamscale.runtime.spark.driver.exporter import MetricsExporter

        exporter = MetricsExporter(config.metrics_port, job=name)
    owned = SparkSession.getActiveSession() is None
    spark = build_session(
        config.master, app_name=f"streamscale-{name}", conf=conf, ui=config.spark_ui
    )
    resources = None
    if elastic:
        resources = ExecutorResources(
            spark.sparkContext,
            cores_per_executor=config.executor_cores,
            min_executors=config.min_executors,
            max_executors=config.max_executors,
        )
        resources.wait_for(config.min_executors, 120.0)

    def each(b: GraphBatch) -> None:
        if exporter is not None:
            exporter.observe(b)
        if on_batch is not None:
            on_batch(b)

    t0 = time.monotonic()
    limit = math.nan
    try:
        params = parse_params(config.policy, config.params)
        plan = None
        linear = fused_job(graph)
        if linear is not None:
            cluster, plan, cores, params = linear_setup(
                spark, linear, config.policy, params, cluster=cluster, resources=resources
            )
            limit = physical_limit(linear, cores)
        res = run_graph(
            spark, graph, duration_s=config.duration_s,
            checkpoint=ckpt, out=out_dir, max_batches=config.max_batches, plan=plan,
            on_batch=each, policy=config.policy, params=params, seed=config.seed,
            cluster=cluster, resources=resources, state_url=config.state_url,
            available_now=config.available_now,
        )  # fmt: skip
    finally:
        if exporter is not None:
            exporter.close()
        if owned:
            spark.stop()
    return _summary(
        replace(res, physical_limit=limit), graph, config,
        wall_s=time.monotonic() - t0, checkpoint=ckpt, out_dir=out_dir,
        metrics_url=None if exporter is None else exporter.url,
    )  # fmt: skip


def _summary(
    res: RunResult,
    graph: JobGraph,
    config: RunConfig,
    *,
    wall_s: float,
    checkpoint: Path,
    out_dir: Path | None,
    metrics_url: str | None,
) -> dict[str, Any]:
    """The run's summary: rows in and out, the last plan's cores, throughput against the
    physical limit (a linear job's; else NaN), latency, time and where it wrote."""
    last = res.records[-1].cores if res.records else {}
    return {
        "job": graph.topology.name,
        "policy": config.policy,
        "batches": res.batches,
        "rows": res.keyed_rows.get(graph.keyed[0], 0),
        "keyed_rows": {k: res.keyed_rows.get(k, 0) for k in graph.keyed},
        "sink_rows": {s: res.sink_rows.get(s, 0) for s in graph.sinks},
        "cores_last": dict(last),
        "throughput": res.throughput,
        "physical_limit": res.physical_limit,
        "efficiency": res.efficiency,
        "p50_ms": res.p50_ms,
        "p99_ms": res.p99_ms,
        "dead_letters": res.dead_letters,
        "busy_s": res.busy_s,
        "cpu_s": res.cpu_s,
        "wall_s": wall_s,
        "checkpoint": str(checkpoint),
        "state_url": config.state_url or str(checkpoint / "state"),
        "out": str(out_dir) if out_dir else None,
        **({"metrics_url": metrics_url} if metrics_url is not None else {}),
    }
