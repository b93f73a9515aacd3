"""One ``elastic`` decision at internet scale (paper 000, §3.1, §4.1, §4.2).

Times everything the ``elastic`` policy computes for one decision — the instances'
demand from the snapshot, the queueing allocation (§4.1), Algorithm 1's core
assignment (§4.2), intra-instance shard balancing and routing (§3.1) — and the plan
diff the controller derives from it, through the controller itself
(``Controller.handle([Observed(snapshot, plan, now)])``, as the control loop calls it).

Workload: a source feeding a chain of ``--operators`` keyed operators (1 ms per tuple
per core, selectivity 1); the instances are split evenly over the operators, each with
``shards ÷ instances`` shards; nodes of 8 cores, one per 4 instances (paper 000's
SSE set-up). Shard popularity is Zipf(``--alpha``) over each operator's keys in random
order; state per shard grows with its popularity. Two snapshots: ``A`` at the base
rate (mean demand ``--busy`` cores per instance), ``B`` at ``--surge`` × the base with
``--omega`` key swaps per operator (popularity moving between instances) and a
source backlog of ``--backlog-s`` seconds of input. Two decisions per size:

* ``scale-out`` — snapshot ``A`` from the initial plan (one core per instance): every
  instance grows and every routing table is rebalanced;
* ``re-plan`` — snapshot ``B`` from the plan ``scale-out`` produced.

One JSON line per size and decision (``"bench": "planner_scale"``) with the median,
min and max wall time over ``--repeats`` runs, ``peak_mb`` (tracemalloc: the peak of
Python and numpy allocations during one decision above what was allocated before it,
measured in a separate run because tracing slows the code), the median CPU time of
the process (``median_cpu_s``: what the decision costs when other processes share the
cores), a per-stage breakdown in CPU seconds (one run through the same registry
steps) and the configuration; the lines are also
appended to ``benchmarks/results/planner_scale.jsonl`` (``_results.record``).

Run: ``.venv/bin/python benchmarks/bench_planner_scale.py [--quick] [--seed N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from _results import record

from streamscale.control.controller import Apply, Controller, Observed
from streamscale.control.policies import initial_plan, make_policy
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
from streamscale.planning.registry import compose

__all__ = ["SIZES", "decision_inputs", "main", "snapshot", "topology"]

#: (instances, shards) of the full run
SIZES: tuple[tuple[int, int], ...] = tuple(
    (e, z) for e in (64, 256, 1000) for z in (10_000, 100_000)
)
#: the subset of ``--quick``
QUICK: tuple[tuple[int, int], ...] = ((64, 10_000), (1000, 100_000))
COST_MS = 1.0
CORES_PER_NODE = 8
INSTANCES_PER_NODE = 4
BASE_STATE = 4 * 1024
HOT_STATE = 64 * 1024


def topology(instances: int, shards: int, operators: int) -> Topology:
    """Source → ``operators`` keyed operators in a chain → sink, ``instances`` split evenly."""
    per = [
        instances // operators + (1 if i < instances % operators else 0) for i in range(operators)
    ]
    z = max(shards // instances, 1)
    ops = [Operator("events", kind="source", tuple_bytes=128)]
    edges = []
    prev = "events"
    for i, e in enumerate(per):
        name = f"keyed{i}"
        ops.append(Operator(name, key="k", cost_ms=COST_MS, tuple_bytes=128, instances=e, shards=z))
        edges.append(Edge(prev, name, grouping="key"))
        prev = name
    ops.append(Operator("sink", kind="sink"))
    edges.append(Edge(prev, "sink"))
    return Topology.build(f"chain{operators}x{instances}", ops, edges)


def cluster(instances: int) -> Cluster:
    return Cluster.uniform(math.ceil(instances / INSTANCES_PER_NODE), cores=CORES_PER_NODE)


def _popularity(topo: Topology, alpha: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Zipf(α) over an operator's instances × Zipf(α) over each instance's shards, shuffled."""
    out = {}
    for op in topo.processing:
        ew = rng.permutation(1.0 / np.arange(1, op.instances + 1) ** alpha)
        zipf = 1.0 / np.arange(1, op.shards + 1) ** alpha
        sw = np.stack([rng.permutation(zipf) for _ in range(op.instances)])
        out[op.name] = (ew[:, None] * sw / sw.sum(axis=1, keepdims=True)).ravel()
    return out


