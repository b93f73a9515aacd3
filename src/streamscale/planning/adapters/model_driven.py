"""Allocators ``lsa``, ``mba`` and placers ``dsm``, ``rsm``, ``sam`` (paper 004) over the domain model.

An instance is a task (operator) and its units ``f"{op}#{k}"`` are its threads;
``Allocation.slots`` is ρ. Operators find their model by ``task`` (else name)
in ``context.models``; the DAG rate Ω is ``context.rate`` (else the sources' own
rates). Placement maps every thread to a slot id ``f"{vm}/{l}"``.

VMs (``params["vms"]``): ``acquire`` (default when the cluster has
``vm_types``) buys VMs for ρ slots from the catalog (§7.1) and, when a
resource-aware mapping fails, adds one slot at a time (§8.4); ``nodes`` (default
otherwise) maps onto the cluster's nodes as they are and fails when they are
too small. Other params: ``rsm_weight_cpu``/``_memory``/``_network`` (all 1),
``rsm_slot_choice`` (``best-fit``; ``first-fit``, ``worst-fit``: see :func:`map_rsm`),
``resource_limits`` (true: predictions also respect per-VM CPU and per-slot
memory), ``literal_bundles`` (false: see :func:`map_sam`), ``acquisition``
(``cover``: §7.1; ``exact``: §8.2, see :func:`acquire`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamscale.errors import ModelError
from streamscale.model import Allocation, Placement, Plan, Topology
from streamscale.planning.allocation.model_based import (
    AllocationResult,
    allocate,
    bundle_needs,
    model_for,
)
from streamscale.planning.placement.slots import (
    ACQUISITION,
    SLOT_CHOICES,
    MappingResult,
    RsmWeights,
    TaskDemand,
    acquire,
    map_adding_slots,
    map_dsm,
    map_rsm,
    map_sam,
    vms_from_cluster,
)
from streamscale.planning.prediction import RESOURCE_LIMITS, predict
from streamscale.planning.registry import PlanningContext, StepResult, register
from streamscale.settings import Schema, Setting

__all__ = [
    "allocation_figures",
    "demands",
    "dsm_placer",
    "lsa_allocator",
    "map_plan",
    "mba_allocator",
    "placement_figures",
    "rsm_placer",
    "sam_placer",
]

_MAPPERS = {"dsm": map_dsm, "rsm": map_rsm, "sam": map_sam}


def _need_models(context: PlanningContext) -> None:
    if not context.models:
        raise ModelError("no performance models given (use --models FILE)", item="models")


def allocation_figures(res: AllocationResult) -> dict[str, Any]:
    """JSON-able figures of an allocation."""
    return {
        "algorithm": res.algorithm,
        "rate": res.dag_rate,
        "slots": res.slots,
        "threads": res.threads,
        "cpu_percent": {t.task: round(t.cpu, 3) for t in res.tasks},
        "memory_percent": {t.task: round(t.memory, 3) for t in res.tasks},
        "task_rates": {t.task: t.rate for t in res.tasks},
        "total_cpu_percent": round(res.total_cpu, 3),
        "total_memory_percent": round(res.total_memory, 3),
    }


MAPPING_SETTINGS = Schema(
    "placer dsm/rsm/sam",
    Setting(
        "vms",
        str,
        None,
        "acquire VMs from the cluster's VM types, or map onto its nodes "
        "(default: acquire when VM types are given)",
        choices=("acquire", "nodes"),
    ),
    RESOURCE_LIMITS,
    Setting("literal_bundles", bool, False, "SAM's bundles exactly as Algorithm 6 prints them"),
    ACQUISITION,
    Setting("rsm_weight_cpu", float, 1.0, "R-Storm distance weight w_C (§7.3)", low=0.0),
    Setting("rsm_weight_memory", float, 1.0, "R-Storm distance weight w_M (§7.3)", low=0.0),
    Setting("rsm_weight_network", float, 1.0, "R-Storm distance weight w_N (§7.3)", low=0.0),
    Setting(
        "rsm_slot_choice",
        str,
        "best-fit",
        "RSM's slot within the chosen VM: best-fit (§7.3's 'best fit packing'), "
        "first-fit (the lowest-numbered) or worst-fit",
        choices=SLOT_CHOICES,
    ),
)
ALLOCATOR_SETTINGS = Schema("allocator lsa/mba")


def _allocate(name: str, context: PlanningContext, plan: Plan) -> StepResult:
    _need_models(context)
    res = allocate(name, context.topology, context.models, context.rate)
    alloc = Allocation(cores=res.threads, slots=res.slots)
    return StepResult(Plan(alloc, Placement(), plan.routing), allocation_figures(res))


@register(
    "allocator",
    "lsa",
    "paper 004 Linear Scaling Allocation: threads and slots from 1-thread figures",
    params=ALLOCATOR_SETTINGS,
)
def lsa_allocator(context: PlanningContext, plan: Plan) -> StepResult:
    """Algorithm 2 of paper 004 (§6.1) on the context's DAG, models and rate.

    Examples
    --------
    The DAG, model and rate of :func:`~streamscale.planning.allocation.model_based.allocate_lsa`'s
    example: five threads at 90 % CPU, one slot.

    >>> from streamscale.model import (Cluster, Edge, ModelPoint, Operator, PerformanceModel,
    ...                                Plan, Topology)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), models=models, rate=450.0)
    >>> r = lsa_allocator(ctx, Plan())
    >>> r.plan.allocation, r.figures["cpu_percent"]
    (Allocation(cores={'parse': 5}, slots=1), {'parse': 90.0})
    """
    return _allocate("lsa", context, plan)


@register(
    "allocator",
    "mba",
    "paper 004 Model Based Allocation: full-slot thread bundles at the model's peak",
    params=ALLOCATOR_SETTINGS,
)
def mba_allocator(context: PlanningContext, plan: Plan) -> StepResult:
    """Algorithm 3 of paper 004 (§6.2) on the context's DAG, models and rate.

    Examples
    --------
    The DAG, model and rate of :func:`~streamscale.planning.allocation.model_based.allocate_mba`'s
    example: two bundles of three threads and one more thread, 202 % CPU, three slots.

    >>> from streamscale.model import (Cluster, Edge, ModelPoint, Operator, PerformanceModel,
    ...                                Plan, Topology)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), models=models, rate=450.0)
    >>> r = mba_allocator(ctx, Plan())
    >>> r.plan.allocation, r.figures["cpu_percent"]
    (Allocation(cores={'parse': 7}, slots=3), {'parse': 202.0})
    """
    return _allocate("mba", context, plan)


def _which_allocator(
    topology: Topology, models: Mapping[str, Any], threads: Mapping[str, int], rate: float | None
) -> tuple[str, dict[str, tuple[float, float]]]:
    """Which allocator produced ``threads`` (``lsa``, ``mba`` or ``model``) and its c_i, m_i."""
    for alg in ("mba", "lsa"):
        res = allocate(alg, topology, models, rate)
        if {t.task: t.threads for t in res.tasks if t.threads} == {
            k: v for k, v in threads.items() if v
        }:
            return alg, {t.task: (t.cpu, t.memory) for t in res.tasks}
    return "model", {}


def demands(
    topology: Topology,
    models: Mapping[str, Any],
    threads: Mapping[str, int],
    rate: float | None,
    *,
    literal_bundles: bool = MAPPING_SETTINGS["literal_bundles"].default,
) -> list[TaskDemand]:
    """What the mappers need per task (topological order), resources as slot fractions.

    The needs c_i, m_i are the allocator's own: when the threads are exactly
    what MBA (or LSA) allocates for this DAG and rate, its c_i, m_i are used,
    otherwise the model-based :func:`bundle_needs`. RSM's per-thread needs
    (c̄, m̄) are C(1), M(1) (Algorithm 5) except after MBA, whose threads are
    sized by bundle: there each thread gets c_i/τ_i, m_i/τ_i — what an MBA user
    would give Storm's resource-aware scheduler per thread (§8.5 maps MBA's
    hundreds of Blob threads with RSM, which C(1), M(1) could never fit).
    """
    omega = topology.rates(rate)
    unknown = sorted(set(threads) - set(topology.names))
    if unknown:
        raise ModelError("allocation names an unknown task", item=f"instance {unknown[0]}")
    alg, needs = _which_allocator(topology, models, threads, rate)
    out: list[TaskDemand] = []
    for name in topology.topological_order():
        n = threads.get(name, 0)
        if n <= 0:
            continue
        m = model_for(topology, name, models)
        if m is None:
            raise ModelError("no performance model", item=f"operator {name}")
        nb, c, mem = bundle_needs(m, omega[name], n)
        if name in needs:
            c, mem = needs[name]
        c1, m1 = (c / n, mem / n) if alg == "mba" else (m.cpu(1), m.memory(1))
        out.append(
            TaskDemand(
                name,
                n,
                cpu1=c1 / 100.0,
                mem1=m1 / 100.0,
                bundle=m.peak_threads,
                cpu=c / 100.0,
                mem=mem / 100.0,
                bundles=None if literal_bundles else nb,
            )
        )
    return out


def map_plan(algorithm: str, context: PlanningContext, plan: Plan) -> MappingResult:
    """Map the plan's threads with DSM, RSM or SAM onto acquired VMs or the cluster's nodes."""
    _need_models(context)
    threads = dict(plan.allocation.cores)
    if not threads:
        raise ModelError(
            "the plan has no threads: run an allocator (lsa or mba) first", item=algorithm
        )
    params = MAPPING_SETTINGS.read(context.params)
    d = demands(
        context.topology,
        context.models,
        threads,
        context.rate,
        literal_bundles=params["literal_bundles"],
    )
    mapper = _MAPPERS[algorithm]
    if algorithm == "rsm":
        w = RsmWeights(
            params["rsm_weight_cpu"], params["rsm_weight_memory"], params["rsm_weight_network"]
        )

        def mapper(dd, vv):  # type: ignore[no-untyped-def]
            return map_rsm(dd, vv, weights=w, slot_choice=params["rsm_slot_choice"])

    mode = params["vms"] or ("acquire" if context.cluster.vm_types else "nodes")
    if mode == "acquire":
        rho = plan.allocation.slots
        if rho is None:
            raise ModelError("the allocation has no slot count", item=algorithm)
        how = params["acquisition"]
        if algorithm == "dsm":
            return map_dsm(d, acquire(max(1, rho), context.cluster.vm_types, reading=how))
        return map_adding_slots(mapper, d, max(1, rho), context.cluster.vm_types, acquisition=how)
    if mode != "nodes":
        raise ModelError("vms must be 'acquire' or 'nodes'", item=str(mode))
    return mapper(d, vms_from_cluster(context.cluster))


def placement_figures(context: PlanningContext, res: MappingResult) -> dict[str, Any]:
    """JSON-able figures of a mapping: VMs bought, slot map, predicted rate and usage."""
    limits = MAPPING_SETTINGS.read(context.params)["resource_limits"]
    vm_slots = {v.name: v.slots for v in res.vms}
    kw: dict[str, Any] = {"slots": res.slots, "vm_slots": vm_slots, "resource_limits": limits}
    shuffle = predict(context.topology, context.models, res.assignment, **kw)
    weighted = predict(context.topology, context.models, res.assignment, routing="weighted", **kw)
    return {
        "placer": res.algorithm,
        "vms": [
            {"name": v.name, "type": v.kind, "slots": v.slots, "price_per_hour": v.price_per_hour}
            for v in res.vms
        ],
        "vms_bought": sum(1 for v in res.vms if v.kind != "node"),
        "price_per_hour": round(res.price_per_hour, 6),
        "slots_available": len(res.slots),
        "extra_slots": res.extra_slots,
        "slot_map": res.per_slot(),
        "planned_rate": context.rate,
        "predicted_rate": round(shuffle.rate, 6),
        "predicted_limit": shuffle.limit,
        "predicted_rate_weighted": round(weighted.rate, 6),
        "vm_cpu_percent": {k: round(v, 3) for k, v in shuffle.vm_cpu.items()},
        "vm_memory_percent": {k: round(v, 3) for k, v in shuffle.vm_memory.items()},
    }


def _place(name: str, context: PlanningContext, plan: Plan) -> StepResult:
    res = map_plan(name, context, plan)
    slots = (plan.allocation.slots or 0) + res.extra_slots
    alloc = Allocation(plan.allocation.cores, slots)
    notes: tuple[str, ...] = ()
    if res.extra_slots:
        notes = (f"{name}: added {res.extra_slots} slot(s) to place every thread",)
    figures = {"threads": dict(plan.allocation.cores), "slots": slots}
    figures.update(placement_figures(context, res))
    return StepResult(Plan(alloc, Placement(dict(res.assignment)), plan.routing), figures, notes)


@register(
    "placer",
    "dsm",
    "paper 004 Default Storm Mapping: threads round-robin over slots",
    params=MAPPING_SETTINGS,
)
def dsm_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """Algorithm 4 of paper 004 (§7.2).

    Examples
    --------
    MBA's seven threads of :func:`mba_allocator`'s example mapped onto the cluster's two
    2-core nodes (its four slots, as no VM catalog is given). DSM deals the threads over all
    four slots, 2 + 2 + 2 + 1: two threads of a slot sustain 180/2 = 90 t/s each, so the
    task keeps up to 7 × 90 = 630 t/s.

    >>> from streamscale.model import (Cluster, Edge, ModelPoint, Operator, PerformanceModel,
    ...                                Plan, Topology)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), models=models, rate=450.0)
    >>> r = dsm_placer(ctx, mba_allocator(ctx, Plan()).plan)
    >>> r.figures["predicted_rate"], r.figures["slot_map"]["n2/1"]
    (630.0, {'parse': 1})
    """
    return _place("dsm", context, plan)


@register(
    "placer",
    "rsm",
    "paper 004 R-Storm Mapping: resource- and network-aware, one thread per sweep",
    params=MAPPING_SETTINGS,
)
def rsm_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """Algorithm 5 of paper 004 (§7.3).

    Examples
    --------
    MBA's seven threads of :func:`mba_allocator`'s example mapped onto the cluster's two
    2-core nodes (its four slots, as no VM catalog is given). After MBA each thread needs
    c_i/τ_i = 202/7 ≈ 29 % CPU and 201/7 ≈ 29 % memory, so three fit a slot: 3 + 3 + 1 on
    three slots, where the 3-thread slots' threads sustain 220/3 t/s each (7 × 220/3 ≈ 513.3
    t/s, see :func:`~streamscale.planning.prediction.predict`).

    >>> from streamscale.model import (Cluster, Edge, ModelPoint, Operator, PerformanceModel,
    ...                                Plan, Topology)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), models=models, rate=450.0)
    >>> r = rsm_placer(ctx, mba_allocator(ctx, Plan()).plan)
    >>> r.figures["slot_map"], r.figures["predicted_rate"]
    ({'n1/0': {'parse': 3}, 'n1/1': {'parse': 3}, 'n2/0': {'parse': 1}, 'n2/1': {}}, 513.333333)
    """
    return _place("rsm", context, plan)


@register(
    "placer",
    "sam",
    "paper 004 Slot Aware Mapping: model-sized thread bundles on exclusive slots",
    params=MAPPING_SETTINGS,
)
def sam_placer(context: PlanningContext, plan: Plan) -> StepResult:
    """Algorithm 6 of paper 004 (§7.4).

    Examples
    --------
    MBA's seven threads of :func:`mba_allocator`'s example mapped onto the cluster's two
    2-core nodes (its four slots, as no VM catalog is given). SAM gives each full bundle an
    empty slot and the remaining thread the next: 3 + 3 + 1 on three slots, sustaining 7 ×
    220/3 ≈ 513.3 t/s (:func:`~streamscale.planning.prediction.predict`).

    >>> from streamscale.model import (Cluster, Edge, ModelPoint, Operator, PerformanceModel,
    ...                                Plan, Topology)
    >>> from streamscale.planning.registry import PlanningContext
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> ctx = PlanningContext(topo, Cluster.uniform(2, cores=2), models=models, rate=450.0)
    >>> r = sam_placer(ctx, mba_allocator(ctx, Plan()).plan)
    >>> r.figures["slot_map"], r.figures["predicted_rate"]
    ({'n1/0': {'parse': 3}, 'n1/1': {'parse': 3}, 'n2/0': {'parse': 1}, 'n2/1': {}}, 513.333333)
    """
    return _place("sam", context, plan)
