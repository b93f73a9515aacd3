"""Traffic-aware routing: shards to units, balanced, with communicating shards on one node.

Once tasks are placed (paper 001's TD/TL, paper 002's GMA, paper 004's mappers),
which shard each task serves decides which shard pairs talk across nodes: with
two keyed operators sharing a key, shard ``g`` of the upstream operator feeds
only shard ``g`` of the downstream one, so routing ``g`` of both to units on the
same node keeps that traffic local (ALBIC's collocation, paper 003 §4.3.2, for
units instead of nodes). Load stays balanced as Elasticutor balances it (paper
000, §3.1): no unit is filled above ``θ ×`` the mean of its pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamscale.planning.balancing.shard_balance import THETA

__all__ = ["PoolRouting", "route_pool"]


@dataclass(frozen=True, slots=True)
class PoolRouting:
    """Units chosen per shard of one pool, and the pool's δ = max / mean unit load."""

    units: tuple[str, ...]
    delta: float
    moves: int


def route_pool(
    loads: Sequence[float],
    units: Sequence[str],
    unit_node: Mapping[str, str],
    *,
    preferred: Sequence[str | None],
    current: Sequence[str | None],
    theta: float = THETA.default,
) -> PoolRouting:
    """Route every shard of a pool to one of ``units``, preferring its partner's node.

    Shards are taken heaviest first (ties by index). Each goes to, in order: its
    current unit when that is on its ``preferred`` node (or it has none) and fits;
    the least-loaded unit on the preferred node that fits; its current unit if it
    fits; the least-loaded unit. A unit fits while its load stays within
    ``θ × mean`` (mean = total / units); loads all zero count every shard as one.

    Parameters
    ----------
    loads
        Load of each shard of the pool (any unit).
    units
        The units the pool's shards may go to (non-empty).
    unit_node
        Node of each unit.
    preferred
        Per shard, the node of the shard it exchanges most traffic with (``None``: none).
    current
        Per shard, its unit in the plan in force (``None`` or an unknown unit: none).
    theta
        Balance bound, ≥ 1.

    Examples
    --------
    Two units, ``u0`` on node ``a`` and ``u1`` on ``b``; a unit fits up to 1.2 × 3 = 3.6.
    Shard 0 (load 2) talks to a shard on ``b`` and moves to ``u1``; shard 3 (load 2, no
    partner) would overfill ``u1`` and goes to ``u0``; shards 1 and 2 stay. Both units end
    at 3.

    >>> r = route_pool([2.0, 1.0, 1.0, 2.0], ["u0", "u1"], {"u0": "a", "u1": "b"},
    ...                preferred=["b", "a", None, None], current=["u0", "u0", "u1", "u1"])
    >>> r.units, r.delta, r.moves
    (('u1', 'u0', 'u1', 'u0'), 1.0, 2)
    """
    if not units:
        raise ValueError("a pool needs at least one unit")
    w = [float(x) for x in loads]
    if sum(w) <= 0:
        w = [1.0] * len(w)
    cap = theta * sum(w) / len(units) + 1e-12
    pos = {u: i for i, u in enumerate(units)}
    known = set(units)
    by_node: dict[str, list[str]] = {}
    for u in units:
        by_node.setdefault(unit_node[u], []).append(u)
    load = dict.fromkeys(units, 0.0)
    out: list[str] = [""] * len(w)
    for s in sorted(range(len(w)), key=lambda i: (-w[i], i)):
        cur = current[s] if current[s] in known else None
        pref = preferred[s]

        def fits(u: str, s: int = s) -> bool:
            return load[u] + w[s] <= cap

        choice: str | None = None
        if cur is not None and (pref is None or unit_node[cur] == pref) and fits(cur):
            choice = cur
        if choice is None and pref is not None:
            near = [u for u in by_node.get(pref, ()) if fits(u)]
            if near:
                choice = min(near, key=lambda u: (load[u], pos[u]))
        if choice is None and cur is not None and fits(cur):
            choice = cur
        if choice is None:
            choice = min(units, key=lambda u: (load[u], pos[u]))
        out[s] = choice
        load[choice] += w[s]
    mean = sum(load.values()) / len(units)
    delta = max(load.values()) / mean if mean > 0 else 1.0
    moves = sum(1 for s in range(len(w)) if current[s] is not None and current[s] != out[s])
    return PoolRouting(tuple(out), delta, moves)
