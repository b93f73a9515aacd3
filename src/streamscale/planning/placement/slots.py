"""VM acquisition and thread → slot mapping (paper 004, §7).

* :func:`acquire` — resource acquisition (§7.1): as many of the largest VMs as fit
  within ρ slots, then the smallest VM covering the rest (``cover``); or as
  §8.2 describes it, the rest in smaller VMs so the slots sum to ρ (``exact``).
* :func:`map_dsm` — Default Storm Mapping (§7.2, Algorithm 4): round-robin.
* :func:`map_rsm` — R-Storm Mapping (§7.3, Algorithm 5): BFS sweeps, one thread
  per task per sweep, VMs by R-Storm's distance, per-VM CPU and per-slot memory;
  within a VM the best-fit slot (§7.3's "best fit packing"; first-fit selectable).
* :func:`map_sam` — Slot Aware Mapping (§7.4, Algorithm 6): full bundles on
  exclusive empty slots, partial bundles on the best-fit slot.
* :func:`map_adding_slots` — the §8.4 procedure: when a resource-aware mapping
  cannot place every thread, acquire one more slot at a time and retry.

Resources are fractions of one slot here (1.0 = 100 %), as in the paper's
pseudo-code, so R-Storm's distance mixes comparable magnitudes. Threads are
units ``f"{task}#{k}"``; slots are ``f"{vm}/{l}"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from streamscale.errors import InfeasibleError, ModelError
from streamscale.model import Cluster, VmType, instance_of, unit_id
from streamscale.model.ids import slot_id
from streamscale.settings import Setting

__all__ = [
    "ACQUISITION",
    "ACQUISITIONS",
    "SLOT_CHOICES",
    "Acquisition",
    "MappingResult",
    "RsmWeights",
    "SlotChoice",
    "TaskDemand",
    "Vm",
    "acquire",
    "map_adding_slots",
    "map_dsm",
    "map_rsm",
    "map_sam",
    "slot_id",
    "vms_from_cluster",
]


_EPS = 1e-9

Acquisition = Literal["cover", "exact"]
ACQUISITIONS: tuple[Acquisition, ...] = ("cover", "exact")

#: The setting, declared once (the planner's schema takes it; defaults below read it).
ACQUISITION = Setting(
    "acquisition",
    str,
    "cover",
    "VMs for ρ slots: largest first, the rest on the smallest VM covering it (§7.1), "
    "or the rest in smaller VMs summing to ρ (§8.2)",
    choices=ACQUISITIONS,
)
SlotChoice = Literal["best-fit", "first-fit", "worst-fit"]
SLOT_CHOICES: tuple[SlotChoice, ...] = ("best-fit", "first-fit", "worst-fit")


@dataclass(frozen=True, slots=True)
class Vm:
    """A VM with ``slots`` resource slots (one core and its share of memory each)."""

    name: str
    slots: int
    kind: str = ""
    rack: str = "r0"
    price_per_hour: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskDemand:
    """One task's threads and what the mappers need to know about them.

    ``cpu1``/``mem1`` are C(1), M(1) (RSM, §7.3); ``bundle`` is τ̂,
    ``bundles`` how many full bundles the allocation sized at ω̂, and
    ``cpu``/``mem`` the task's total needs c_i, m_i (SAM, §7.4). Resources are
    fractions of a slot. ``bundles=None`` reads Algorithm 6 literally: any τ̂
    unmapped threads form a full bundle.
    """

    task: str
    threads: int
    cpu1: float = 0.0
    mem1: float = 0.0
    bundle: int = 1
    cpu: float = 0.0
    mem: float = 0.0
    bundles: int | None = None


@dataclass(frozen=True, slots=True)
class MappingResult:
    """Threads → slots on ``vms``; ``extra_slots`` were added beyond the allocation's ρ."""

    algorithm: str
    vms: tuple[Vm, ...]
    assignment: Mapping[str, str]
    extra_slots: int = 0

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(slot_id(v.name, i) for v in self.vms for i in range(v.slots))

    @property
    def price_per_hour(self) -> float:
        return sum(v.price_per_hour for v in self.vms)

    def per_slot(self) -> dict[str, dict[str, int]]:
        """Slot → task → threads on it (slots in VM order, empty ones included)."""
        out: dict[str, dict[str, int]] = {s: {} for s in self.slots}
        for unit, s in self.assignment.items():
            task = instance_of(unit)
            out[s][task] = out[s].get(task, 0) + 1
        return out


