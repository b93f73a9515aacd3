"""Registry adapter for the resource-centric (RC) baseline of paper 000 (§5).

The balancer ``rc`` turns a plan into the RC paradigm: each keyed operator gets
``k`` operator-level units ``op#t`` (the plan's operator-level allocation, or the
sum of its instances' cores when the allocation is per instance), placed where
they were or on the nodes with most free cores, and the operator's shards are
repartitioned across all of them — the routing tables stay keyed by instance
``op[e]`` with ``Z`` entries, but entries may name any unit of the operator.
As in the paper ("RC uses the same performance model, load balancing algorithm
and intra-process state sharing mechanism as Elasticutor", §5), a repartitioning
is triggered when δ > ``theta`` and balances down to ``theta``. The *damped*
variant (policy ``rc-damped``), which the paper does not describe, aims lower
(``theta_low``, default ``1 + (θ − 1)/2``) and skips repartitionings that gain
little; it is reported beside the faithful one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Plan
from streamscale.model.ids import parse_unit, unit_id
from streamscale.planning.adapters.elasticutor import (
    SETTINGS,
    others,
    planning_inputs,
)
from streamscale.planning.balancing.rc import place_units, rc_rebalance
from streamscale.planning.balancing.shard_balance import imbalance, task_loads
from streamscale.planning.elastic_plan import InstanceInfo, InstanceLoad, assemble
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema, Setting

__all__ = ["operator_cores", "rc_plan", "rc_step", "rc_target"]


def operator_cores(plan: Plan, insts: tuple[InstanceInfo, ...]) -> dict[str, int]:
    """``k`` per operator: operator-level allocation, else Σ of its instances' cores."""
    out: dict[str, int] = {}
    for info in insts:
        if info.operator in plan.allocation.cores:
            out[info.operator] = int(plan.allocation.cores[info.operator])
        else:
            out[info.operator] = out.get(info.operator, 0) + int(
                plan.allocation.cores.get(info.instance, 1)
            )
    return {op: max(k, 1) for op, k in out.items()}


def _unit_index(unit: str, op: str) -> int | None:
    u = parse_unit(unit)
    return u.index if u is not None and u.instance == op else None


def rc_plan(
    context: PlanningContext,
    plan: Plan,
    cores: Mapping[str, int],
    insts: tuple[InstanceInfo, ...],
    loads: Mapping[str, InstanceLoad],
    *,
    damped: bool = False,
) -> StepResult:
    """The RC plan for operator-level ``cores`` (paper 000, §5 RC baseline).

    An operator whose ``k`` is unchanged and whose δ under its current routing is
    at most ``theta`` keeps its routing; otherwise its shards are repartitioned
    with Elasticutor's balancing algorithm down to ``theta`` (§5: same balancing
    algorithm as Elasticutor).

    ``damped`` (not in the paper): repartition down to ``theta_low`` (default
    ``1 + (θ − 1)/2``), since every RC repartitioning is a global pause and load
    noise pushes a δ just under θ over it again; and apply a repartitioning that
    stays above θ only if it lowers δ by at least ``θ − theta_low`` (a core-count
    change or orphaned shards always apply).
    """
    theta = RC_SETTINGS.read(context.params)["theta"]
    low = rc_target(context, theta, damped=damped)
    order = list(context.cluster.names)
    by_op: dict[str, list[InstanceInfo]] = {}
    for info in insts:
        by_op.setdefault(info.operator, []).append(info)
    kept = others(plan.placement.nodes, insts)
    used = Counter(kept.values())
    free = {n.name: n.cores - used[n.name] for n in context.cluster.nodes}
    current: dict[str, dict[int, str]] = {op: {} for op in by_op}
    for unit, node in plan.placement.nodes.items():
        u = parse_unit(unit)
        if u is not None and u.instance in current:
            current[u.instance][u.index] = node
    units_of = place_units(current, {op: int(cores[op]) for op in by_op}, free, order=order)
    placement: dict[str, str] = dict(kept)
    tables: dict[str, tuple[str, ...]] = {}
    totals: dict[str, Any] = {
        "shard_moves": 0,
        "remote_moves": 0,
        "migration_bytes": 0,
        "delta_before": 1.0,
        "delta_after": 1.0,
        "held_small_gain": 0,
    }
    for op, group in by_op.items():
        units = units_of[op]
        shard_load = np.concatenate([loads[info.instance].shard_load for info in group])
        shard_bytes = np.concatenate([loads[info.instance].shard_bytes for info in group])
        cur: list[int | None] = []
        old_nodes: list[str | None] = []
        for info in group:
            table = plan.routing.tables.get(info.instance)
            entries = (
                table if table is not None and len(table) == info.shards else (None,) * info.shards
            )
            for unit in entries:
                cur.append(None if unit is None else _unit_index(unit, op))
                old_nodes.append(None if unit is None else plan.placement.nodes.get(unit))
        k = int(cores[op])
        kept_k = k == plan.allocation.cores.get(op) and all(t is not None and t < k for t in cur)
        target = low
        if kept_k and imbalance(task_loads(shard_load, cur, k)) <= theta:  # type: ignore[arg-type]
            target = math.inf
        args: dict[str, Any] = {
            "old_nodes": old_nodes,
            "unit_nodes": units,
            "shard_bytes": shard_bytes,
        }
        res = rc_rebalance(shard_load, cur, k, theta=target, **args)
        gain = res.delta_before - res.delta_after
        if damped and kept_k and res.moves and res.delta_after > theta and gain < theta - low:
            # single-shard moves cannot reach θ here: a global pause for a
            # negligible gain is worse than the imbalance it removes
            res = rc_rebalance(shard_load, cur, k, theta=math.inf, **args)
            totals["held_small_gain"] += 1
        for t, node in units.items():
            placement[unit_id(op, t)] = node
        for info in group:
            part = res.tasks[info.index * info.shards : (info.index + 1) * info.shards]
            tables[info.instance] = tuple(unit_id(op, t) for t in part)
        totals["shard_moves"] += len(res.moves)
        totals["remote_moves"] += res.remote_moves
        totals["migration_bytes"] += res.migrated_bytes
        totals["delta_before"] = max(totals["delta_before"], res.delta_before)
        totals["delta_after"] = max(totals["delta_after"], res.delta_after)
    new = assemble(
        {**others(plan.allocation.cores, insts), **{op: int(cores[op]) for op in by_op}},
        placement,
        {**others(plan.routing.tables, insts), **tables},
    )
    totals["cores"] = {op: int(cores[op]) for op in by_op}
    totals["theta"] = theta
    totals["theta_low"] = low
    return StepResult(new, totals)


