"""What placement buys on Spark: remote shuffle bytes, hits, state moved, per policy.

Starts a loopback Spark standalone cluster of ``--workers`` workers (one executor of
``--executor-cores`` cores each), then runs the same DAG — generator → enrich →
``rank`` (keyed by ``key``) → ``count`` (keyed by ``key``) → sink, two keyed operators
sharing a key (``examples/spark-colocated.yaml``) — under each policy, one after the
other on the same cluster, over the same generated tuples (``--total`` tuples in
batches of at most ``--batch-rows``). ``spark-default`` lets Spark's scheduler place
every task (no preferred locations, the ``static`` plan); every other policy's plan is
enforced (each unit's task pinned to its node's executor).

Figures are Spark's own: placement hits and misses from the status store (where each
reduce task ran against the executor its unit's node stands for), shuffle bytes read
locally and remotely by the keyed operators' reduce tasks (task metrics; executors on
one host fetch each other's blocks through the block transfer service, as on separate
hosts), state bytes read from the store rather than a worker's cache (moved between
executors). Per-tuple cost: none (``cost_ms 0``); throughput is tuples per second of
batch time after the first batch, on 2 physical cores.

One JSON line per policy (``"bench": "placement"``: ``policy``, ``placement_hit``,
``remote_shuffle_bytes``, ``local_shuffle_bytes``, ``state_bytes_moved``, ``throughput``,
plus the keyed→keyed edge's own remote bytes) and one ratio line per policy against
``spark-default``.

Each keyed operator has ``--instances`` instances, by default the cluster's cores shared
among the keyed operators (two of two on four one-core workers): an elastic instance
holds a core of its own, so the policies that size instances refuse more.

Run: ``.venv/bin/python benchmarks/bench_placement.py [--quick | --smoke]
[--policies static,albic] [--instances N]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _results import record

from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "spark-colocated.yaml"


_ARGV: list[str] = []  # the arguments of main, recorded with each line


def _emit(**fields: Any) -> None:
    print(json.dumps(record("placement", fields, argv=_ARGV)), flush=True)


def _graph(args: argparse.Namespace) -> Any:
    from streamscale.model import Operator, Topology
    from streamscale.runtime.spark.driver.graph import JobGraph

    base = JobGraph.from_yaml(_EXAMPLE).topology
    ops = []
    for op in base.operators:
        if op.kind == "source":
            params = {k: v for k, v in op.params.items() if k != "rate"}
            params.update(
                keys=args.keys, total=args.total, max_rows_per_batch=args.batch_rows,
                start_time=0, seed=7, trigger_s=0,
            )  # fmt: skip
            op = Operator(name=op.name, kind="source", params=params)
        elif op.key:
            op = Operator(
                name=op.name, key=op.key, instances=args.instances, shards=args.shards,
                function=op.function, params=dict(op.params),
            )  # fmt: skip
        ops.append(op)
    return JobGraph.build(Topology.build(base.name, ops, list(base.edges)))


def run_one(master: str, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
    from streamscale.runtime.spark.executors.session import build_session

    pin = policy != "spark-default"
    graph = _graph(args)
    spark = build_session(
        master,
        app_name=f"streamscale-placement-{policy}",
        conf=executor_conf(args.executor_cores, args.workers, pin=pin),
    )
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-placement-"))
    batches: list[Any] = []
    try:
        res = ExecutorResources(
            spark.sparkContext,
            cores_per_executor=args.executor_cores,
            max_executors=args.workers,
            min_executors=args.workers,
            initial_executors=args.workers,
            pin=pin,
        )
        res.settle(180.0)
        run_graph(
            spark,
            graph,
            duration_s=args.timeout,
            checkpoint=scratch / "ckpt",
            policy="static" if policy == "spark-default" else policy,
            params={"interval_s": 0, "stabilization_s": 0},
            resources=res,
            seed=1,
            on_batch=batches.append,
            max_batches=args.batches,
        )
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return _summary(policy, graph, batches)


def _summary(policy: str, graph: Any, batches: list[Any]) -> dict[str, Any]:
    scored = batches[1:]  # the first batch starts executors' Python workers
    hit = miss = unpinned = 0
    local = remote = edge_remote = moved = 0
    for b in scored:
        for op, fig in b.extra.get("placement", {}).items():
            hit += fig["placement_hit"]
            miss += fig["placement_miss"]
            unpinned += fig["placement_unpinned"]
            local += fig["local_shuffle_bytes"]
            remote += fig["remote_shuffle_bytes"]
            if op != graph.keyed[0]:
                edge_remote += fig["remote_shuffle_bytes"]
        moved += sum(b.extra.get("state_read_bytes", {}).values())
    rows = sum(b.keyed_rows.get(graph.keyed[0], 0) for b in scored)
    busy = sum(b.duration_s for b in scored)
    pinned = hit + miss
    return {
        "bench": "placement",
        "policy": policy,
        "placement_hit": round(hit / pinned, 4) if pinned else None,
        "tasks_pinned": pinned,
        "tasks_unpinned": unpinned,
        "remote_shuffle_bytes": remote,
        "local_shuffle_bytes": local,
        "keyed_edge_remote_bytes": edge_remote,
        "state_bytes_moved": moved,
        "throughput": round(rows / busy, 1) if busy > 0 else None,
        "batches": len(scored),
        "cost_kind": "none",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Fewer tuples and batches.")
    ap.add_argument("--policies", default="spark-default,static,elastic,albic,td,tl,gma")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--executor-cores", type=int, default=1)
    ap.add_argument("--keys", type=int, default=4000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument(
        "--instances", type=int, default=None,
        help="Instances per keyed operator (default: the cores over the keyed operators).",
    )  # fmt: skip
    ap.add_argument("--timeout", type=float, default=600.0, help="Seconds per policy at most.")
    ap.add_argument(
        "--smoke", action="store_true",
        help="Two workers, spark-default and elastic, two small batches: runs at all.",
    )  # fmt: skip
    args = ap.parse_args(argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    args.batches = 4 if args.quick else 8
    args.batch_rows = 20000 if args.quick else 40000
    if args.smoke:
        args.workers, args.keys, args.timeout = 2, 400, 180.0
        args.policies = "spark-default,elastic"
        args.batches, args.batch_rows = 2, 2000
    args.total = args.batches * args.batch_rows
    from streamscale.control.policies import check_policy
    from streamscale.runtime.spark.driver.graph import JobGraph

    cores = args.workers * args.executor_cores
    keyed = sum(1 for op in JobGraph.from_yaml(_EXAMPLE).topology.operators if op.key)
    # an elastic instance holds a core of its own (paper 000, §4.1): the keyed operators'
    # instances together fit the cluster's cores
    args.instances = args.instances or max(1, cores // keyed)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        if p != "spark-default":
            check_policy(p)
    d = Path(tempfile.mkdtemp(prefix="streamscale-placement-cluster-"))
    info = cluster_up(args.workers, args.executor_cores, memory="2g", directory=d)
    lines: dict[str, dict[str, Any]] = {}
    try:
        for policy in policies:
            lines[policy] = line = run_one(info.master_url, policy, args)
            _emit(**line)
    finally:
        cluster_down(d)
        shutil.rmtree(d, ignore_errors=True)
    base = lines.get("spark-default")
    for policy, line in lines.items():
        if base is None or policy == "spark-default" or not base["remote_shuffle_bytes"]:
            continue
        _emit(
            bench="placement-ratio",
            policy=policy,
            remote_shuffle_cut=round(
                1 - line["remote_shuffle_bytes"] / base["remote_shuffle_bytes"], 4
            ),
            keyed_edge_remote_cut=round(
                1 - line["keyed_edge_remote_bytes"] / base["keyed_edge_remote_bytes"], 4
            )
            if base["keyed_edge_remote_bytes"]
            else None,
            throughput_ratio=round(line["throughput"] / base["throughput"], 3)
            if line["throughput"] and base["throughput"]
            else None,
            target_hit=0.99,
            target_remote_cut=0.5,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
