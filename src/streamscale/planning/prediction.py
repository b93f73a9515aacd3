"""Predicting what an allocation + mapping sustains (paper 004, §8.5).

Given threads per task and their slots, the performance models predict the
highest stable DAG input rate and the CPU % and memory % of every VM:

* With **shuffle grouping** (Storm's, the paper's) every thread of task i gets
  ω_i / τ_i. The q threads of task i sharing a slot sustain I_i(q) together, so
  each thread sustains I_i(q)/q, and the task keeps up while
  ω_i ≤ τ_i · min_s I_i(q_s)/q_s — the slot with the weakest threads decides.
* With **capacity-weighted routing** (the paper's future work, §8.4.1) each
  thread's share is proportional to its modelled capacity, so the task keeps
  up while ω_i ≤ Σ_s I_i(q_s).

Models are interpolated between measured thread counts and resources are
scaled down in proportion to load below the peak rate
(:meth:`PerformanceModel.scaled`). Optionally (``resource_limits``, on by
default) a VM's CPU may not exceed its slots × 100 % and a slot's memory
100 % — the limits RSM plans with (§7.3) — since the models know nothing of
interference between tasks sharing a slot.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from streamscale.errors import ModelError
from streamscale.model import PerformanceModel, Topology, instance_of
from streamscale.planning.allocation.model_based import model_for
from streamscale.settings import Setting

__all__ = ["RESOURCE_LIMITS", "Prediction", "RoutingMode", "predict"]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
RESOURCE_LIMITS = Setting(
    "resource_limits", bool, True, "predictions respect per-VM CPU and per-slot memory"
)

RoutingMode = Literal["shuffle", "weighted"]


@dataclass(frozen=True, slots=True)
class Prediction:
    """The predicted highest stable DAG rate and resource use at that rate.

    ``limit`` names what caps the rate (``task X`` or ``vm V cpu`` / ``slot S
    memory``); ``task_rates`` gives, per task, the DAG rate its threads alone
    would sustain; ``vm_cpu``/``vm_memory`` are in percent of one slot (a
    4-slot VM can reach 400 %); ``slot_load`` is each slot's predicted CPU %.
    """

    routing: RoutingMode
    rate: float
    limit: str
    task_rates: Mapping[str, float]
    vm_cpu: Mapping[str, float]
    vm_memory: Mapping[str, float]
    slot_cpu: Mapping[str, float]
    slot_memory: Mapping[str, float]


def _vm_of(slot: str) -> str:
    return slot.rsplit("/", 1)[0]


def predict(
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    assignment: Mapping[str, str],
    *,
    slots: Sequence[str] | None = None,
    vm_slots: Mapping[str, int] | None = None,
    routing: RoutingMode = "shuffle",
    resource_limits: bool = RESOURCE_LIMITS.default,
    at_rate: float | None = None,
) -> Prediction:
    """Predict the highest stable DAG rate of a mapping (paper 004, §8.5).

    Parameters
    ----------
    topology, models
        The DAG and the task models (operators matched by ``task``).
    assignment
        Thread unit ``f"{task}#{k}"`` → slot ``f"{vm}/{l}"``.
    slots
        Every slot (so empty ones are reported); defaults to the used ones.
    vm_slots
        Slots per VM for the CPU limit; defaults to the slots seen per VM.
    routing
        ``shuffle`` (equal share per thread) or ``weighted`` (share ∝ capacity).
    resource_limits
        Also cap the rate where a VM's CPU or a slot's memory would pass 100 %.
    at_rate
        Report resources at this DAG rate instead of the predicted one.

    Examples
    --------
    The ``parse`` model of :func:`~streamscale.planning.allocation.model_based.allocate_mba`'s
    example (I(1) = 100, I(3) = 220 t/s) and SAM's mapping of its 7 threads: 3 + 3 threads on
    two slots of ``vm0``, one on ``vm1``. Under shuffle grouping a thread of a 3-thread slot
    sustains 220/3 t/s, so the task keeps up to 7 × 220/3 ≈ 513.3 t/s; weighted routing
    reaches 220 + 220 + 100 = 540. RSM's mapping, all 7 threads on one slot, sustains the
    model's flat I(7) = 220.

    >>> from streamscale.model import Edge, ModelPoint, Operator, PerformanceModel, Topology
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> models = {"parse": PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                                     ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                                     ModelPoint(3, 220.0, 50.0, 20.0)])}
    >>> sam = {f"parse#{k}": s for k, s in enumerate(["vm0/0"] * 3 + ["vm0/1"] * 3 + ["vm1/0"])}
    >>> p = predict(topo, models, sam)
    >>> round(p.rate, 1), p.limit
    (513.3, 'task parse')
    >>> predict(topo, models, sam, routing="weighted").rate
    540.0
    >>> predict(topo, models, {f"parse#{k}": "vm0/0" for k in range(7)}).rate
    220.0
    """
    if routing not in ("shuffle", "weighted"):
        raise ModelError("routing must be 'shuffle' or 'weighted'", item=str(routing))
    per_task: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for unit, s in assignment.items():
        per_task[instance_of(unit)][s] += 1
    rel = topology.rates({src.name: 1.0 for src in topology.sources})
    all_slots = list(slots) if slots is not None else sorted(set(assignment.values()))
    if vm_slots is None:
        counts: dict[str, int] = defaultdict(int)
        for s in all_slots:
            counts[_vm_of(s)] += 1
        vm_slots = counts
    # Per unit of DAG rate: CPU and memory each (task, slot) uses, and task capacity.
    cpu_unit: dict[str, float] = defaultdict(float)
    mem_unit: dict[str, float] = defaultdict(float)
    task_rates: dict[str, float] = {}
    for task, where in per_task.items():
        if task not in topology.names:
            raise ModelError("thread of an unknown task", item=f"task {task}")
        model = model_for(topology, task, models)
        if model is None:
            raise ModelError("no performance model", item=f"task {task}")
        f = rel[task]
        tau = sum(where.values())
        caps = {s: model.rate(q) for s, q in where.items()}
        total = sum(caps.values())
        cap = total if routing == "weighted" else tau * min(caps[s] / q for s, q in where.items())
        task_rates[task] = math.inf if f <= 0 else cap / f
        for s, q in where.items():
            share = caps[s] / total if routing == "weighted" else q / tau
            # load on slot s per unit DAG rate, relative to what q threads sustain there
            u = f * share / caps[s]
            cpu_unit[s] += model.cpu(q) * u
            mem_unit[s] += model.memory(q) * u
    rate, limit = math.inf, "none"
    for task, r in task_rates.items():
        if r < rate:
            rate, limit = r, f"task {task}"
    if resource_limits:
        vm_cpu_unit: dict[str, float] = defaultdict(float)
        for s, c in cpu_unit.items():
            vm_cpu_unit[_vm_of(s)] += c
        for vm, c in vm_cpu_unit.items():
            if c > 0 and 100.0 * vm_slots.get(vm, 1) / c < rate:
                rate, limit = 100.0 * vm_slots.get(vm, 1) / c, f"vm {vm} cpu"
        for s, m in mem_unit.items():
            if m > 0 and 100.0 / m < rate:
                rate, limit = 100.0 / m, f"slot {s} memory"
    if not math.isfinite(rate):
        rate = 0.0
    at = rate if at_rate is None else at_rate
    slot_cpu = {s: cpu_unit.get(s, 0.0) * at for s in all_slots}
    slot_mem = {s: mem_unit.get(s, 0.0) * at for s in all_slots}
    vm_cpu: dict[str, float] = {}
    vm_mem: dict[str, float] = {}
    for s in all_slots:
        vm = _vm_of(s)
        vm_cpu[vm] = vm_cpu.get(vm, 0.0) + slot_cpu[s]
        vm_mem[vm] = vm_mem.get(vm, 0.0) + slot_mem[s]
    return Prediction(routing, rate, limit, task_rates, vm_cpu, vm_mem, slot_cpu, slot_mem)
