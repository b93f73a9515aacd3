"""Plans of instances: the glue between the domain model and Elasticutor's planners.

Paper 000 (Elasticutor), §3: every keyed operator has ``E`` instances (the paper's
elastic executors, ``operator.instances``), each owning ``Z`` shards
(``operator.shards``) by a static hash; instance ``e`` of operator ``op`` is ``op[e]``
and its ``k`` cores are the units ``op[e]#0 … op[e]#k−1``. This module extracts what the
planners need from a snapshot (per-shard load and state, per-instance rates), keeps
unit identities stable across re-plans (so a shard only "moves" when it has to) and
assembles :class:`~streamscale.model.Plan` objects. It is pure: no clock, no I/O.

Examples
--------
A keyed operator of two instances with four shards each, at 300 t/s and μ = 1000/10 ms
= 100 t/s per core, on two 2-core nodes: each instance gets 150 t/s, each shard 3/8 of a
core. ``agg[1]`` grows from one core to two: its new task takes two of its shards
(δ = 2 → 1), ``agg[0]``'s table is kept.

>>> import numpy as np
>>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
>>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4)],
...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
>>> cluster = Cluster.uniform(2, cores=2)
>>> insts = keyed_instances(topo, cluster)
>>> [(e.instance, e.home) for e in insts]
[('agg[0]', 'n1'), ('agg[1]', 'n2')]
>>> loads = instance_loads(topo, insts, None, rate=300.0)
>>> loads["agg[1]"].arrival, loads["agg[1]"].service, loads["agg[1]"].shard_load.tolist()
(150.0, 100.0, [0.375, 0.375, 0.375, 0.375])
>>> x = fill_assignment(np.zeros((2, 2), dtype=int), [2, 1], [2, 2], [0, 1])
>>> units, _ = realize_units(Plan(), insts, x, cluster.names)
>>> tables, _ = route(Plan(), insts, loads, {"agg[0]": 2, "agg[1]": 1})
>>> plan = assemble({"agg[0]": 2, "agg[1]": 1}, units, tables)
>>> x = fill_assignment(placement_matrix(plan, insts, cluster.names), [2, 2], [2, 2], [0, 1])
>>> units, renames = realize_units(plan, insts, x, cluster.names)
>>> units["agg[1]#1"], renames
('n2', {'agg[0]': [0, 1], 'agg[1]': [0]})
>>> tables, done = route(plan, insts, loads, {"agg[0]": 2, "agg[1]": 2}, renames)
>>> tables["agg[1]"], done["agg[1]"].delta_after, tables["agg[0]"] == plan.routing.tables["agg[0]"]
(('agg[1]#1', 'agg[1]#1', 'agg[1]#0', 'agg[1]#0'), 1.0, True)
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from streamscale.errors import ModelError
from streamscale.model import (
    Allocation,
    Cluster,
    Placement,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    Topology,
)
from streamscale.model.ids import instance_id, parse_unit, unit_id
from streamscale.planning.allocation.surge import CATCH_UP_FORM, CATCH_UP_FORMS
from streamscale.planning.balancing.shard_balance import THETA, BalanceResult, balance_shards

__all__ = [
    "InstanceInfo",
    "InstanceLoad",
    "assemble",
    "backlog_rates",
    "fill_assignment",
    "instance_loads",
    "instance_name",
    "keyed_instances",
    "placement_matrix",
    "realize_units",
    "route",
    "table_delta",
    "table_to_tasks",
    "tasks_to_table",
    "trim_cores",
]


def instance_name(operator: str, index: int) -> str:
    """Id of instance ``index`` of ``operator`` (``op[e]``, :mod:`streamscale.model.ids`)."""
    return instance_id(operator, index)


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """One instance: its operator, index, shard count ``Z`` and home node I(j)."""

    instance: str
    operator: str
    index: int
    shards: int
    home: str


@dataclass(frozen=True, slots=True)
class InstanceLoad:
    """Observed or modelled demand of one instance.

    ``shard_load`` is in cores per local shard (length ``Z``); ``shard_bytes`` is the
    state size of each local shard; ``arrival`` λ_j and ``service`` μ_j are tuples/s
    (μ per core); ``bytes_rate`` is input + output bytes/s (data intensity × k);
    ``backlog_rate`` is the part of ``arrival`` that drains the instance's share of
    the backlog within the catch-up time (0 without backlog); ``queued`` the tuples
    waiting at the instance's own tasks (0 when the snapshot does not say).
    """

    shard_load: np.ndarray
    shard_bytes: np.ndarray
    arrival: float
    service: float
    bytes_rate: float
    backlog_rate: float = 0.0
    queued: float = 0.0

    @property
    def load(self) -> float:
        return float(self.shard_load.sum())

    @property
    def state(self) -> int:
        return int(self.shard_bytes.sum())


def keyed_instances(topology: Topology, cluster: Cluster) -> tuple[InstanceInfo, ...]:
    """All instances of the topology's keyed processing operators.

    Home nodes I(j) are spread over the nodes in proportion to their cores
    (each instance goes to the node with the most cores not yet hosting a home),
    a pure function of the topology and cluster so every re-plan agrees on them.
    """
    if not cluster.nodes:
        raise ModelError("cluster has no nodes to run instances on", item="cluster")
    names = cluster.names
    cores = [n.cores for n in cluster.nodes]
    # the node with the fewest homes per core, then the most cores, then the first:
    # a heap of (taken / cores, −cores, position) pops exactly what a scan would pick
    heap = [(0.0, -c, i, 0) for i, c in enumerate(cores)]
    heapq.heapify(heap)
    out: list[InstanceInfo] = []
    for op in topology.processing:
        if not op.keyed:
            continue
        for e in range(op.instances):
            # ratio comparison keeps heterogeneous nodes proportionally loaded
            _, neg, i, taken = heapq.heappop(heap)
            heapq.heappush(heap, ((taken + 1) / cores[i], neg, i, taken + 1))
            out.append(InstanceInfo(instance_name(op.name, e), op.name, e, op.shards, names[i]))
    return tuple(out)


def _source_rate(topology: Topology, rate: float | None) -> dict[str, float]:
    try:
        return topology.rates(rate)
    except ModelError:
        return {}


def backlog_rates(
    topology: Topology, snapshot: Snapshot | None, catch_up_s: float
) -> dict[str, float]:
    """Extra tuples/s per operator that drain the backlog within ``catch_up_s``.

    DS2-style catch-up (docs/algorithms.md, "Beyond the papers"): under back-pressure
    the observed arrival rate equals the throughput, so the target rate adds
    ``backlog / catch_up_s``. An operator's own backlog counts in full; tuples held
    back at the sources reach it in proportion to its visit ratio (its input rate
    over the sources' output rate, else the topology's model).
    """
    if snapshot is None or not catch_up_s > 0 or not np.isfinite(catch_up_s):
        return {}
    ops = snapshot.operators
    src_out = sum(ops[s.name].output_rate for s in topology.sources if s.name in ops)
    src_backlog = sum(ops[s.name].backlog for s in topology.sources if s.name in ops)
    try:
        visit = topology.rates(1.0)
    except ModelError:
        visit = {}
    out: dict[str, float] = {}
    for op in topology.processing:
        stats = ops.get(op.name)
        own = stats.backlog if stats is not None else 0.0
        ratio = 0.0
        if src_backlog > 0:
            if stats is not None and src_out > 0 and stats.input_rate > 0:
                ratio = stats.input_rate / src_out
            else:
                ratio = visit.get(op.name, 1.0)
        extra = (max(own, 0.0) + ratio * src_backlog) / catch_up_s
        if extra > 0:
            out[op.name] = extra
    return out


def instance_loads(
    topology: Topology,
    insts: Sequence[InstanceInfo],
    snapshot: Snapshot | None,
    *,
    rate: float | None = None,
    catch_up_s: float | None = None,
    catch_up_form: str = CATCH_UP_FORM.default,
) -> dict[str, InstanceLoad]:
    """Per-instance demand from a snapshot, falling back to the topology's model.

    Shard loads come from ``snapshot.shards`` (global index ``e·Z + s``); an operator
    without shard statistics spreads its load ``λ/μ`` evenly over its shards. The
    arrival rate of instance ``j`` is its share of the operator's load times μ, so
    skew across instances is visible to the queueing model (paper 000, §4.1).
    With ``catch_up_s``, the operator's :func:`backlog_rates` is added (DS2-style
    catch-up): the tuples queued at the operator's own tasks go to the instance
    they wait at (shard ``backlog`` of the snapshot), the sources' share is spread
    in proportion to load. ``catch_up_form="latency"`` sizes an instance for the larger
    of its arrival rate and its backlog's catch-up rate instead of their sum: served
    first in, first out at that capacity, the backlog's last tuple waits at most
    ``catch_up_s`` (the sum drains the whole backlog within ``catch_up_s``, DS2's aim).
    """
    if catch_up_form not in CATCH_UP_FORMS:
        raise ValueError(f"catch_up_form must be one of {CATCH_UP_FORMS}, got {catch_up_form!r}")
    omega = _source_rate(topology, rate)
    extra = backlog_rates(topology, snapshot, catch_up_s) if catch_up_s else {}
    own_rate: dict[str, float] = {}
    if snapshot is not None and catch_up_s:
        for name, stats in snapshot.operators.items():
            if stats.backlog > 0:
                own_rate[name] = stats.backlog / catch_up_s
    by_op: dict[str, list[InstanceInfo]] = {}
    for info in insts:
        by_op.setdefault(info.operator, []).append(info)
    # columns built once: snapshots carry thousands of shards per operator
    sh = snapshot.shards if snapshot is not None else ()
    rows = _shard_rows(sh)
    out: dict[str, InstanceLoad] = {}
    for name, group in by_op.items():
        op = topology.operator(name)
        stats = snapshot.operators.get(name) if snapshot else None
        lam = stats.input_rate if stats is not None else omega.get(name, 0.0)
        mu = stats.service_rate if stats is not None and stats.service_rate else None
        if mu is None:
            mu = 1000.0 / op.cost_ms if op.cost_ms > 0 else float("inf")
        out_rate = stats.output_rate if stats is not None else lam
        z = op.shards
        n = len(group) * z
        load = np.zeros(n)
        state = np.full(n, op.state_bytes // max(n, 1), dtype=np.int64)
        queued = np.zeros(n)
        got = rows.get(name)
        shards = got is not None
        if got is not None:
            idx, col_load, col_bytes, col_queued = got
            ok = idx < n
            load[idx[ok]] = col_load[ok]
            state[idx[ok]] = col_bytes[ok]
            queued[idx[ok]] = col_queued[ok]
        elif np.isfinite(mu):
            load[:] = lam / mu / n
        own_total = float(queued.sum())
        total = float(load.sum())
        in_bytes = _in_bytes(topology, name)
        out_bytes = float(op.tuple_bytes)
        for info in group:
            sl = load[info.index * z : (info.index + 1) * z]
            share = float(sl.sum()) / total if total > 0 else 1.0 / len(group)
            arrival = float(sl.sum()) * mu if shards and np.isfinite(mu) else lam * share
            mine = float(queued[info.index * z : (info.index + 1) * z].sum())
            catch_up = extra.get(name, 0.0) * share
            if own_total > 0 and catch_up_s:
                # an instance's own queue is its own: split the operator's queue by
                # where it waits, the sources' share by load (a throttled instance's
                # observed load understates its demand, its queue does not)
                own = own_rate.get(name, 0.0)
                catch_up += own * (mine / own_total - share)
            out[info.instance] = InstanceLoad(
                shard_load=sl.copy(),
                shard_bytes=state[info.index * z : (info.index + 1) * z].copy(),
                arrival=max(arrival, catch_up)
                if catch_up_form == "latency"
                else arrival + catch_up,
                service=float(mu),
                bytes_rate=share * (lam * in_bytes + out_rate * out_bytes),
                backlog_rate=max(catch_up, 0.0),
                queued=mine,
            )
    return out


def _shard_rows(
    shards: Sequence[ShardStats],
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Shard index, load and state columns per operator, in one pass over the records.

    Snapshots carry ~10⁴ shard records; collectors emit each operator's shards
    contiguously, so the operators are split at runs rather than compared per row.
    """
    if not shards:
        return {}
    n = len(shards)
    names = list(map(attrgetter("operator"), shards))
    idx = np.fromiter(map(attrgetter("shard"), shards), dtype=np.int64, count=n)
    load = np.fromiter(map(attrgetter("load"), shards), dtype=float, count=n)
    size = np.fromiter(map(attrgetter("state_bytes"), shards), dtype=np.int64, count=n)
    queued = np.fromiter(map(attrgetter("backlog"), shards), dtype=float, count=n)
    runs: dict[str, list[tuple[int, int]]] = {}
    start = 0
    for i in range(1, n + 1):
        if i == n or names[i] != names[start]:
            runs.setdefault(names[start], []).append((start, i))
            start = i
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for name, spans in runs.items():
        sel = np.concatenate([np.arange(a, b) for a, b in spans]) if len(spans) > 1 else None
        a, b = spans[0]
        out[name] = (
            (idx[sel], load[sel], size[sel], queued[sel])
            if sel is not None
            else (idx[a:b], load[a:b], size[a:b], queued[a:b])
        )
    return out


def _in_bytes(topology: Topology, name: str) -> float:
    ins = topology.inputs(name)
    return float(np.mean([topology.edge_bytes(e) for e in ins])) if ins else 0.0


def placement_matrix(plan: Plan, insts: Sequence[InstanceInfo], nodes: Sequence[str]) -> np.ndarray:
    """x̃: cores of each instance (columns) on each node (rows) in ``plan``.

    Units on nodes the cluster no longer has are ignored (their cores are gone).
    """
    row = {n: i for i, n in enumerate(nodes)}
    col = {info.instance: j for j, info in enumerate(insts)}
    x = np.zeros((len(nodes), len(insts)), dtype=np.int64)
    for unit, node in plan.placement.nodes.items():
        u = parse_unit(unit)
        j, i = (col.get(u.instance) if u else None), row.get(node)
        if j is not None and i is not None:
            x[i, j] += 1
    return x


def _units_by_instance(plan: Plan, nodes: set[str]) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for unit, node in plan.placement.nodes.items():
        u = parse_unit(unit)
        if u is not None and node in nodes:
            out.setdefault(u.instance, []).append((u.index, node))
    for units in out.values():
        units.sort()
    return out


def realize_units(
    current: Plan,
    insts: Sequence[InstanceInfo],
    x: np.ndarray,
    nodes: Sequence[str],
) -> tuple[dict[str, str], dict[str, list[int | None]]]:
    """Name the units of assignment ``x`` so that surviving units keep their ids.

    Returns the placement (unit → node) and, per instance, the map from old unit
    index to new unit index (``None`` when the unit is released). On each node an
    instance keeps its lowest-numbered units; units numbered past the new ``k`` are
    renamed into freed indices on the same node, so their shards keep their state
    (paper 000, §3: tasks of one node share state).
    """
    by_inst = _units_by_instance(current, set(nodes))
    placement: dict[str, str] = {}
    renames: dict[str, list[int | None]] = {}
    ks = x.sum(axis=0).tolist()
    for j, info in enumerate(insts):
        k = int(ks[j])
        old = by_inst.get(info.instance, [])
        top = max((t for t, _ in old), default=-1) + 1
        mapping: list[int | None] = [None] * top
        col = x[:, j]
        want = {nodes[i]: int(col[i]) for i in np.flatnonzero(col > 0).tolist()}
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
        for node, left in want.items():  # in the order of ``nodes``
            for _ in range(left):
                placement[unit_id(info.instance, next(free))] = node
        renames[info.instance] = mapping
    return placement, renames


def table_to_tasks(
    table: Sequence[str] | None, instance: str, z: int, mapping: Sequence[int | None] | None
) -> list[int | None]:
    """Local shard → new task index (``None`` = orphaned), from an old routing table.

    ``mapping`` is the old → new unit index map of :func:`realize_units`; without
    one, unit indices are taken as they are.
    """
    if table is None or len(table) != z:
        return [None] * z
    index: dict[str, int | None] = {}
    for unit in set(table):
        u = parse_unit(unit)
        t = u.index if u is not None and u.instance == instance else None
        if t is not None and mapping is not None:
            t = mapping[t] if t < len(mapping) else None
        index[unit] = t
    return [index[u] for u in table]


def tasks_to_table(instance: str, tasks: Sequence[int]) -> tuple[str, ...]:
    """Routing table (local shard → unit id) from task indices."""
    names = [unit_id(instance, t) for t in range(max(tasks, default=-1) + 1)]
    return tuple(names[t] for t in tasks)


def assemble(
    cores: Mapping[str, int], placement: Mapping[str, str], tables: Mapping[str, tuple[str, ...]]
) -> Plan:
    """A :class:`Plan` from its three parts (sorted for stable output)."""
    return Plan(
        Allocation(dict(sorted(cores.items()))),
        Placement(dict(sorted(placement.items()))),
        Routing(dict(sorted(tables.items()))),
    )


def fill_assignment(
    x0: np.ndarray, k: Sequence[int], capacity: Sequence[int], homes: Sequence[int]
) -> np.ndarray:
    """A simple assignment meeting ``k``: release surplus, then fill home-first.

    Surplus cores are released from remote nodes before the home node; missing
    cores go to the home node while it has free cores, then to the node with the
    most free cores. Used for initial plans and by policies without Algorithm 1
    (paper 000, §4.2 is the migration-aware alternative). Cores beyond the cluster's
    capacity oversubscribe the home node rather than fail, as a static deployment does.

    Examples
    --------
    Instance 1 (home node 1, one core there) grows to three: node 1's free core, then
    node 0's, beside instance 0.

    >>> fill_assignment(np.array([[1, 0], [0, 1]]), [1, 3], [2, 2], [0, 1]).tolist()
    [[1, 1], [0, 2]]
    """
    x = np.array(x0, dtype=np.int64, copy=True)
    cap = np.asarray(capacity, dtype=np.int64)
    for j, want in enumerate(k):
        h = homes[j]
        while x[:, j].sum() > want:
            held = np.flatnonzero(x[:, j])
            remote = held[held != h]
            i = remote[np.argmax(x[remote, j])] if remote.size else h
            x[i, j] -= 1
    for j, want in enumerate(k):
        h = homes[j]
        while x[:, j].sum() < want:
            free = cap - x.sum(axis=1)
            if free[h] > 0:
                i = h
            elif free.max() > 0:
                i = int(np.argmax(free))
            else:
                i = h
            x[i, j] += 1
    return x


def route(
    current: Plan,
    insts: Sequence[InstanceInfo],
    loads: Mapping[str, InstanceLoad],
    cores: Mapping[str, int],
    renames: Mapping[str, Sequence[int | None]] | None = None,
    *,
    theta: float = THETA.default,
    known: Mapping[str, tuple[list[int | None], float | None]] | None = None,
) -> tuple[dict[str, tuple[str, ...]], dict[str, BalanceResult]]:
    """Routing tables for every instance after a change of ``k`` (paper 000, §3.1).

    Shards keep their task when it survives (through ``renames``), orphans and new
    tasks are handled by :func:`~streamscale.planning.balancing.shard_balance.balance_shards`.
    ``known`` holds, per instance, the :func:`table_to_tasks` and :func:`table_delta`
    of these very inputs when the caller has them already (a re-plan reads every
    table once, not twice).
    """
    tables: dict[str, tuple[str, ...]] = {}
    results: dict[str, BalanceResult] = {}
    for info in insts:
        mapping = renames.get(info.instance) if renames is not None else None
        old = current.routing.tables.get(info.instance)
        k = cores[info.instance]
        w = loads[info.instance].shard_load
        got = known.get(info.instance) if known is not None else None
        if got is not None:
            cur, delta = got
        else:
            cur = table_to_tasks(old, info.instance, info.shards, mapping)
            delta = table_delta(w, cur, k)
        if delta is not None and delta <= theta:
            # nothing orphaned and δ within θ: balance_shards would move nothing
            # (§3.1), and skipping it is most of a re-plan's cost at 10⁴ shards
            results[info.instance] = BalanceResult(tuple(cur), (), delta, delta, 0)  # type: ignore[arg-type]
            renamed = mapping is not None and any(
                m is not None and m != i for i, m in enumerate(mapping)
            )
            tables[info.instance] = (
                tuple(old)
                if old is not None and not renamed
                else tasks_to_table(info.instance, cur)  # type: ignore[arg-type]
            )
            continue
        res = balance_shards(w, cur, k, theta=theta)
        tables[info.instance] = tasks_to_table(info.instance, res.tasks)
        results[info.instance] = res
    return tables, results


def table_delta(loads: np.ndarray, tasks: Sequence[int | None], k: int) -> float | None:
    """δ of ``tasks`` over ``k`` tasks (as :func:`imbalance`); ``None`` if a shard has no task.

    A lean form of ``imbalance(task_loads(...))`` for the many small instances of
    one re-plan (paper 000, §3.1).
    """
    if k < 1 or None in tasks or (len(tasks) and max(tasks) >= k):  # type: ignore[type-var]
        return None
    per = np.bincount(np.asarray(tasks, dtype=np.int64), weights=loads, minlength=k)
    total = float(per.sum())
    mean = total / k
    return float(per.max()) / mean if mean > 1e-12 else 1.0


def trim_cores(
    k: Sequence[int],
    need: Sequence[float],
    limit: int,
    queued_s: Sequence[float] | None = None,
    *,
    wait_s: float = 0.05,
) -> list[int]:
    """Remove cores until ``Σk ≤ limit`` (never below one per instance).

    Demand is read from the queues first: an instance whose tasks hold more than
    ``wait_s`` seconds of queued work per core (``queued_s``: queued tuples ÷ μ,
    in core-seconds) is throttled — it serves at most its cores, so its observed
    load is no measure of its demand — and loses a core only once every
    instance that is not throttled is down to one. Within each group a core
    comes from the instance whose utilisation ``need / (k − 1)`` stays lowest
    without it, so the scarce cores go where demand per core is highest.

    Examples
    --------
    Six cores for a limit of four: without a core the first instance would run at
    1.0/2 = 0.5, the second at 1.5/1 (the third has one): the first loses two.

    >>> trim_cores([3, 2, 1], [1.0, 1.5, 0.5], 4)
    [1, 2, 1]
    """
    kk = np.asarray(k, dtype=np.int64).copy()
    nd = np.asarray(need, dtype=float)
    waiting = (
        np.asarray(queued_s, dtype=float) >= wait_s * kk
        if queued_s is not None and len(queued_s)
        else np.zeros(kk.size, dtype=bool)
    )
    while kk.sum() > max(limit, kk.size):
        util = np.where(kk > 1, nd / np.maximum(kk - 1, 1), np.inf)
        util = np.where(waiting & (kk > 1), util + 1e12, util)
        kk[int(np.argmin(util))] -= 1
    return [int(v) for v in kk]
