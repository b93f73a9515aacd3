"""Which keyed operators of a job graph run fused in a leader's stage (see
:mod:`~streamscale.runtime.spark.keyed.agg.chain`).

:func:`fused_chains` reads the graph once: a declarative aggregation whose only input is
a declarative aggregation with the same key columns, instances and shards, that feeds
nothing else, is its follower; followers chain. :func:`offer` decides per batch how far
each chain fuses: as long as the followers' partition maps group the shards as the
leader's and their units are pinned alike; the rest of the chain runs operator by
operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.keyed.agg.chain import partition_remap, same_places

__all__ = ["fused_chains", "offer"]


def _agg(graph: JobGraph, name: str) -> Any:
    from streamscale.runtime.spark.keyed.agg.spec import Aggregation

    node = graph.nodes[name]
    return node.fn if node.kind == "keyed" and isinstance(node.fn, Aggregation) else None


def _follows(graph: JobGraph, leader: str, name: str) -> bool:
    a, b = _agg(graph, leader), _agg(graph, name)
    if a is None or b is None or graph.nodes[name].inputs != (leader,):
        return False
    if graph.consumers[leader] != (name,) or tuple(a.keys) != tuple(b.keys):
        return False
    op_a, op_b = graph.topology.operator(leader), graph.topology.operator(name)
    if (op_a.instances, op_a.shards) != (op_b.instances, op_b.shards):
        return False
    return b.window is None and b.mode == "update" and b.time_mode is None


def fused_chains(graph: JobGraph, *, enabled: bool = True) -> dict[str, tuple[str, ...]]:
    """Each leader and its followers, in order (a leader with none is left out)."""
    if not enabled:
        return {}
    chains: dict[str, tuple[str, ...]] = {}
    taken: set[str] = set()
    for name in graph.keyed:
        if name in taken:
            continue
        chain: list[str] = []
        last = name
        while len(graph.consumers[last]) == 1 and _follows(graph, last, graph.consumers[last][0]):
            last = graph.consumers[last][0]
            chain.append(last)
        if chain:
            chains[name] = tuple(chain)
            taken.update(chain)
    return chains


def offer(
    leader_pmap: Any,
    followers: tuple[str, ...],
    pmap_of: Callable[[str], Any],
    placed_of: Callable[[str, Any], Mapping[str, Any] | None],
    leader_placed: Mapping[str, Any] | None,
) -> list[tuple[str, Any, tuple[int, ...]]]:
    """The followers that fuse this batch, in order, each with its partition map and its
    partition for each of the leader's: up to the first whose map groups the shards
    apart from the leader's, or whose units are pinned elsewhere."""
    out = []
    for name in followers:
        pmap = pmap_of(name)
        remap = partition_remap(leader_pmap, pmap)
        if remap is None:
            break
        placed = placed_of(name, pmap)
        if not same_places(leader_placed, placed, leader_pmap.units, pmap.units, remap):
            break
        out.append((name, pmap, remap))
    return out
