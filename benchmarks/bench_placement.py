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

Fair order: ``--repeats N`` (1 to 20, default 1) runs every configuration (a policy) N
times, the order rotated by one at each repeat (:func:`run_order`), so none always runs
first or last; every policy line carries ``repeat`` (0-based) and ``position`` (its
place in that repeat's order), and each repeat ends with its ratio lines against that
repeat's ``spark-default`` line (``repeat`` too). With two configurations or more, the
run's first configuration runs once more at the very end: its line carries
``"order_check": true`` (counted in no summary) and an ``{"figure": "order_check"}``
line gives its ``throughput`` and ``placement_hit`` beside the first run's (``first``,
``again``) and ``again_over_first``. Last, one ``{"figure": "summary"}`` line per
policy: ``repeats`` and the median, min and max over the repeats of ``throughput``,
``placement_hit`` and ``remote_shuffle_bytes``.

Each keyed operator has ``--instances`` instances, by default the cluster's cores shared
among the keyed operators (two of two on four one-core workers): an elastic instance
holds a core of its own, so the policies that size instances refuse more.

Run: ``.venv/bin/python benchmarks/bench_placement.py [--quick | --smoke]
[--policies static,albic] [--instances N] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _fair import bad_repeats, number, order_check, run_order, spread
from _results import record

from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "spark-colocated.yaml"


_ARGV: list[str] = []  # the arguments of main, recorded with each line
#: the figures of a policy line that the summary gives
SUMMARIZED = ("throughput", "placement_hit", "remote_shuffle_bytes")
#: the figures of a policy line that the order check gives
ORDER_CHECKED = ("throughput", "placement_hit")


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


def order_check_line(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """The order check (:func:`_fair.order_check`) of :data:`ORDER_CHECKED`."""
    return order_check(first, again, ORDER_CHECKED)


def summary_lines(
    runs: list[dict[str, dict[str, Any]]], policies: list[str]
) -> list[dict[str, Any]]:
    """One line per policy: its repeats and the median, min and max over them of
    :data:`SUMMARIZED` (finite values only; ``runs``: each repeat's line per policy)."""
    out = []
    for policy in policies:
        ran = [r[policy] for r in runs if policy in r]
        per = {k: [f[k] for f in ran if number(f.get(k))] for k in SUMMARIZED}
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append({"figure": "summary", "policy": policy, "repeats": len(ran), **stats})
    return out


def ratio_line(policy: str, line: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    """``policy``'s ratio line against ``spark-default``'s line ``base`` of the same
    repeat; None when ``base`` read no remote shuffle bytes."""
    if not base["remote_shuffle_bytes"]:
        return None
    edge = base["keyed_edge_remote_bytes"]
    return {
        "bench": "placement-ratio",
        "policy": policy,
        "remote_shuffle_cut": round(
            1 - line["remote_shuffle_bytes"] / base["remote_shuffle_bytes"], 4
        ),
        "keyed_edge_remote_cut": round(1 - line["keyed_edge_remote_bytes"] / edge, 4)
        if edge
        else None,
        "throughput_ratio": round(line["throughput"] / base["throughput"], 3)
        if line["throughput"] and base["throughput"]
        else None,
        "target_hit": 0.99,
        "target_remote_cut": 0.5,
    }


def _args(argv: list[str]) -> argparse.Namespace:
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
    ap.add_argument(
        "--repeats", type=int, default=1,
        help="Runs of every policy, the order rotated at each (1 to 20).",
    )  # fmt: skip
    args = ap.parse_args(argv)
    args.batches = 4 if args.quick else 8
    args.batch_rows = 20000 if args.quick else 40000
    if args.smoke:
        args.workers, args.keys, args.timeout = 2, 400, 180.0
        args.policies = "spark-default,elastic"
        args.batches, args.batch_rows = 2, 2000
    args.total = args.batches * args.batch_rows
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    if bad_repeats("bench_placement", args.repeats):
        return 2
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
    try:
        run_all(info.master_url, policies, args)
    finally:
        cluster_down(d)
        shutil.rmtree(d, ignore_errors=True)
    return 0


def run_all(master: str, policies: list[str], args: argparse.Namespace) -> None:
    """Every repeat in its order (:func:`run_order`) with its ratio lines, the order
    check, the summary lines."""
    orders = run_order(policies, args.repeats)
    runs: list[dict[str, dict[str, Any]]] = []
    for k, order in enumerate(orders[: args.repeats]):
        got: dict[str, dict[str, Any]] = {}
        for i, policy in enumerate(order):
            got[policy] = line = run_one(master, policy, args)
            _emit(**line, repeat=k, position=i)
        runs.append(got)
        _emit_ratios(got, policies, k)
    if len(orders) > args.repeats:
        policy = orders[-1][0]
        line = run_one(master, policy, args)
        _emit(**line, repeat=args.repeats, position=0, order_check=True)
        check = order_check_line(runs[0][policy], line)
        _emit(bench="placement", **check, policy=policy, cost_kind="none")
    for summary in summary_lines(runs, policies):
        _emit(bench="placement", **summary, cost_kind="none")


def _emit_ratios(got: dict[str, dict[str, Any]], policies: list[str], repeat: int) -> None:
    """One repeat's ratio lines, each policy against that repeat's ``spark-default``."""
    base = got.get("spark-default")
    if base is None:
        return
    for policy in policies:
        line = None if policy == "spark-default" else ratio_line(policy, got[policy], base)
        if line is not None:
            _emit(**line, repeat=repeat)


if __name__ == "__main__":
    raise SystemExit(main())
