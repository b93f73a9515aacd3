"""Resource-centric (RC) baseline: operator-level scaling and key repartitioning.

Paper 000 (Elasticutor), §2.2 and §5: in the resource-centric paradigm an
operator scales by changing its number of tasks, and load is balanced by
repartitioning its key space across all of them, so shards move between
instances and their state migrates whenever source and destination tasks sit on
different nodes. For a fair comparison the paper gives RC the same performance
model, the same balancing algorithm and the same intra-process state sharing as
Elasticutor; this module does the same: the §3.1 balancing rounds run over the
operator's ``k`` units and every global shard, and moves are charged their
state bytes when they cross nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamscale.errors import ModelError
from streamscale.planning.balancing.shard_balance import THETA, balance_shards

__all__ = ["RcResult", "place_units", "rc_rebalance"]


@dataclass(frozen=True, slots=True)
class RcResult:
    """Outcome of :func:`rc_rebalance`.

    ``tasks`` maps every global shard of the operator to a unit index; ``moves``
    lists ``(shard, old_unit, new_unit)``; ``migrated_bytes`` and ``remote_moves``
    count only moves whose state changes node.
    """

    tasks: tuple[int, ...]
    moves: tuple[tuple[int, int | None, int], ...]
    delta_before: float
    delta_after: float
    migrated_bytes: int
    remote_moves: int


def place_units(
    current: Mapping[str, Mapping[int, str]],
    k: Mapping[str, int],
    free: Mapping[str, int],
    *,
    order: Sequence[str],
) -> dict[str, dict[int, str]]:
    """Nodes for units ``0 … k−1`` of every operator.

    First every operator keeps its surviving units where they are (while the node
    has room), then new units go to the node with the most free cores (ties: the
    first in ``order``); keeping before adding lets one operator grow into cores
    another releases. ``free`` counts cores not used by anything else; when none
    is left the least-subscribed node is oversubscribed.
    """
    left = {n: int(free.get(n, 0)) for n in order}
    out: dict[str, dict[int, str]] = {op: {} for op in k}
    for op, kk in k.items():
        for t in range(kk):
            node = current.get(op, {}).get(t)
            if node is not None and left.get(node, 0) > 0:
                out[op][t] = node
                left[node] -= 1
    rank = {n: i for i, n in enumerate(order)}
    for op, kk in k.items():
        for t in range(kk):
            if t not in out[op]:
                node = max(order, key=lambda n: (left[n], -rank[n]))
                out[op][t] = node
                left[node] -= 1
    return out


def rc_rebalance(
    loads: Sequence[float] | np.ndarray,
    current: Sequence[int | None],
    k: int,
    *,
    old_nodes: Sequence[str | None],
    unit_nodes: Mapping[int, str],
    shard_bytes: Sequence[int] | np.ndarray,
    theta: float = THETA.default,
) -> RcResult:
    """Repartition an operator's shards over its ``k`` units (paper 000, §5 RC baseline).

    Parameters
    ----------
    loads
        Load of every global shard of the operator.
    current
        Current unit of each shard (``None``/``≥ k``: its unit is gone).
    k
        Units after the change.
    old_nodes
        Node holding each shard's state now (``None`` when unknown: counted remote).
    unit_nodes
        Node of each new unit.
    shard_bytes
        State size of each shard.
    theta
        Target imbalance δ over the operator's units.

    Examples
    --------
    The balancing of :func:`~streamscale.planning.balancing.shard_balance.balance_shards`'s
    example, now charged by node: shard 1 moves from ``a`` to ``b`` and shard 3 from the
    removed unit's node ``c`` to ``b``, both remote (20 + 40 bytes).

    >>> r = rc_rebalance([4.0, 1.0, 1.0, 2.0], [0, 0, 1, None], 2,
    ...                  old_nodes=["a", "a", "b", "c"], unit_nodes={0: "a", 1: "b"},
    ...                  shard_bytes=[10, 20, 30, 40], theta=1.2)
    >>> r.tasks, r.delta_after, r.migrated_bytes, r.remote_moves
    ((0, 1, 1, 1), 1.0, 60, 2)
    """
    z = len(current)
    if len(old_nodes) != z or len(shard_bytes) != z:
        raise ModelError("old_nodes and shard_bytes need one entry per shard", item="rc")
    if set(range(k)) - set(unit_nodes):
        raise ModelError("every unit needs a node", item="rc")
    res = balance_shards(loads, current, k, theta=theta)
    migrated = remote = 0
    for s, _, new in res.moves:
        if old_nodes[s] != unit_nodes[new]:
            migrated += int(shard_bytes[s])
            remote += 1
    return RcResult(res.tasks, res.moves, res.delta_before, res.delta_after, migrated, remote)
