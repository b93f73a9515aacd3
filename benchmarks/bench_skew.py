"""Skew where it matters: ``elastic`` vs ``static`` at Zipf α on emulated cores of a cluster.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores`` task
slots, executors of ``--executor-cores``), then runs generator → keyed calculator
offered ``--load`` × its capacity (saturation, ``max_rows_per_batch`` bounding each
batch) with the per-tuple cost *waited* (``cost_kind: wall``: the slots behave like
cores on a small machine) under ``static`` and ``elastic``, on the same executors, one
after the other, set up as paper 000 §6 sets them up: ``static`` has one instance per
core (all cores used, shards fixed); ``elastic`` has ``y`` instances (the paper's
elastic executors) of ``z`` = 256 shards (``y`` = one per Spark executor, the paper's
"one or two executors per node"), whose cores the queueing model sizes and whose shards are
balanced over those cores. With ``y`` = cores every instance holds one core
and Elasticutor is static (the paper's Figure 16). Prints one JSON line per policy and α
(``"bench": "skew"``: ``policy``, ``alpha``, ``cores``, ``throughput`` over the batches
that end after a ``--warmup-s`` period, the same for both policies: ``elastic`` starts,
as the paper's elastic executors do, with one core per instance and grows to the
cores the model sizes, adding executors while it does; ``throughput_all`` keeps the
whole run after the first batch) and one ratio line per α with the hot-key ceiling — the hottest key's share
of the tuples bounds any policy at ``1 / (share × cost)`` tuples/s, since one key is
processed by one task — and the best any shard balancer can do over ``static`` on
these keys and shards (:func:`balance_bounds`). Keys follow paper 000's
micro-benchmark: 10K distinct keys.

Run: ``.venv/bin/python benchmarks/bench_skew.py [--quick | --smoke] [--alphas 1.0]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _results import record

from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

_ARGV: list[str] = []  # the arguments of main, recorded with each line


def _emit(**fields: Any) -> None:
    print(json.dumps(record("skew", fields, argv=_ARGV)), flush=True)


def hot_key_share(keys: int, alpha: float) -> float:
    """The most frequent key's share of the tuples under Zipf(α) over ``keys`` keys."""
    w = 1.0 / np.arange(1, keys + 1, dtype=float) ** alpha
    return float(w[0] / w.sum())


def _bins(loads: np.ndarray, cap: float) -> int:
    """Cores (bins of ``cap``) first-fit decreasing needs for one instance's shard loads."""
    bins: list[float] = []
    for x in sorted(loads, reverse=True):
        for i, b in enumerate(bins):
            if b + x <= cap:
                bins[i] += x
                break
        else:
            bins.append(x)
    return max(1, len(bins))


def balance_bounds(
    opts: dict[str, str], cores: int, static_shards: int, elastic: int, shards: int
) -> dict[str, float]:
    """What ``elastic`` can gain over ``static`` on this workload, at best.

    From 200,000 tuples of the same generator: each key's share, its shard (the
    runtime's own hashing); ``static``'s straggler share (one instance per core,
    the one whose shards carry the most) and the smallest largest-task share any
    allocation of the ``cores`` to the ``elastic`` instances with shards packed onto
    each instance's cores reaches (bisection on the task size, first-fit decreasing
    per instance; a shard is never split, so the hottest shard bounds it). Their
    ratio is the most ``elastic`` can beat ``static`` by with these keys and shards.
    """
    from streamscale.runtime.spark.routing.routing import global_shards
    from streamscale.runtime.spark.sources.sources import generate

    df = generate({**opts, "start_time": "0"}, 0, 200_000)
    share = df["key"].value_counts(normalize=True)
    g = global_shards(share.index, cores, static_shards)
    load = np.bincount(g, weights=share.to_numpy(), minlength=cores * static_shards)
    static = float(load.reshape(cores, static_shards).sum(axis=1).max())
    g = global_shards(share.index, elastic, shards)
    per = np.bincount(g, weights=share.to_numpy(), minlength=elastic * shards).reshape(
        elastic, shards
    )
    lo, hi = float(per.max()), 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if sum(_bins(row[row > 0], mid) for row in per) <= cores:
            hi = mid
        else:
            lo = mid
    return {
        "static_straggler_share": static,
        "elastic_best_task_share": hi,
        "best_elastic_vs_static": static / hi,
    }


def steady_throughput(records: Sequence[Any], warmup_s: float) -> float:
    """Tuples per second over the batches that end after ``warmup_s``: their rows over
    the time from the last batch end at or before ``warmup_s`` (the run's start when no
    batch ended that early, as on a slow host) to the last batch end; NaN when no batch
    ended after ``warmup_s``.

    Examples
    --------
    >>> from types import SimpleNamespace as B
    >>> steady_throughput([B(time=10, rows=5), B(time=20, rows=100), B(time=30, rows=300)], 15)
    20.0
    >>> steady_throughput([B(time=20, rows=100), B(time=30, rows=300)], 15)
    13.333333333333334
    """
    before = [r.time for r in records if r.time <= warmup_s]
    after = [r for r in records if r.time > warmup_s]
    if not after:
        return float("nan")
    span = after[-1].time - (before[-1] if before else 0.0)
    return sum(r.rows for r in after) / span if span > 0 else float("nan")


