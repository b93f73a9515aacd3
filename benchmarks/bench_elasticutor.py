"""Benchmarks of Elasticutor's planners (paper 000, §4 and §5).

Prints one JSON line per figure, each with a ``"bench"`` key:

* ``scheduler_time`` — median wall time of allocation (§4.1) + CPU-to-instance
  assignment (§4.2, Algorithm 1) for an SSE-like topology (1 transactor + 11
  analytics operators, 4 instances per node, 8 cores per node) on 8/16/32 nodes
  under a stream of changing workloads; ``pipeline_ms`` adds building the
  problems from a snapshot and shard balancing (the whole ``elastic`` step).
* ``migration`` — state migrated (shard state whose task changes node) summed
  over the same workload changes for Elasticutor and naive-EC, their ratio, the
  mean remote cores per plan and the bytes/s exchanged with remote tasks.
* ``shard_balance`` — δ reached and shard moves per rebalance for 256 shards
  over 1–64 tasks, Zipf α ∈ {0.5, 1.0}, after ω key shuffles.

Run: ``.venv/bin/python benchmarks/bench_elasticutor.py [--quick | --smoke] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from streamscale.control.policies import initial_plan
from streamscale.model import (
    Cluster,
    Edge,
    Operator,
    OperatorStats,
    Plan,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.planning.adapters.elasticutor import external_rate, planning_inputs
from streamscale.planning.allocation.queueing import QueueingProblem, allocate
from streamscale.planning.balancing.shard_balance import balance_shards
from streamscale.planning.placement.core_assignment import AssignmentProblem, assign_cores
from streamscale.planning.registry import PlanningContext, compose

__all__ = ["main", "sse_topology", "workload"]

SHARDS = 64
SHARD_BYTES = 32 * 1024
BASE_BUSY = 0.55  # cores per instance at the base load
T_MAX_MS = 1.6


def sse_topology(nodes: int) -> Topology:
    """SSE-like: orders → transactor → 11 analytics → sink; 4 instances per node."""
    analytics = 3 * nodes
    per = [analytics // 11 + (1 if i < analytics % 11 else 0) for i in range(11)]
    lam0 = BASE_BUSY * nodes * 4000.0
    ops = [
        Operator("orders", kind="source", rate=lam0, tuple_bytes=256),
        Operator(
            "transactor", key="stock", cost_ms=0.25, tuple_bytes=512, instances=nodes, shards=SHARDS
        ),
    ]
    edges = [Edge("orders", "transactor", grouping="key")]
    for i, e in enumerate(per):
        name = f"analytics{i}"
        ops.append(
            Operator(
                name, key="stock", cost_ms=1.0, tuple_bytes=64, instances=max(e, 1), shards=SHARDS
            )
        )
        sigma = max(e, 1) * BASE_BUSY * 1000.0 / lam0
        edges += [Edge("transactor", name, grouping="key", selectivity=sigma), Edge(name, "sink")]
    ops.append(Operator("sink", kind="sink"))
    return Topology.build(f"sse{nodes}", ops, edges)


def workload(
    topology: Topology, changes: int, seed: int, *, scale: float = 1.0
) -> Iterator[Snapshot]:
    """Snapshots of a drifting, skewed workload.

    Instances of an operator carry Zipf(0.5) weights that swap pairwise (key
    popularity shifts), shards inside an instance Zipf(0.5) weights that shuffle,
    and the total rate drifts multiplicatively within 0.7–1.4 of ``scale`` × the base.
    """
    rng = np.random.default_rng(seed)
    rates = topology.rates()
    keyed = [op for op in topology.processing if op.keyed]
    ew = {op.name: rng.permutation(1 / np.arange(1, op.instances + 1) ** 0.5) for op in keyed}
    sw = {
        op.name: [
            rng.permutation(1 / np.arange(1, op.shards + 1) ** 0.5) for _ in range(op.instances)
        ]
        for op in keyed
    }
    g = 1.0
    for t in range(changes):
        g = float(np.clip(g * rng.lognormal(0.0, 0.08), 0.7, 1.4))
        operators: dict[str, OperatorStats] = {}
        shards: list[ShardStats] = []
        for op in keyed:
            w = ew[op.name]
            if op.instances > 1 and rng.random() < 0.5:
                a, b = rng.choice(op.instances, 2, replace=False)
                w[a], w[b] = w[b], w[a]
            mu = 1000.0 / op.cost_ms
            lam = rates[op.name] * g * scale
            operators[op.name] = OperatorStats(lam, lam, mu, 0.0)
            share = w / w.sum()
            for e in range(op.instances):
                s = sw[op.name][e]
                if rng.random() < 0.3:
                    idx = rng.choice(op.shards, 4, replace=False)
                    s[idx] = s[rng.permutation(idx)]
                busy = lam * share[e] / mu * s / s.sum()
                for z in range(op.shards):
                    shards.append(
                        ShardStats(op.name, e * op.shards + z, float(busy[z]), 0, SHARD_BYTES)
                    )
        operators["orders"] = OperatorStats(0.0, rates["orders"] * g * scale)
        yield Snapshot.build(time=float(t), operators=operators, shards=shards)


def _problems(ctx: PlanningContext, plan: Plan) -> tuple[QueueingProblem, Any, Any]:
    insts, loads = planning_inputs(ctx)
    names = [info.instance for info in insts]
    q = QueueingProblem(
        tuple(loads[n].arrival for n in names),
        tuple(loads[n].service for n in names),
        external_rate(ctx, loads),
        T_MAX_MS / 1000.0,
        ctx.cluster.total_cores,
    )
    return q, insts, loads


def bench_scheduler_time(nodes: int, changes: int, seed: int) -> dict[str, Any]:
    """Median ms of allocate + assign_cores over a stream of workload changes."""
    from streamscale.planning.elastic_plan import placement_matrix

    topo, cluster = sse_topology(nodes), Cluster.uniform(nodes, cores=8)
    plan = initial_plan("elastic", topo, cluster)
    names = list(cluster.names)
    sched: list[float] = []
    pipeline: list[float] = []
    total_k: list[int] = []
    for snap in workload(topo, changes, seed):
        ctx = PlanningContext(topo, cluster, snap, params={"latency_target_ms": T_MAX_MS})
        q, insts, loads = _problems(ctx, plan)
        x0 = placement_matrix(plan, insts, names)
        t0 = time.perf_counter()
        alloc = allocate(q)
        problem = AssignmentProblem(
            tuple(8 for _ in names),
            x0,
            alloc.cores,
            tuple(float(loads[info.instance].state) for info in insts),
            tuple(names.index(info.home) for info in insts),
            tuple(loads[info.instance].bytes_rate for info in insts),
        )
        assign_cores(problem)
        sched.append((time.perf_counter() - t0) * 1000.0)
        t1 = time.perf_counter()
        plan, _, _ = compose(
            ctx,
            plan,
            steps=[("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")],
        )
        pipeline.append((time.perf_counter() - t1) * 1000.0)
        total_k.append(plan.allocation.total)
    return {
        "bench": "scheduler_time",
        "nodes": nodes,
        "executors": sum(op.instances for op in topo.processing),
        "cores": cluster.total_cores,
        "changes": changes,
        "median_ms": round(statistics.median(sched), 4),
        "p90_ms": round(float(np.percentile(sched, 90)), 4),
        "pipeline_ms": round(statistics.median(pipeline), 3),
        "median_allocated_cores": int(statistics.median(total_k)),
        "paper_ms": {8: 4.1, 16: 5.2, 32: 5.7}.get(nodes),
    }


def _sizes(snap: Snapshot) -> Any:
    sizes = {(s.operator, s.shard): s.state_bytes for s in snap.shards}

    def shard_bytes(inst: str, shard: int) -> int:
        op, _, e = inst.partition("[")
        return sizes.get((op, int(e[:-1]) * SHARDS + shard), 0)

    return shard_bytes


def _remote_bytes_rate(ctx: PlanningContext, plan: Plan) -> float:
    """Bytes/s an instance's main process exchanges with tasks on other nodes.

    Each instance's input + output bytes/s, weighted by the load share of its
    shards served by tasks away from its home node (paper 000, §5 remote transfer).
    """
    insts, loads = planning_inputs(ctx)
    total = 0.0
    for info in insts:
        ld = loads[info.instance]
        if ld.load <= 0:
            continue
        table = plan.routing.tables[info.instance]
        away = sum(
            w
            for w, u in zip(ld.shard_load, table, strict=True)
            if plan.placement.nodes[u] != info.home
        )
        total += ld.bytes_rate * away / ld.load
    return total


def bench_migration(nodes: int, changes: int, seed: int, *, scale: float = 1.0) -> dict[str, Any]:
    """State migrated over the same changes by Elasticutor and naive-EC (paper 000, §5).

    ``scale`` multiplies the base load: at 1.0 about half the cores are allocated,
    at 1.5 most of them, so Algorithm 1 must also take cores from other instances.
    """
    topo, cluster = sse_topology(nodes), Cluster.uniform(nodes, cores=8)
    plans = {p: initial_plan("elastic", topo, cluster) for p in ("elasticutor", "naive-ec")}
    moved = dict.fromkeys(plans, 0)
    remote: dict[str, list[float]] = {p: [] for p in plans}
    transfer: dict[str, list[float]] = {p: [] for p in plans}
    model = dict.fromkeys(plans, 0.0)
    for t, snap in enumerate(workload(topo, changes, seed, scale=scale)):
        shard_bytes = _sizes(snap)

        for placer in plans:
            ctx = PlanningContext(
                topo, cluster, snap, params={"latency_target_ms": T_MAX_MS}, seed=seed + t
            )
            new, figs, _ = compose(
                ctx,
                plans[placer],
                steps=[("allocator", "queueing"), ("placer", placer), ("balancer", "shard")],
            )
            moved[placer] += plans[placer].diff(new, shard_bytes=shard_bytes).migration_bytes
            remote[placer].append(figs[f"placer:{placer}"]["remote_cores"])
            transfer[placer].append(_remote_bytes_rate(ctx, new))
            model[placer] += figs[f"placer:{placer}"]["migration_cost_bytes"]
            plans[placer] = new
    mb = 1024.0 * 1024.0
    e, n = moved["elasticutor"] / mb, moved["naive-ec"] / mb
    return {
        "bench": "migration",
        "nodes": nodes,
        "changes": changes,
        "load_scale": scale,
        "elastic_mb": round(e, 3),
        "naive_mb": round(n, 3),
        "ratio": round(n / e, 2) if e > 0 else None,
        "model_elastic_mb": round(model["elasticutor"] / mb, 3),
        "model_naive_mb": round(model["naive-ec"] / mb, 3),
        "remote_cores_elastic": round(statistics.mean(remote["elasticutor"]), 2),
        "remote_cores_naive": round(statistics.mean(remote["naive-ec"]), 2),
        "remote_mbps_elastic": round(statistics.mean(transfer["elasticutor"]) / mb, 2),
        "remote_mbps_naive": round(statistics.mean(transfer["naive-ec"]) / mb, 2),
        "paper_ratio": 5.8,
    }


def bench_shard_balance(alpha: float, tasks: int, shuffles: int, seed: int) -> dict[str, Any]:
    """δ and moves per rebalance: 256 shards, 10 K Zipf(α) keys, ω key shuffles."""
    rng = np.random.default_rng(seed)
    keys, z = 10_000, 256
    freq = 1 / np.arange(1, keys + 1) ** alpha
    shard_of = rng.integers(0, z, keys)
    table: list[int | None] = [None] * z
    deltas, moves, before = [], [], []
    for step in range(shuffles + 1):
        if step:
            freq = rng.permutation(freq)  # one key-frequency shuffle (ω)
        loads = np.bincount(shard_of, weights=freq, minlength=z)
        res = balance_shards(loads, table, tasks)
        table = list(res.tasks)
        if step:
            before.append(res.delta_before)
            deltas.append(res.delta_after)
            moves.append(len(res.moves))
    return {
        "bench": "shard_balance",
        "alpha": alpha,
        "tasks": tasks,
        "shards": z,
        "rebalances": shuffles,
        "delta_before": round(statistics.median(before), 3),
        "delta": round(statistics.median(deltas), 3),
        "moves": statistics.median(moves),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer workload changes")
    ap.add_argument("--smoke", action="store_true", help="3 workload changes, 8 nodes: runs at all")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    changes = 3 if args.smoke else 20 if args.quick else 100
    for nodes in (8,) if args.smoke else (8, 16, 32):
        print(json.dumps(bench_scheduler_time(nodes, changes, args.seed)), flush=True)
    for scale in (1.0, 1.5):
        print(json.dumps(bench_migration(32, changes, args.seed, scale=scale)), flush=True)
    for alpha in (0.5, 1.0):
        for tasks in (1, 8) if args.smoke else (1, 2, 4, 8, 16, 32, 64):
            runs = 2 if args.smoke else 5 if args.quick else 20
            line = bench_shard_balance(alpha, tasks, runs, args.seed)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