# -- acquisition ------------------------------------------------------------
def acquire(
    slots: int, vm_types: Sequence[VmType], *, reading: Acquisition = "cover"
) -> tuple[Vm, ...]:
    """VMs for ``slots`` slots (paper 004, §7.1 and §8.2).

    As many VMs of the largest size p̂ as fit within ρ (n·p̂ ≤ ρ); then, for the
    rest ρ − n·p̂:

    * ``cover`` (§7.1): the smallest size with at least that many slots — may buy
      slots beyond ρ (7 slots from 4-slot D3s and smaller: D3 + D3);
    * ``exact`` (§8.2: "the largest size VMs (D3) first …, and finally pick a D2
      or a D1 VM for the remaining slot(s)"): the rest in smaller VMs, largest
      that fits first, so the slots sum to ρ (7: D3 + D2 + D1); a rest the
      catalog cannot make up exactly ends with the smallest size covering it.

    Ties between equally sized types go to the cheaper one. VMs are named
    ``f"{type}-{j}"``, j counted from 1.

    Examples
    --------
    Seven slots from 1-, 2- and 4-slot VMs: one 4-slot VM fits within ρ, and the other
    three slots are covered by a second 4-slot VM, or made up exactly as 2 + 1.

    >>> from streamscale.model import VmType
    >>> types = [VmType("D1", 1, 3.5, 0.1), VmType("D2", 2, 7.0, 0.2), VmType("D3", 4, 14.0, 0.4)]
    >>> [v.name for v in acquire(7, types)]
    ['D3-1', 'D3-2']
    >>> [v.name for v in acquire(7, types, reading="exact")]
    ['D3-1', 'D2-2', 'D1-3']
    """
    if not vm_types:
        raise ModelError("cluster has no vm_types to acquire from", item="cluster")
    if reading not in ACQUISITIONS:
        raise ModelError("must be 'cover' or 'exact'", item=f"acquisition {reading}")
    if slots <= 0:
        return ()
    by_size = sorted(vm_types, key=lambda v: (v.slots, v.price_per_hour))
    largest = max(by_size, key=lambda v: (v.slots, -v.price_per_hour))
    n, rest = divmod(slots, largest.slots)
    chosen = [largest] * n
    if reading == "exact":
        for size in sorted({v.slots for v in by_size}, reverse=True):
            kind = next(v for v in by_size if v.slots == size)
            while 0 < size <= rest:
                chosen.append(kind)
                rest -= size
    if rest:
        chosen.append(next(v for v in by_size if v.slots >= rest))
    return tuple(
        Vm(f"{t.name}-{j + 1}", t.slots, t.name, "r0", t.price_per_hour)
        for j, t in enumerate(chosen)
    )


def vms_from_cluster(cluster: Cluster) -> tuple[Vm, ...]:
    """The cluster's existing nodes as VMs (a node's cores are its slots)."""
    if not cluster.nodes:
        raise ModelError("cluster has no nodes to map onto", item="cluster")
    return tuple(Vm(n.name, n.cores, "node", n.rack, 0.0) for n in cluster.nodes)


def _threads(demands: Sequence[TaskDemand]) -> list[str]:
    return [unit_id(d.task, k) for d in demands for k in range(d.threads)]


# -- DSM -------------------------------------------------------------------
def map_dsm(demands: Sequence[TaskDemand], vms: Sequence[Vm]) -> MappingResult:
    """Default Storm Mapping (paper 004, §7.2, Algorithm 4).

    Threads, task by task in the given (topological) order, go round-robin over
    the slots listed VM by VM; blind to resources, so it never fails.

    Examples
    --------
    The MBA allocation of :func:`~streamscale.planning.allocation.model_based.allocate_mba`'s
    example: 7 ``parse`` threads, two full bundles of τ̂ = 3 and one thread at 2 % CPU and
    1 % memory; one thread alone needs C(1) = 20 % and M(1) = 10 % of a slot.
    DSM deals the threads round-robin over the four slots of two 2-slot VMs.

    >>> d = [TaskDemand("parse", 7, cpu1=0.2, mem1=0.1, bundle=3, cpu=2.02, mem=2.01, bundles=2)]
    >>> map_dsm(d, (Vm("vm0", 2), Vm("vm1", 2))).per_slot()
    {'vm0/0': {'parse': 2}, 'vm0/1': {'parse': 2}, 'vm1/0': {'parse': 2}, 'vm1/1': {'parse': 1}}
    """
    slots = [slot_id(v.name, i) for v in vms for i in range(v.slots)]
    if not slots:
        raise InfeasibleError("no slots to map onto", item="dsm")
    units = _threads(demands)
    return MappingResult("dsm", tuple(vms), {u: slots[n % len(slots)] for n, u in enumerate(units)})


