"""Which live Spark executor stands for which planned node (pure; no Spark here).

On a cluster the planning model has one node per executor the job may hold
(``executor-0 … executor-{N-1}``, :func:`~streamscale.runtime.spark.executors.resources.capacity_cluster`).
Executors come and go with ids Spark picks, so the realizer keeps a *slot map*
node → executor id. It is stable: an executor keeps its node while it lives, so the
shards a plan keeps on a node stay on the executor whose worker cache holds them.
New executors take the nodes the plan loads most among those without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

__all__ = ["assign_slots", "keepers_first", "node_demand", "release_order"]


def node_demand(placement: Mapping[str, str], nodes: Sequence[str]) -> dict[str, int]:
    """Units the placement puts on each node of ``nodes`` (nodes outside are ignored)."""
    known = set(nodes)
    counts = Counter(n for n in placement.values() if n in known)
    return {n: counts.get(n, 0) for n in nodes}


def assign_slots(
    previous: Mapping[str, str], alive: Sequence[str], demand: Mapping[str, int]
) -> dict[str, str]:
    """The slot map for the executors ``alive`` now.

    Parameters
    ----------
    previous
        The last slot map (node → executor id).
    alive
        Live executor ids, oldest first.
    demand
        Units per node in the plan about to run, over every node of the model, in
        the model's order.

    Returns
    -------
    node → executor id, every live executor on exactly one node: pairs of
    ``previous`` whose executor lives are kept; the other executors, oldest first,
    take the unmapped nodes with the most units (ties: model order), then the
    remaining nodes in model order.

    Examples
    --------
    >>> assign_slots({"n0": "1"}, ["1", "4"], {"n0": 1, "n1": 0, "n2": 2})
    {'n0': '1', 'n2': '4'}
    """
    live = set(alive)
    out = {n: e for n, e in previous.items() if e in live and n in demand}
    taken = set(out.values())
    free = [e for e in alive if e not in taken]
    order = list(demand)
    rank = {n: i for i, n in enumerate(order)}
    open_nodes = sorted((n for n in order if n not in out), key=lambda n: (-demand[n], rank[n]))
    for node, ex in zip(open_nodes, free, strict=False):
        out[node] = ex
    return out


def keepers_first(alive: Sequence[str], settled: Collection[str]) -> list[str]:
    """``alive`` with the executors ``settled`` before the first batch (warm) first, each
    group in its given order: :func:`release_order` releases newest first, so an executor
    whose registration came in after the settle (a standalone master launches up to
    ``spark.cores.max`` before the first request; under load one registers seconds
    late, with a lower id) goes before the warm ones the run started with.

    >>> keepers_first(["0", "1", "2", "3"], {"2", "3"})
    ['2', '3', '0', '1']
    """
    return sorted(alive, key=lambda e: e not in settled)


def release_order(
    slots: Mapping[str, str], alive: Sequence[str], demand: Mapping[str, int]
) -> list[str]:
    """Live executors in the order scale-in releases them: the fewest planned units
    on their node first (an unused node's executor before any other), newest first
    among equals."""
    node_of = {e: n for n, e in slots.items()}
    age = {e: i for i, e in enumerate(alive)}
    return sorted(alive, key=lambda e: (demand.get(node_of.get(e, ""), 0), -age[e]))


def steer_to_ready(
    units: Sequence[str], chosen: Mapping[str, str], ready: Sequence[str]
) -> dict[str, str]:
    """Unit → executor for a batch that must not run on executors still warming up.

    Parameters
    ----------
    units
        The batch's units, in the order of its partitions (heaviest first).
    chosen
        The executor each unit's node maps to (the slot map; empty when placement is
        not enforced).
    ready
        Executors whose JVM and Python workers are warm, oldest first.

    Returns
    -------
    Every unit on a ready executor: a unit whose chosen executor is ready keeps it;
    each other unit, in order, goes to the ready executor with the fewest units so
    far (ties: the oldest). Empty when no executor is ready (the batch then runs
    wherever Spark puts it).

    Examples
    --------
    >>> steer_to_ready(["a", "b", "c"], {"a": "4", "b": "1", "c": "4"}, ["1", "2"])
    {'b': '1', 'a': '2', 'c': '1'}
    """
    if not ready:
        return {}
    ok = set(ready)
    age = {e: i for i, e in enumerate(ready)}
    out = {u: chosen[u] for u in units if chosen.get(u) in ok}
    load = {e: 0 for e in ready}
    for e in out.values():
        load[e] += 1
    for u in units:
        if u not in out:
            e = min(ready, key=lambda x: (load[x], age[x]))
            out[u] = e
            load[e] += 1
    return out