def snapshot(
    topo: Topology,
    weights: dict[str, np.ndarray],
    *,
    busy: float,
    backlog_s: float,
    t: float,
) -> Snapshot:
    """Observed statistics: each operator's rate is ``busy`` cores per instance × μ."""
    mu = 1000.0 / COST_MS
    ops: dict[str, OperatorStats] = {}
    shards: list[ShardStats] = []
    rate = 0.0
    for op in topo.processing:
        w = weights[op.name]
        lam = busy * op.instances * mu
        rate = lam
        ops[op.name] = OperatorStats(lam, lam, mu, 0.0)
        load = (lam / mu) * w / w.sum()
        state = (BASE_STATE + HOT_STATE * w / w.max()).astype(np.int64)
        rows = np.rint(load * mu).astype(np.int64)
        shards.extend(
            ShardStats(op.name, g, ld, r, sb)
            for g, (ld, r, sb) in enumerate(
                zip(load.tolist(), rows.tolist(), state.tolist(), strict=True)
            )
        )
    ops["events"] = OperatorStats(0.0, rate, None, rate * backlog_s)
    return Snapshot.build(time=t, operators=ops, shards=shards)


def decision_inputs(
    instances: int,
    shards: int,
    *,
    operators: int = 4,
    alpha: float = 0.5,
    busy: float = 0.7,
    surge: float = 1.25,
    omega: int = 64,
    backlog_s: float = 0.5,
    seed: int = 0,
) -> tuple[Topology, Cluster, Snapshot, Snapshot]:
    """The topology, cluster and the two snapshots (``A``: base, ``B``: surge with drift)."""
    rng = np.random.default_rng(seed)
    topo = topology(instances, shards, operators)
    clu = cluster(instances)
    weights = _popularity(topo, alpha, rng)
    snap_a = snapshot(topo, weights, busy=busy, backlog_s=0.0, t=0.0)
    for w in weights.values():
        # ω swaps of a hot key with a random one: popularity moves between instances
        hot = np.argsort(-w)[: max(omega, 1)]
        for a in hot[:omega]:
            b = int(rng.integers(w.size))
            w[a], w[b] = w[b], w[a]
    snap_b = snapshot(topo, weights, busy=busy * surge, backlog_s=backlog_s, t=60.0)
    return topo, clu, snap_a, snap_b


def _decide(policy: Any, snap: Snapshot, plan: Plan) -> Plan:
    """One decision as the control loop makes it (fresh controller: no damping holds)."""
    (act,) = Controller(policy).handle([Observed(snap, plan, snap.time)])
    return act.plan if isinstance(act, Apply) else plan


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float], Any]:
    """Wall and CPU seconds of ``repeats`` calls (CPU time: this process only, so it
    shows what the decision costs when other processes share the cores)."""
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu, out


def _peak_mb(fn: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - base) / 2**20


def _breakdown(policy: Any, snap: Snapshot, plan: Plan) -> dict[str, float]:
    """CPU seconds per stage of the same decision, through the same registry steps."""
    out: dict[str, float] = {}
    gc.collect()
    t0 = time.process_time()
    ctx = policy.context(snap, snap.time)
    out["loads_s"] = time.process_time() - t0
    cur = plan
    for family, name in (
        ("allocator", "queueing"),
        ("placer", "elasticutor"),
        ("balancer", "shard"),
    ):
        t0 = time.process_time()
        cur, _, _ = compose(ctx, cur, steps=[(family, name)])
        out[f"{family}_s"] = time.process_time() - t0
    t0 = time.process_time()
    plan.diff(cur, shard_bytes=policy.shard_bytes)
    out["diff_s"] = time.process_time() - t0
    return {k: round(v, 4) for k, v in out.items()}


