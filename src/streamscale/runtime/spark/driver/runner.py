"""``run_job``: run a linear job on Spark with an elastic keyed operator and the control loop.

A :class:`~streamscale.runtime.spark.driver.job.Job` runs as its one-keyed-operator graph
(:meth:`~streamscale.runtime.spark.driver.job.Job.graph`) under the one job driver,
:func:`~streamscale.runtime.spark.driver.dag.run_graph`, which fuses it as it fuses any graph
of its shape (:func:`~streamscale.runtime.spark.driver.job.fused_job`): the stateless
operators after the keyed one and the sinks run inside its reduce tasks
(:func:`~streamscale.runtime.spark.driver.operator.run_batch`). At every batch boundary the
driver feeds the batch to the collector and runs one control step with the wall clock,
so a policy's plan takes effect from the next batch (paper 000, §3.2: the boundary is
the consistency point). State and Spark's offsets live under ``checkpoint``; running
again on the same checkpoint resumes exactly where the last committed batch ended.
Each batch's record is the driver's :class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`,
as for every job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from streamscale.control import Policy
from streamscale.control.policies import initial_plan
from streamscale.model import Cluster, Plan
from streamscale.runtime.run_config import RunParams, parse_params
from streamscale.runtime.spark.driver.drive import (
    drive_query,
    run_seed,
    share_by_default,
)
from streamscale.runtime.spark.driver.graph import local_cluster
from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.history import RunHistory
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.executors.resources import Resources
from streamscale.runtime.spark.executors.session import require_classic
from streamscale.runtime.spark.routing.realizer import default_plan

__all__ = [
    "GraphBatch",
    "RunResult",
    "drive_query",
    "linear_setup",
    "physical_limit",
    "run_job",
    "share_by_default",
    "summarize_run",
]


def run_job(
    spark: Any,
    job: Job,
    *,
    policy: str | Policy,
    duration_s: float,
    checkpoint: Path,
    out: Path | None = None,
    params: Mapping[str, Any] | RunParams | None = None,
    on_batch: Callable[[GraphBatch], None] | None = None,
    max_batches: int | None = None,
    seed: int | None = None,
    cluster: Cluster | None = None,
    resources: Resources | None = None,
    plan: Plan | None = None,
    state_url: str | None = None,
) -> RunResult:
    """Run ``job`` for ``duration_s`` seconds (or ``max_batches`` batches) under ``policy``.

    Parameters
    ----------
    spark
        A SparkSession (see :func:`streamscale.runtime.spark.executors.session.build_session`).
    job
        The job to run.
    policy
        A policy name from :mod:`streamscale.control.policies`, or a policy object.
    duration_s
        Wall seconds from the query's start until it is stopped.
    checkpoint
        Directory for Spark's offsets (``spark/``) and shard state (``state/``).
    out
        When given: ``metrics.jsonl`` (one line per batch) and ``dead_letters/``
        go there (dead letters go under ``checkpoint`` otherwise).
    params
        The policy's, the controller's and the watch's settings: parsed
        :class:`~streamscale.runtime.run_config.RunParams` (from the edge), or a mapping the
        one parse (:func:`~streamscale.runtime.run_config.parse_params`) reads here.
    on_batch
        Called with each batch's :class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`
        (in the driver, at the batch boundary).
    max_batches
        Stop after this many batches.
    seed
        Passed to the policy.
    cluster
        Nodes to plan for. Default:
        :func:`~streamscale.runtime.spark.driver.graph.local_cluster` (``max(2,
        parallelism, instances) × 2`` slots: units are Spark tasks that queue on the
        cores); the physical limit uses Spark's default parallelism as the core count.
    resources
        Executors that follow the plan (:mod:`streamscale.runtime.spark.executors.resources`):
        planning uses its capacity model, and at each batch boundary, after the
        batch's state committed, the plan's cores become executors.
    plan
        The plan of the first batch (default: the policy's initial plan).
    state_url
        Where the keyed state lives (:data:`~streamscale.runtime.spark.state.state_api.STATE_URL`:
        a path, ``file://DIR?fsync=1``, ``s3://bucket/prefix?endpoint=…``); default
        ``checkpoint/state``. On a cluster of several hosts it must be a store every
        executor reaches.

    Returns
    -------
    RunResult
        What :func:`~streamscale.runtime.spark.driver.dag.run_graph` returns, with the
        job's figures: ``cores``, ``physical_limit`` and ``efficiency``.

    Raises
    ------
    StreamscaleError
        The batch failed (an operator function raised: the message names it);
        its state was not committed and running again retries the batch.
    """
    from streamscale.runtime.spark.driver.dag import run_graph

    require_classic(spark)
    cluster, plan, cores, run_params = linear_setup(
        spark, job, policy, params, cluster=cluster, resources=resources, plan=plan
    )
    res = run_graph(
        spark, job.graph(), duration_s=duration_s, checkpoint=checkpoint, out=out,
        max_batches=max_batches, plan=plan, on_batch=on_batch, policy=policy,
        params=run_params, seed=run_seed(seed), cluster=cluster, resources=resources,
        state_url=state_url,
    )  # fmt: skip
    return replace(res, cores=cores, physical_limit=physical_limit(job, cores))


def linear_setup(
    spark: Any,
    job: Job,
    policy: str | Policy,
    params: Mapping[str, Any] | RunParams | None,
    *,
    cluster: Cluster | None = None,
    resources: Resources | None = None,
    plan: Plan | None = None,
) -> tuple[Cluster, Plan, int, RunParams]:
    """What a linear job runs with under the one driver: the cluster planned for, the
    first plan, the cores its physical limit counts and the parsed settings.

    Default cluster: the executors' capacity with ``resources``, else
    :func:`~streamscale.runtime.spark.driver.graph.local_cluster` (the one every job
    plans for) and Spark's parallelism as the cores; default plan: the policy's initial
    plan (a policy object: one unit per instance)."""
    physical = int(spark.sparkContext.defaultParallelism)
    if resources is not None:
        cluster = resources.cluster()
        cores = cluster.total_cores
    elif cluster is None:
        cluster = local_cluster(physical=physical, instances=job.operator.instances)
        cores = physical
    else:
        cores = cluster.total_cores
    run_params = parse_params(policy if isinstance(policy, str) else None, params)
    if plan is None:
        if isinstance(policy, str):
            pol_params = share_by_default(policy, run_params.policy, resources)
            plan = initial_plan(policy, job.topology, cluster, params=pol_params)
        else:
            plan = default_plan(job.topology, job.keyed, cluster)
    return cluster, plan, cores, run_params


def physical_limit(job: Job, cores: int) -> float:
    """Tuples/s ``cores`` sustain at the job's mean per-tuple cost (NaN: no cost known)."""
    cost = job.cost_ms
    if cost and job.source_format == "streamscale_generator":
        from streamscale.runtime.spark.sources.sources import expected_cost_ms

        cost = expected_cost_ms(cost)  # N(μ, 0.5μ) truncated at 0 has a mean above μ
    return cores / (cost / 1000.0) if cost else math.nan


def summarize_run(
    history: RunHistory,
    job: Job,
    cores: int,
    *,
    dead_letters: int,
    plan: Plan | None,
) -> RunResult:
    """Throughput, latency percentiles and efficiency of a run (the first batch is warm-up).

    Shared by the elastic runner and the Spark-native baseline so both report alike.
    """
    return RunResult(
        records=tuple(history.recent),
        batches=history.batches,
        plan=plan,
        dead_letters=dead_letters,
        keyed_rows={job.keyed: history.rows},
        throughput=history.throughput(),
        p50_ms=history.quantile(0.50),
        p99_ms=history.quantile(0.99),
        busy_s=history.busy_s,
        cpu_s=history.cpu_s,
        max_tasks=history.max_tasks,
        rows=history.rows,
        cores=cores,
        physical_limit=physical_limit(job, cores),
    )