# -- RSM -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RsmWeights:
    """R-Storm's distance coefficients w_C, w_M, w_N (paper 004, §7.3)."""

    cpu: float = 1.0
    memory: float = 1.0
    network: float = 1.0


def _nw_dist(a: Vm, b: Vm) -> float:
    if a.name == b.name:
        return 0.0
    return 0.5 if a.rack == b.rack else 1.0


def map_rsm(
    demands: Sequence[TaskDemand],
    vms: Sequence[Vm],
    *,
    weights: RsmWeights = RsmWeights(),
    slot_choice: SlotChoice = "best-fit",
) -> MappingResult:
    """R-Storm Mapping (paper 004, §7.3, Algorithm 5).

    Sweeps the tasks in topological order, mapping one thread of each pending
    task per sweep. VMs are tried in ascending distance
    d = sqrt(w_C (C_j − c̄)² + w_M (M_j − m̄)² + w_N NWDist(v̂, v_j)²) from the
    reference VM v̂ (the last one mapped to); a VM qualifies when it has c̄ CPU
    left in total and some slot has m̄ memory left. Resources grow linearly per
    thread (c̄ = C(1), m̄ = M(1)).

    Algorithm 5 (line 14) takes any slot of the VM with m̄ memory left;
    ``slot_choice`` says which. ``best-fit`` (the default) takes the slot with
    the least memory left that still holds m̄, as §7.3's prose reads: "Thus
    RSM tries to perform a network-aware best fit packing to minimize the
    number of slots" (§7.3, last sentence of the walk-through of Fig. 4; §8.5.2
    speaks of RSM's "best-fit distance measure" too). ``first-fit`` takes the
    lowest-numbered such slot (the pseudo-code's "any slot" read as the first),
    ``worst-fit`` the one with the most memory left. Ties go to the
    lowest-numbered slot.

    Raises
    ------
    InfeasibleError
        "insufficient resources", naming the task, when no VM qualifies.

    Examples
    --------
    The MBA allocation of :func:`~streamscale.planning.allocation.model_based.allocate_mba`'s
    example: 7 ``parse`` threads, two full bundles of τ̂ = 3 and one thread at 2 % CPU and
    1 % memory; one thread alone needs C(1) = 20 % and M(1) = 10 % of a slot.
    Given C(1) and M(1) per thread (Algorithm 5 as written; the registry's ``rsm`` placer
    gives MBA's threads c_i/τ_i instead), RSM's linear model sees 7 × 20 % = 1.4 of
    ``vm0``'s 2 cores and 7 × 10 % of one slot's memory, so best fit packs every thread
    into one slot, where the model says they sustain 220 t/s, not 450
    (:func:`~streamscale.planning.prediction.predict`).

    >>> d = [TaskDemand("parse", 7, cpu1=0.2, mem1=0.1, bundle=3, cpu=2.02, mem=2.01, bundles=2)]
    >>> map_rsm(d, (Vm("vm0", 2), Vm("vm1", 2))).per_slot()
    {'vm0/0': {'parse': 7}, 'vm0/1': {}, 'vm1/0': {}, 'vm1/1': {}}
    """
    if not vms:
        raise InfeasibleError("no VMs to map onto", item="rsm")
    if slot_choice not in SLOT_CHOICES:
        raise ModelError(f"unknown slot choice {slot_choice!r}", item="slot_choice")
    cpu = {v.name: float(v.slots) for v in vms}
    mem = {v.name: float(v.slots) for v in vms}
    slot_mem = {v.name: [1.0] * v.slots for v in vms}
    left = {d.task: d.threads for d in demands}
    done = dict.fromkeys(left, 0)
    ref = vms[0]
    out: dict[str, str] = {}
    while any(left.values()):
        for d in demands:
            if not left[d.task]:
                continue
            order = sorted(
                range(len(vms)),
                key=lambda j: (
                    math.sqrt(
                        weights.cpu * (cpu[vms[j].name] - d.cpu1) ** 2
                        + weights.memory * (mem[vms[j].name] - d.mem1) ** 2
                        + weights.network * _nw_dist(ref, vms[j]) ** 2
                    ),
                    j,
                ),
            )
            target: tuple[Vm, int] | None = None
            for j in order:
                v = vms[j]
                if cpu[v.name] + _EPS < d.cpu1:
                    continue
                free = [i for i, m in enumerate(slot_mem[v.name]) if m + _EPS >= d.mem1]
                if free:
                    target = (v, _pick_slot(free, slot_mem[v.name], slot_choice))
                    break
            if target is None:
                raise InfeasibleError("insufficient resources", item=f"task {d.task}")
            v, i = target
            out[unit_id(d.task, done[d.task])] = slot_id(v.name, i)
            cpu[v.name] -= d.cpu1
            mem[v.name] -= d.mem1
            slot_mem[v.name][i] -= d.mem1
            done[d.task] += 1
            left[d.task] -= 1
            ref = v
    return MappingResult("rsm", tuple(vms), out)