def run_one(master: str, policy: str, alpha: float, args: argparse.Namespace) -> dict[str, Any]:
    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.runtime.spark.keyed.functions import calculator

    executors = args.workers * (args.worker_cores // args.executor_cores)
    cores = executors * args.executor_cores
    # paper 000 §6: static gets one instance per core; Elasticutor y instances of
    # z shards each (one per node by its rule of thumb), whose cores the policy sizes
    instances, shards = (cores, args.static_shards) if policy == "static" else (
        args.elastic_instances or executors, args.shards)  # fmt: skip
    capacity = cores * 1000.0 / args.cost_ms
    opts = {
        "keys": str(args.keys),
        "alpha": str(alpha),
        "omega": "0",
        "cost_ms": str(args.cost_ms),
        "rate": str(args.load * capacity),
        "max_rows_per_batch": str(int(capacity * args.trigger_s * 1.5)),
        "seed": "11",
    }
    job = Job.simple(
        "calc",
        calculator,
        source_options=opts,
        instances=instances,
        shards=shards,
        cost_ms=args.cost_ms,
        trigger_s=args.trigger_s,
        params={"cost_kind": "wall"},
    )
    spark = build_session(
        master,
        app_name=f"streamscale-skew-{policy}",
        conf=executor_conf(args.executor_cores, executors, pin=args.pin, separate_hosts=args.pin),
    )
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-skew-"))
    try:
        res = ExecutorResources(
            spark.sparkContext,
            pin=args.pin,
            cores_per_executor=args.executor_cores,
            max_executors=executors,
            initial_executors=executors,
        )
        res.settle(120.0)
        out = run_job(
            spark,
            job,
            policy=policy,
            duration_s=args.duration,
            checkpoint=scratch / "ckpt",
            params={"latency_target_ms": args.trigger_s * 1000.0},
            resources=res,
            seed=1,
        )
        return {
            "throughput": steady_throughput(out.records, args.warmup_s),
            "throughput_all": out.throughput,
            "warmup_s": args.warmup_s,
            "cores": cores,
            "instances": instances,
            "shards_per_instance": shards,
            "batches": out.batches,
        }
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="90 s per run instead of 150 s.")
    ap.add_argument(
        "--smoke", action="store_true",
        help="One 4-slot worker, 14 s runs, 1,000 keys, 5 ms a tuple: runs at all.",
    )  # fmt: skip
    ap.add_argument(
        "--warmup-s", type=float, default=None,
        help="Unscored start of each run (default: 60 s, 45 s with --quick).",
    )  # fmt: skip
    ap.add_argument("--alphas", default="1.0")
    ap.add_argument("--policies", default="static,elastic")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=8)
    ap.add_argument("--executor-cores", type=int, default=4)
    ap.add_argument("--keys", type=int, default=10_000, help="Distinct keys (paper 000: 10K).")
    ap.add_argument("--shards", type=int, default=256, help="Shards per instance (paper: 256).")
    ap.add_argument(
        "--elastic-instances",
        type=int,
        default=0,
        help="Instances y (default: one per Spark executor, the paper's one per node).",
    )
    ap.add_argument(
        "--static-shards", type=int, default=16, help="Shards per static instance (one per core)."
    )
    ap.add_argument("--cost-ms", type=float, default=20.0)
    ap.add_argument("--load", type=float, default=1.5, help="Offered rate ÷ capacity.")
    ap.add_argument("--trigger-s", type=float, default=2.0)
    ap.add_argument(
        "--pin", action="store_true", help="Pin each unit's task to its node's executor."
    )
    args = ap.parse_args(argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    args.duration = 90.0 if args.quick else 150.0
    if args.smoke:
        args.duration, args.warmup_s, args.trigger_s = 14.0, 5.0, 1.0
        args.workers, args.worker_cores, args.executor_cores = 1, 4, 2
        args.keys, args.shards, args.static_shards, args.cost_ms = 1000, 16, 4, 5.0
    if args.warmup_s is None:  # elastic reaches its 16 tasks and executors in about 60 s
        args.warmup_s = 45.0 if args.quick else 60.0
    alphas = [float(a) for a in args.alphas.split(",") if a.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    d = Path(tempfile.mkdtemp(prefix="streamscale-skew-cluster-"))
    info = cluster_up(args.workers, args.worker_cores, memory="4g", directory=d)
    try:
        for alpha in alphas:
            got: dict[str, dict[str, Any]] = {}
            for policy in policies:
                got[policy] = r = run_one(info.master_url, policy, alpha, args)
                _emit(bench="skew", policy=policy, alpha=alpha, cost_kind="wall",
                      emulated_cores=r["cores"], **r)  # fmt: skip
            share = hot_key_share(args.keys, alpha)
            bound_opts = {"keys": str(args.keys), "alpha": str(alpha), "omega": "0",
                          "cost_ms": str(args.cost_ms), "rate": "1000", "seed": "11"}  # fmt: skip
            line: dict[str, Any] = {
                "bench": "skew",
                "figure": "ratio",
                "alpha": alpha,
                "cost_kind": "wall",
                "hot_key_share": share,
                "hot_key_ceiling_tps": 1000.0 / (share * args.cost_ms),
                "capacity_tps": got[policies[0]]["cores"] * 1000.0 / args.cost_ms,
                "target": "elastic >= 1.5x static at alpha 1.0",
                **balance_bounds(
                    bound_opts,
                    got[policies[0]]["cores"],
                    args.static_shards,
                    args.elastic_instances or got[policies[0]]["cores"] // args.executor_cores,
                    args.shards,
                ),
            }
            if "static" in got and "elastic" in got and got["static"]["throughput"] > 0:
                ratio = got["elastic"]["throughput"] / got["static"]["throughput"]
                line.update(elastic_vs_static=ratio, met=ratio >= 1.5)
            _emit(**line)
    finally:
        cluster_down(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
