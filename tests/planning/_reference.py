"""Straightforward forms of planners that have faster implementations in ``src``.

Each function here is the direct transcription of its paper step as it stood before
the scale work (scans rather than heaps and bisection); the tests compare the fast
implementation against it on random instances, outputs equal to the last bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from streamscale.model import Cluster, CoreMove, Plan, Topology
from streamscale.model.ids import instance_of, parse_unit, unit_id
from streamscale.planning.balancing.shard_balance import BalanceResult, imbalance, task_loads
from streamscale.planning.elastic_plan import InstanceInfo, instance_name

_EPS = 1e-12


def balance_shards(
    loads: Sequence[float] | np.ndarray,
    current: Sequence[int | None],
    k: int,
    *,
    theta: float = 1.2,
    max_rounds: int | None = None,
) -> BalanceResult:
    """Paper 000, §3.1: each round scans the most loaded task's shards for the best move."""
    w = np.asarray(loads, dtype=float)
    z = w.size
    orig = [t if t is not None and 0 <= t < k else None for t in current]
    assign = np.array([-1 if t is None else t for t in orig], dtype=np.int64)
    per = task_loads(w[assign >= 0], assign[assign >= 0], k)
    for s in sorted(np.flatnonzero(assign < 0), key=lambda s: (-w[s], s)):
        t = int(np.argmin(per))
        assign[s] = t
        per[t] += w[s]
    delta0 = imbalance(per)
    rounds = 0
    limit = 4 * z if max_rounds is None else max_rounds
    bound = theta * float(per.mean())
    while rounds < limit and delta0 > theta and per.max() > bound + _EPS:
        src, dst = int(np.argmax(per)), int(np.argmin(per))
        cand = np.flatnonzero(assign == src)
        if src == dst or cand.size == 0:
            break
        after = np.maximum(per[src] - w[cand], per[dst] + w[cand])
        best = int(np.argmin(after))
        if not after[best] < per[src] - _EPS:
            break
        s = int(cand[best])
        assign[s] = dst
        per[src] -= w[s]
        per[dst] += w[s]
        rounds += 1
    final = assign.tolist()
    moves = tuple((s, orig[s], final[s]) for s in range(z) if orig[s] != final[s])
    return BalanceResult(tuple(final), moves, delta0, imbalance(per), rounds)


def keyed_instances(topology: Topology, cluster: Cluster) -> tuple[InstanceInfo, ...]:
    """Homes by a scan of every node per instance: fewest homes per core, most cores."""
    taken = dict.fromkeys(cluster.names, 0)
    cores = {n.name: n.cores for n in cluster.nodes}
    out: list[InstanceInfo] = []
    for op in topology.processing:
        if not op.keyed:
            continue
        for e in range(op.instances):
            home = min(cluster.names, key=lambda n: (taken[n] / cores[n], -cores[n]))
            taken[home] += 1
            out.append(InstanceInfo(instance_name(op.name, e), op.name, e, op.shards, home))
    return tuple(out)


def realize_units(
    current: Plan, insts: Sequence[InstanceInfo], x: np.ndarray, nodes: Sequence[str]
) -> tuple[dict[str, str], dict[str, list[int | None]]]:
    """Unit names of assignment ``x``, every node visited for every executor."""
    by_inst: dict[str, list[tuple[int, str]]] = {}
    for unit, node in current.placement.nodes.items():
        u = parse_unit(unit)
        if u is not None and node in set(nodes):
            by_inst.setdefault(u.instance, []).append((u.index, node))
    for units in by_inst.values():
        units.sort()
    placement: dict[str, str] = {}
    renames: dict[str, list[int | None]] = {}
    for j, info in enumerate(insts):
        k = int(x[:, j].sum())
        old = by_inst.get(info.instance, [])
        top = max((t for t, _ in old), default=-1) + 1
        mapping: list[int | None] = [None] * top
        want = {nodes[i]: int(x[i, j]) for i in range(len(nodes)) if x[i, j] > 0}
        kept: list[tuple[int, str]] = []
        for t, node in old:
            if want.get(node, 0) > 0:
                want[node] -= 1
                kept.append((t, node))
        used = {t for t, _ in kept if t < k}
        free = iter(t for t in range(k) if t not in used)
        for t, node in kept:
            new = t if t < k else next(free)
            mapping[t] = new
            placement[unit_id(info.instance, new)] = node
        for node in nodes:
            for _ in range(want.get(node, 0)):
                placement[unit_id(info.instance, next(free))] = node
        renames[info.instance] = mapping
    return placement, renames


def core_moves(old: Plan, new: Plan) -> tuple[CoreMove, ...]:
    """Core moves of ``old.diff(new)``, each instance's units counted by a full scan."""

    def per_node(plan: Plan, instance: str) -> Counter[str]:
        return Counter(n for u, n in plan.placement.nodes.items() if instance_of(u) == instance)

    out: list[CoreMove] = []
    for inst in sorted(set(old.allocation.cores) | set(new.allocation.cores)):
        before, after = per_node(old, inst), per_node(new, inst)
        for node in sorted(set(before) | set(after)):
            d = after[node] - before[node]
            if d:
                out.append(CoreMove(inst, node, d))
    return tuple(out)
