"""Cores to hold for a plan whose units may share cores.

A plan gives every keyed instance at least one unit (one Spark task per batch), and
Elasticutor's queueing model sizes each instance in whole cores (paper 000, §4.1), so a
job of ``E`` instances asks for at least ``E`` cores however little load it carries: at
a base load of two cores of work, eight instances held eight cores. On a runtime whose
cores are bought (executors requested from a cluster manager) a unit is a task that
queues on whatever cores exist, so the cores worth holding are the units' *work*,
packed: units whose loads sum to at most a utilisation bound share a core
(first-fit decreasing bin packing; a unit busier than the bound has a core of its own,
it cannot use more). The count is the plan's :attr:`Allocation.slots` — the physical
slots its units run on, as in paper 004's threads-to-slots mapping — and the executors
follow it; which shards share a Spark task in a batch is decided at the batch boundary
by folding the plan's units onto the ready cores, so state stays exactly where the
routing tables say.

Cores are bought in groups: a Spark executor of ``g`` cores runs any ``g`` of its
tasks at once, whichever cores they land on. Packed core by core, units of 1.4 cores of
work at a bound of 0.72 needed three cores, and three cores were two executors of two —
four cores where one executor's two hold the work. With ``group`` = ``g`` the units are
packed onto executors (a bin holds ``g`` × the bound of work; a unit above the bound
fills one of its cores) and the count is whole executors' cores.

Scale-in is damped: fewer cores are held only when the units also fit at
``scale_in_margin`` × the bound (the setting :data:`SCALE_IN_MARGIN`), so a load at a
packing edge does not flap. At 0.8 a job of one 2-core executor at a 0.9 bound took a
second at 83 tuples/s of 20 ms and gave it back only below 66; in a replay of a day's
traffic (Twitter volume, the ``minutes`` deployment) two executors stood for 85 of 360 s
while the rate needed one, much of it inside that band.

On a micro-batch runtime the bound is also shared with each batch's fixed cost
(:func:`~streamscale.model.snapshot.batch_headroom`): a batch lasts its overhead ``F``
plus its busiest core's work, so a core loaded at ``u`` of every cycle settles at a
cycle of ``F / (1 − u)``; at ``u`` = 0.9 and a 0.6 s overhead that is 6 s against a 2 s
trigger, and every tuple waits for it.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from streamscale.model import Allocation, Plan
from streamscale.settings import Setting

__all__ = [
    "SCALE_IN_MARGIN",
    "held_cores",
    "pack_units",
    "shared_slots",
    "unit_demand",
    "with_slots",
]

#: The share of the packing bound the units must also fit for fewer cores to be held.
SCALE_IN_MARGIN = Setting(
    "scale_in_margin",
    float,
    0.9,
    "with share_cores, fewer cores are held only when the units also fit at this share "
    "of the packing bound (damps flapping at a packing edge)",
    low=0.0,
    high=1.0,
    low_open=True,
)


def pack_units(demand: Sequence[float], *, capacity: float, group: int = 1) -> int:
    """Cores that host units of the given demand (cores of work each), at most ``capacity``
    of work per shared core: first-fit decreasing into bins of ``group`` cores (an
    executor's: ``group × capacity`` of work each); a unit above ``capacity`` fills a core
    of its own (it cannot use more).

    With ``group`` 1: at least 1 when there is any unit, never more than the units;
    else a multiple of ``group``, and never more than the core-by-core packing rounded
    up to whole groups (first-fit decreasing is not monotone: the better of the two).

    Examples
    --------
    >>> pack_units([0.25] * 8, capacity=0.9)  # three per core: 0.75, 0.75, 0.5
    3
    >>> pack_units([1.2, 0.5, 0.5, 0.3], capacity=0.9)  # 1.2 | 0.5 + 0.3 | 0.5
    3
    >>> pack_units([0.25] * 6, capacity=0.8, group=2)  # 1.5 on one executor's 1.6
    2
    >>> pack_units([1.2, 0.5, 0.5, 0.3], capacity=0.9, group=2)  # 1.2 → 0.9, + 0.5 | 0.8
    4
    """
    if not capacity > 0:
        raise ValueError("capacity must be > 0")
    if group < 1:
        raise ValueError("group must be >= 1")
    packed = _first_fit(demand, capacity, group) * group
    if group == 1:
        return packed
    by_core = _first_fit(demand, capacity, 1)
    return min(packed, group * math.ceil(by_core / group))


def _first_fit(demand: Sequence[float], capacity: float, group: int) -> int:
    """Bins of ``group × capacity`` of work, first-fit decreasing; a unit above
    ``capacity`` weighs ``capacity`` (one core), one below 1e-9 weighs nothing."""
    size = group * capacity
    bins: list[float] = []
    for d in sorted((max(0.0, float(x)) for x in demand), reverse=True):
        w = min(d, capacity) if d >= 1e-9 else 0.0
        for i, used in enumerate(bins):
            if used + w <= size + 1e-12:
                bins[i] = used + w
                break
        else:
            bins.append(w)
    return len(bins)


def unit_demand(
    plan: Plan,
    instance: str,
    cores_of_work: float,
    shard_load: np.ndarray | Sequence[float],
) -> dict[str, float]:
    """``cores_of_work`` of ``instance`` split over its units in ``plan`` by the load of
    the shards each unit's routing entry holds (equally per shard when no shard shows load).

    >>> from streamscale.model import Placement, Routing
    >>> p = Plan(Allocation({"op[0]": 2}), Placement(),
    ...          Routing({"op[0]": ("op[0]#0", "op[0]#0", "op[0]#1", "op[0]#1")}))
    >>> unit_demand(p, "op[0]", 1.0, [0.3, 0.1, 0.1, 0.0])
    {'op[0]#0': 0.8, 'op[0]#1': 0.2}
    """
    table = plan.routing.tables.get(instance, ())
    if not table:
        return {}
    load = np.asarray(shard_load, dtype=float)
    if load.size != len(table) or not float(load.clip(min=0).sum()) > 0:
        load = np.ones(len(table))
    load = load.clip(min=0)
    total = float(load.sum())
    out: dict[str, float] = {}
    for unit, x in zip(table, load, strict=True):
        out[unit] = out.get(unit, 0.0) + max(0.0, cores_of_work) * float(x) / total
    return {u: round(v, 12) for u, v in out.items()}


def shared_slots(
    demand: Sequence[float],
    *,
    capacity: float,
    current: int | None,
    scale_in_margin: float = SCALE_IN_MARGIN.default,
    group: int = 1,
) -> int:
    """Cores to hold for units of ``demand``: :func:`pack_units` at ``capacity`` when that
    is at least ``current`` (or there is none); else no fewer than the packing at
    ``scale_in_margin × capacity`` (and never more than ``current``): scale-in waits until
    the units fit with room to spare. ``group``: cores bought together (:func:`pack_units`).

    >>> shared_slots([0.25] * 8, capacity=0.9, current=None)
    3
    >>> shared_slots([0.3] * 8, capacity=0.9, current=3)  # 0.9 per core fits 3 at 0.9 only
    3
    >>> shared_slots([0.3] * 8, capacity=0.9, current=4)  # at 0.81: two per core, 4
    4
    >>> shared_slots([0.26] * 8, capacity=0.9, current=4)  # at 0.81: three per core, 3
    3
    >>> shared_slots([0.26] * 8, capacity=0.9, current=4, scale_in_margin=0.8)  # 0.72: 4
    4
    """
    up = pack_units(demand, capacity=capacity, group=group)
    if current is None or up >= current:
        return up
    down = pack_units(demand, capacity=capacity * scale_in_margin, group=group)
    return min(current, max(up, down))


def held_cores(allocation: Allocation) -> int:
    """Cores a runtime holds for ``allocation``: its :attr:`~Allocation.slots` when units
    share cores (never more than the units), else one per unit."""
    if allocation.slots is not None and allocation.slots > 0:
        return min(allocation.slots, allocation.total)
    return allocation.total


def with_slots(plan: Plan, slots: int) -> Plan:
    """``plan`` holding ``slots`` cores for its units."""
    return Plan(Allocation(plan.allocation.cores, slots), plan.placement, plan.routing)