def rc_target(context: PlanningContext, theta: float, *, damped: bool = False) -> float:
    """δ an RC repartitioning aims at: ``theta_low`` if given, else θ (the paper's
    balancing), or ``1 + (θ − 1)/2`` for the damped variant; never above θ."""
    low = RC_SETTINGS.read(context.params)["theta_low"]
    if low is None:  # derived: see the setting's description
        low = 1.0 + (theta - 1.0) / 2.0 if damped else theta
    if low > theta:
        raise StreamscaleError(f"must be <= theta ({theta:g}), got {low:g}", item="theta_low")
    return max(low, 1.0)


#: RC's settings: Elasticutor's plus the δ a repartitioning aims at.
RC_SETTINGS = SETTINGS.merged(
    Schema(
        "rc",
        Setting(
            "theta_low",
            float,
            None,
            "δ an RC repartitioning aims at (default: theta; 'rc-damped': 1 + (theta - 1) / 2)",
            low=1.0,
        ),
    ),
    group="rc",
)


@register(
    "balancer",
    "rc",
    "resource-centric: operator-level units, shards repartitioned",
    params=RC_SETTINGS,
)
def rc_step(context: PlanningContext, plan: Plan) -> StepResult:
    """Operator-level repartitioning across all of an operator's units (paper 000, §5).

    Examples
    --------
    The instances of :func:`~streamscale.planning.adapters.elasticutor.queueing_step`'s
    example hold 3 + 2 cores after the placer. RC turns them into five operator-level units
    ``agg#0 … agg#4`` and repartitions all eight shards of 0.375 cores over them: 2, 2, 2, 1,
    1 shards (δ = 0.75/0.6 = 1.25, the best five units allow). Every shard that changes node
    moves its 800/8 = 100 bytes.

    >>> from streamscale.model import Cluster, Edge, Operator, Plan, Topology
    >>> from streamscale.planning.registry import PlanningContext, compose
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("out", "sink"),
    ...                             Operator("agg", key="k", cost_ms=10.0, instances=2, shards=4,
    ...                                      state_bytes=800)],
    ...                       [Edge("src", "agg", "key"), Edge("agg", "out")])
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=4), rate=300.0,
    ...                       params={"latency_target_ms": 20.0}, seed=0)
    >>> plan, _, _ = compose(ctx, steps=[("allocator", "queueing"), ("placer", "elasticutor")])
    >>> r = rc_step(ctx, plan)
    >>> sorted(set(r.plan.routing.tables["agg[0]"] + r.plan.routing.tables["agg[1]"]))
    ['agg#0', 'agg#1', 'agg#2', 'agg#3', 'agg#4']
    >>> f = r.figures
    >>> f["cores"], f["delta_after"], f["remote_moves"], f["migration_bytes"]
    ({'agg': 5}, 1.25, 5, 500)
    """
    insts, loads = planning_inputs(context)
    return rc_plan(context, plan, operator_cores(plan, insts), insts, loads)