def bench(
    instances: int, shards: int, *, repeats: int, seed: int, **cfg: Any
) -> list[dict[str, Any]]:
    topo, clu, snap_a, snap_b = decision_inputs(instances, shards, seed=seed, **cfg)
    policy = make_policy("elastic", topo, clu, seed=seed)
    start = initial_plan("elastic", topo, clu)
    lines = []
    plan = start
    for kind, snap in (("scale-out", snap_a), ("re-plan", snap_b)):
        current = plan
        times, cpu, plan = _timed(lambda s=snap, c=current: _decide(policy, s, c), repeats)
        peak = _peak_mb(lambda s=snap, c=current: _decide(policy, s, c))
        diff = current.diff(plan, shard_bytes=policy.shard_bytes)
        lines.append(
            {
                "bench": "planner_scale",
                "decision": kind,
                "executors": instances,
                "shards": shards,
                "shards_per_executor": topo.processing[0].shards,
                "shards_total": sum(op.instances * op.shards for op in topo.processing),
                "nodes": len(clu.nodes),
                "cluster_cores": clu.total_cores,
                "median_s": round(statistics.median(times), 4),
                "min_s": round(min(times), 4),
                "max_s": round(max(times), 4),
                "median_cpu_s": round(statistics.median(cpu), 4),
                "repeats": repeats,
                "peak_mb": round(peak, 2),
                "peak_mb_kind": "tracemalloc (allocations during one decision)",
                "breakdown_cpu_s": _breakdown(policy, snap, current),
                "cores_before": current.allocation.total,
                "cores_after": plan.allocation.total,
                "shard_moves": len(diff.shard_moves),
                "core_moves": len(diff.core_moves),
                "migration_mb": round(diff.migration_bytes / 2**20, 3),
                "operators": len(topo.processing),
                "keys": "zipf(alpha) over executors x zipf(alpha) over their shards, shuffled",
                "policy": "elastic",
                "seed": seed,
                **{k: v for k, v in cfg.items() if k != "operators"},
                "target_s": 1.0 if (instances, shards) == (1000, 100_000) else None,
            }
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64×10K and 1000×100K, 3 repeats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=None, help="timed decisions per size")
    ap.add_argument("--operators", type=int, default=4, help="keyed operators in the chain")
    ap.add_argument("--alpha", type=float, default=0.5, help="Zipf exponent of key popularity")
    ap.add_argument("--busy", type=float, default=0.7, help="base demand, cores per executor")
    ap.add_argument("--surge", type=float, default=1.25, help="snapshot B's rate ÷ A's")
    ap.add_argument("--omega", type=int, default=64, help="hot-key swaps per operator in B")
    ap.add_argument("--backlog-s", type=float, default=0.5, help="source backlog in B (s of input)")
    ap.add_argument(
        "--size",
        action="append",
        default=None,
        metavar="INSTxSHARDS",
        help="run only this size (e.g. 1000x100000); repeatable",
    )
    ap.add_argument("--no-record", action="store_true", help="do not append to benchmarks/results")
    args = ap.parse_args(argv)
    sizes = list(QUICK if args.quick else SIZES)
    if args.size:
        try:
            sizes = [(int(a), int(b)) for a, _, b in (s.lower().partition("x") for s in args.size)]
        except ValueError:
            print(f"--size: want INSTANCESxSHARDS, got {args.size}", file=sys.stderr)
            return 2
    for name in ("operators", "repeats", "omega"):
        v = getattr(args, name)
        if v is not None and v < 1:
            print(f"--{name}: must be >= 1, got {v}", file=sys.stderr)
            return 2
    for e, z in sizes:
        if e < args.operators or z < e:
            print(
                f"--size {e}x{z}: need instances >= operators and shards >= instances",
                file=sys.stderr,
            )
            return 2
    repeats = args.repeats or (3 if args.quick else 5)
    cfg = {
        "operators": args.operators,
        "alpha": args.alpha,
        "busy": args.busy,
        "surge": args.surge,
        "omega": args.omega,
        "backlog_s": args.backlog_s,
    }
    cmd = list(sys.argv[1:] if argv is None else argv)
    for e, z in sizes:
        for line in bench(e, z, repeats=repeats, seed=args.seed, **cfg):
            out = line if args.no_record else record("planner_scale", line, argv=cmd)
            print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