def _pick_slot(free: Sequence[int], memory: Sequence[float], choice: SlotChoice) -> int:
    """The slot of ``free`` that ``choice`` takes (ties: the lowest-numbered)."""
    if choice == "best-fit":
        return min(free, key=lambda i: (memory[i], i))
    if choice == "worst-fit":
        return min(free, key=lambda i: (-memory[i], i))
    return free[0]


# -- SAM -------------------------------------------------------------------
def map_sam(demands: Sequence[TaskDemand], vms: Sequence[Vm]) -> MappingResult:
    """Slot Aware Mapping (paper 004, §7.4, Algorithm 6).

    Sweeps the tasks in topological order. A task with at least τ̂ unmapped
    threads (and, when ``bundles`` is given, a full bundle not yet mapped — a
    group of τ̂ threads the allocation sized to serve less than ω̂ is partial,
    or a lightly loaded one-thread task with τ̂ = 1 would take a whole slot)
    maps one full bundle of τ̂ threads to an empty slot of the current
    VM (else of the following VMs), taking 100 % of it and reducing c_i, m_i by
    1.0; otherwise its remaining (partial) threads go together to the best-fit
    slot — the one with the least CPU + memory left that still holds c_i, m_i.

    Raises
    ------
    InfeasibleError
        "insufficient resources", naming the task, when no slot qualifies.

    Examples
    --------
    The MBA allocation of :func:`~streamscale.planning.allocation.model_based.allocate_mba`'s
    example: 7 ``parse`` threads, two full bundles of τ̂ = 3 and one thread at 2 % CPU and
    1 % memory; one thread alone needs C(1) = 20 % and M(1) = 10 % of a slot.
    SAM gives each full bundle an empty slot and the partial thread the best-fit slot left;
    with a single 2-slot VM the partial thread finds no room.

    >>> d = [TaskDemand("parse", 7, cpu1=0.2, mem1=0.1, bundle=3, cpu=2.02, mem=2.01, bundles=2)]
    >>> map_sam(d, (Vm("vm0", 2), Vm("vm1", 2))).per_slot()
    {'vm0/0': {'parse': 3}, 'vm0/1': {'parse': 3}, 'vm1/0': {'parse': 1}, 'vm1/1': {}}
    >>> map_sam(d, (Vm("vm0", 2),))
    Traceback (most recent call last):
    ...
    streamscale.errors.InfeasibleError: task parse: insufficient resources
    """
    if not vms:
        raise InfeasibleError("no VMs to map onto", item="sam")
    slots = [(j, i) for j, v in enumerate(vms) for i in range(v.slots)]
    c_av = dict.fromkeys(slots, 1.0)
    m_av = dict.fromkeys(slots, 1.0)
    used: set[tuple[int, int]] = set()
    exclusive: set[tuple[int, int]] = set()
    left = {d.task: d.threads for d in demands}
    need = {d.task: (d.cpu, d.mem) for d in demands}
    done = dict.fromkeys(left, 0)
    full = {
        d.task: (d.threads if d.bundles is None else d.bundles * max(1, d.bundle)) for d in demands
    }
    cur = 0
    out: dict[str, str] = {}

    def put(task: str, n: int, s: tuple[int, int]) -> None:
        for _ in range(n):
            out[unit_id(task, done[task])] = slot_id(vms[s[0]].name, s[1])
            done[task] += 1
        left[task] -= n
        used.add(s)

    while any(left.values()):
        for d in demands:
            tau_hat = max(1, d.bundle)
            if left[d.task] >= tau_hat and full[d.task] >= tau_hat:
                full[d.task] -= tau_hat
                order = [(cur + k) % len(vms) for k in range(len(vms))]
                empty = next(
                    ((j, i) for j in order for i in range(vms[j].slots) if (j, i) not in used),
                    None,
                )
                if empty is None:
                    raise InfeasibleError("insufficient resources", item=f"task {d.task}")
                put(d.task, tau_hat, empty)
                c, m = need[d.task]
                need[d.task] = (c - 1.0, m - 1.0)
                c_av[empty] = m_av[empty] = 0.0
                exclusive.add(empty)
                cur = empty[0]
            elif left[d.task] > 0:
                c, m = max(need[d.task][0], 0.0), max(need[d.task][1], 0.0)
                fits = [
                    s
                    for s in slots
                    if s not in exclusive and c_av[s] + _EPS >= c and m_av[s] + _EPS >= m
                ]
                if not fits:
                    raise InfeasibleError("insufficient resources", item=f"task {d.task}")
                best = min(fits, key=lambda s: (c_av[s] + m_av[s], s))
                put(d.task, left[d.task], best)
                c_av[best] -= c
                m_av[best] -= m
                need[d.task] = (0.0, 0.0)
                cur = best[0]
    return MappingResult("sam", tuple(vms), out)


