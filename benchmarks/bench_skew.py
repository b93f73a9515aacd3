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

Fair order: ``--repeats N`` (1 to 20, default 1; ``--smoke`` runs 1) runs every
configuration (a policy at an α) N times, the order rotated by one at each repeat
(:func:`run_order`), so none always runs first or last; every policy line carries
``repeat`` (0-based) and ``position`` (its place in that repeat's order), and each
repeat ends with its ratio line per α (``repeat`` too). With two configurations or
more, the run's first configuration runs once more at the very end: its line carries
``"order_check": true`` (counted in no summary) and an ``{"figure": "order_check"}``
line gives its ``throughput`` beside the first run's (``first``, ``again``) and
``again_over_first``. Last, one ``{"figure": "summary"}`` line per policy and α:
``repeats`` and the median, min and max over the repeats of ``throughput``, and on
``elastic``'s the same of ``elastic_vs_static``.

Run: ``.venv/bin/python benchmarks/bench_skew.py [--quick | --smoke] [--alphas 1.0]
[--repeats 3]``.
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
from _fair import bad_repeats, number, order_check, run_order, spread
from _results import record

from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

_ARGV: list[str] = []  # the arguments of main, recorded with each line
#: the figure of a policy line that the summary and the order check give
SUMMARIZED = ("throughput",)
#: the figures of a ratio line that ``elastic``'s summary line gives
SUMMARIZED_RATIOS = ("elastic_vs_static",)

#: a configuration: (α, policy)
Config = tuple[float, str]


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


def order_check_line(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """The order check (:func:`_fair.order_check`) of :data:`SUMMARIZED`."""
    return order_check(first, again, SUMMARIZED)


def summary_lines(
    runs: list[dict[Config, dict[str, Any]]], ratio_runs: list[dict[float, dict[str, Any]]],
    configs: list[Config],
) -> list[dict[str, Any]]:  # fmt: skip
    """One line per configuration: its repeats and the median, min and max over them of
    :data:`SUMMARIZED` (finite values only); ``elastic``'s also of
    :data:`SUMMARIZED_RATIOS` from its α's ratio lines (``runs``: each repeat's results
    per configuration; ``ratio_runs``: each repeat's ratio line per α)."""
    out = []
    for alpha, policy in configs:
        ran = [r[(alpha, policy)] for r in runs if (alpha, policy) in r]
        per = {k: [f[k] for f in ran if number(f.get(k))] for k in SUMMARIZED}
        if policy == "elastic":
            lines = [r[alpha] for r in ratio_runs if alpha in r]
            per.update({k: [x[k] for x in lines if number(x.get(k))] for k in SUMMARIZED_RATIOS})
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append({"figure": "summary", "policy": policy, "alpha": alpha,
                    "repeats": len(ran), **stats})  # fmt: skip
    return out


def _args(argv: list[str]) -> argparse.Namespace:
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
    ap.add_argument(
        "--repeats", type=int, default=1,
        help="Runs of every configuration, the order rotated at each (1 to 20).",
    )  # fmt: skip
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
    args.duration = 90.0 if args.quick else 150.0
    if args.smoke:
        args.duration, args.warmup_s, args.trigger_s = 14.0, 5.0, 1.0
        args.workers, args.worker_cores, args.executor_cores = 1, 4, 2
        args.keys, args.shards, args.static_shards, args.cost_ms = 1000, 16, 4, 5.0
    if args.warmup_s is None:  # elastic reaches its 16 tasks and executors in about 60 s
        args.warmup_s = 45.0 if args.quick else 60.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    if bad_repeats("bench_skew", args.repeats):
        return 2
    alphas = [float(a) for a in args.alphas.split(",") if a.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    configs = [(alpha, policy) for alpha in alphas for policy in policies]
    d = Path(tempfile.mkdtemp(prefix="streamscale-skew-cluster-"))
    info = cluster_up(args.workers, args.worker_cores, memory="4g", directory=d)
    try:
        run_all(info.master_url, configs, policies, args)
    finally:
        cluster_down(d)
    return 0


def run_all(master: str, configs: list[Config], policies: list[str],
            args: argparse.Namespace) -> None:  # fmt: skip
    """Every repeat in its order (:func:`run_order`) with its ratio lines, the order
    check, the summary lines."""
    orders = run_order(configs, args.repeats)
    runs: list[dict[Config, dict[str, Any]]] = []
    ratio_runs: list[dict[float, dict[str, Any]]] = []
    bounds: dict[float, dict[str, float]] = {}
    for k, order in enumerate(orders[: args.repeats]):
        got: dict[Config, dict[str, Any]] = {}
        for i, (alpha, policy) in enumerate(order):
            got[(alpha, policy)] = r = run_one(master, policy, alpha, args)
            _emit(bench="skew", policy=policy, alpha=alpha, cost_kind="wall",
                  emulated_cores=r["cores"], **r, repeat=k, position=i)  # fmt: skip
        runs.append(got)
        ratio_runs.append({})
        for alpha in dict.fromkeys(a for a, _ in configs):
            by = {p: got[(alpha, p)] for p in policies}
            ratio_runs[-1][alpha] = line = ratio_line(alpha, by, policies, args, bounds)
            _emit(**line, repeat=k)
    if len(orders) > args.repeats:
        alpha, policy = orders[-1][0]
        r = run_one(master, policy, alpha, args)
        _emit(bench="skew", policy=policy, alpha=alpha, cost_kind="wall",
              emulated_cores=r["cores"], **r, repeat=args.repeats, position=0,
              order_check=True)  # fmt: skip
        check = order_check_line(runs[0][(alpha, policy)], r)
        _emit(bench="skew", **check, policy=policy, alpha=alpha, cost_kind="wall")
    for line in summary_lines(runs, ratio_runs, configs):
        _emit(bench="skew", **line, cost_kind="wall")


def ratio_line(alpha: float, got: dict[str, dict[str, Any]], policies: list[str],
               args: argparse.Namespace,
               bounds: dict[float, dict[str, float]]) -> dict[str, Any]:  # fmt: skip
    """The ratio line of one α from one repeat's results per policy (``bounds``: each
    α's :func:`balance_bounds`, computed once)."""
    share = hot_key_share(args.keys, alpha)
    cores = got[policies[0]]["cores"]
    if alpha not in bounds:
        bound_opts = {"keys": str(args.keys), "alpha": str(alpha), "omega": "0",
                      "cost_ms": str(args.cost_ms), "rate": "1000", "seed": "11"}  # fmt: skip
        bounds[alpha] = balance_bounds(
            bound_opts,
            cores,
            args.static_shards,
            args.elastic_instances or cores // args.executor_cores,
            args.shards,
        )
    line: dict[str, Any] = {
        "bench": "skew",
        "figure": "ratio",
        "alpha": alpha,
        "cost_kind": "wall",
        "hot_key_share": share,
        "hot_key_ceiling_tps": 1000.0 / (share * args.cost_ms),
        "capacity_tps": cores * 1000.0 / args.cost_ms,
        "target": "elastic >= 1.5x static at alpha 1.0",
        **bounds[alpha],
    }
    if "static" in got and "elastic" in got and got["static"]["throughput"] > 0:
        ratio = got["elastic"]["throughput"] / got["static"]["throughput"]
        line.update(elastic_vs_static=ratio, met=ratio >= 1.5)
    return line


if __name__ == "__main__":
    raise SystemExit(main())
