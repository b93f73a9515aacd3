"""The setting of paper 002's evaluation (§V.A): three queries on a 10-node cluster with load.

Join and word count are already running; top-k is the query to place. The
paper gives no operator costs or tuple sizes, so the figures here are chosen
(**Choice**) to make a 2014-era cluster of 4-core nodes busy but not saturated
at the top workload: at 1200 tuples/s the three queries need about 17 cores
on top of the other work, out of 40.

* Cluster: 10 nodes × 4 cores (400 %), 3 worker slots each (Fig. 3), a
  100 Mbit/s link each.
* Other work (F0 besides the two queries): per node, CPU uniform in 10–60 %
  and bandwidth uniform in 5–40 % of the link, drawn from the seed.
* Join and word count were placed by Storm's default even scheduler when they
  were submitted (so they hold slots), at the workload's rate.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from streamscale.model import Cluster, Edge, Node, Operator, Plan, Topology
from streamscale.planning.adapters.elastic_allocator import build_problem
from streamscale.planning.placement.elastic_allocator import (
    AllocatorNode,
    AllocatorProblem,
    evaluate,
    even_placement,
)
from streamscale.planning.registry import PlanningContext

__all__ = ["NODES", "join", "setting", "top_k", "word_count"]

NODES = 10
CORES = 4
SLOTS = 3
LINK_MBPS = 100.0


def top_k() -> Topology:
    """Top-k URLs of the World Cup '98 HTTP log: parse, count per URL, rank, merge."""
    return Topology.build(
        "top-k",
        [
            Operator("requests", kind="source", cost_ms=0.3, tuple_bytes=1500),
            Operator("parse", cost_ms=2.0, instances=2, tuple_bytes=200),
            Operator("count", key="url", cost_ms=3.0, instances=3, tuple_bytes=100),
            Operator("rank", cost_ms=1.0, instances=2, tuple_bytes=400),
            Operator("merge", cost_ms=0.5, tuple_bytes=400),
            Operator("out", kind="sink"),
        ],
        [
            Edge("requests", "parse"),
            Edge("parse", "count", grouping="key"),
            Edge("count", "rank", selectivity=0.5),
            Edge("rank", "merge", grouping="global", selectivity=0.1),
            Edge("merge", "out"),
        ],
    )


def word_count() -> Topology:
    """Word count over request lines: split into words (5 per line), count per word."""
    return Topology.build(
        "word-count",
        [
            Operator("lines", kind="source", cost_ms=0.3, tuple_bytes=1000),
            Operator("split", cost_ms=1.5, instances=2, tuple_bytes=60),
            Operator("count", key="word", cost_ms=0.4, instances=3, tuple_bytes=60),
            Operator("out", kind="sink"),
        ],
        [
            Edge("lines", "split"),
            Edge("split", "count", grouping="key", selectivity=5.0),
            Edge("count", "out", selectivity=0.1),
        ],
    )


def join() -> Topology:
    """Windowed join of requests with server responses on the request id."""
    return Topology.build(
        "join",
        [
            Operator("requests", kind="source", cost_ms=0.2, tuple_bytes=800),
            Operator("responses", kind="source", cost_ms=0.2, tuple_bytes=800),
            Operator("filter-req", cost_ms=1.0, tuple_bytes=300),
            Operator("filter-resp", cost_ms=1.0, tuple_bytes=300),
            Operator("join", key="id", cost_ms=2.0, instances=2, tuple_bytes=500),
            Operator("out", kind="sink"),
        ],
        [
            Edge("requests", "filter-req"),
            Edge("responses", "filter-resp"),
            Edge("filter-req", "join", grouping="key", selectivity=0.5),
            Edge("filter-resp", "join", grouping="key", selectivity=0.5),
            Edge("join", "out", selectivity=0.5),
        ],
    )


def _background(seed: int) -> Cluster:
    rng = np.random.default_rng(seed)
    cpu = rng.uniform(0.10, 0.60, NODES) * 100.0 * CORES
    bw = rng.uniform(0.05, 0.40, NODES) * LINK_MBPS
    return Cluster.build(
        Node(
            f"w{i + 1}",
            cores=CORES,
            memory_gb=2.0,
            bandwidth_mbps=LINK_MBPS,
            reserved_cpu=float(cpu[i]),
            reserved_bandwidth_mbps=float(bw[i]),
        )
        for i in range(NODES)
    )


def _absorb(problem: AllocatorProblem, assignment: dict[str, str]) -> tuple[AllocatorNode, ...]:
    """Nodes whose existing usage and free slots now include a placed query."""
    ev = evaluate(problem, assignment)
    used = {n: 0 for n in problem.node_names}
    for node in assignment.values():
        used[node] += 1
    return tuple(
        replace(
            n,
            reserved_cpu=cl * n.cpu_capacity,
            reserved_bandwidth_mbps=bl * n.bandwidth_mbps,
            slots=max(0, n.slots - used[n.name]),
        )
        for n, cl, bl in zip(problem.nodes, ev.node_cpu_load, ev.node_bw_load, strict=True)
    )


def setting(rate: float, seed: int, *, d_cpu: float = 0.9, d_bw: float = 0.9) -> AllocatorProblem:
    """The top-k placement problem at ``rate`` tuples/s, with join and word count running."""
    cluster = _background(seed)
    nodes: tuple[AllocatorNode, ...] | None = None
    for running in (word_count(), join()):
        problem, _ = build_problem(PlanningContext(running, cluster, rate=rate), Plan())
        problem = replace(
            problem, nodes=nodes or tuple(replace(n, slots=SLOTS) for n in problem.nodes)
        )
        nodes = _absorb(problem, dict(even_placement(problem).assignment))
    problem, _ = build_problem(PlanningContext(top_k(), cluster, rate=rate), Plan())
    assert nodes is not None
    return replace(problem, nodes=nodes, d_cpu=d_cpu, d_bw=d_bw)