# -- adding slots -------------------------------------------------------------
Mapper = Callable[[Sequence[TaskDemand], Sequence[Vm]], MappingResult]


def map_adding_slots(
    mapper: Mapper,
    demands: Sequence[TaskDemand],
    slots: int,
    vm_types: Sequence[VmType],
    *,
    max_extra: int | None = None,
    acquisition: Acquisition = ACQUISITION.default,
) -> MappingResult:
    """Acquire VMs for ``slots`` and map; on failure add one slot at a time (paper 004, §8.4).

    The result's ``extra_slots`` counts the slots added beyond ``slots``
    (``acquisition`` as in :func:`acquire`; under ``cover`` the VMs may hold
    more slots than that). Gives up after ``max_extra`` additions (default: as
    many as the threads to map).

    Raises
    ------
    InfeasibleError
        When no slot count up to ``slots + max_extra`` works.

    Examples
    --------
    The threads of :func:`map_sam`'s example do not fit the two slots of one D2 VM; with one
    slot more the acquisition covers three slots with a D3, where SAM maps them.

    >>> from streamscale.model import VmType
    >>> types = [VmType("D1", 1, 3.5, 0.1), VmType("D2", 2, 7.0, 0.2), VmType("D3", 4, 14.0, 0.4)]
    >>> d = [TaskDemand("parse", 7, cpu1=0.2, mem1=0.1, bundle=3, cpu=2.02, mem=2.01, bundles=2)]
    >>> r = map_adding_slots(map_sam, d, 2, types)
    >>> r.extra_slots, [v.name for v in r.vms], r.per_slot()["D3-1/2"]
    (1, ['D3-1'], {'parse': 1})
    """
    limit = max_extra if max_extra is not None else max(8, sum(d.threads for d in demands))
    last_err: InfeasibleError | None = None
    tried: set[tuple[int, ...]] = set()
    for extra in range(limit + 1):
        vms = acquire(max(1, slots + extra), vm_types, reading=acquisition)
        shape = tuple(v.slots for v in vms)
        if shape in tried:
            continue
        tried.add(shape)
        try:
            res = mapper(demands, vms)
        except InfeasibleError as exc:
            last_err = exc
            continue
        return MappingResult(res.algorithm, res.vms, res.assignment, extra)
    raise InfeasibleError(
        f"mapping failed even with {limit} extra slots ({last_err})", item="mapping"
    )
