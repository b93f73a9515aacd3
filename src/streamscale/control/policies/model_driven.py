"""``model-driven``: performance models (paper 004) size and map the job.

Models come from ``make_policy(models=…)``, else the file named by the ``models``
setting (``streamscale profile`` output, read once when the policy is made), else
from the topology itself: one thread of operator ``op`` serves ``1000 / cost_ms``
tuples/s on one core (a slot is an executor core), no memory modelled.

* **Start** (:func:`model_initial`): the registered ``lsa`` or ``mba`` allocator
  (``allocator`` setting; §6.1 Algorithm 2, §6.2 Algorithm 3) gives each keyed
  operator's threads at the topology's modelled rate Ω and the slots ρ; the
  registered ``dsm``, ``rsm`` or ``sam`` placer (``mapper`` setting; §7.2–§7.4)
  maps the threads onto the slots of the fewest leading nodes with ρ cores
  (``executor-0 …``; one more node at a time while the mapping fails). A thread
  is a unit ``op#t`` on its slot's node; every shard of ``op`` is routed to one
  of them by the registered ``collocate`` balancer. The job's initial executors
  are the nodes used, its cores the threads.
* **Later decisions.** The measured rate ω is the sources' output rate plus their
  backlog over ``catch_up_s`` (the queueing policies' λ₀). The rate the current
  threads serve under the models, ``R`` (per operator: LSA ``t · I(1)``, MBA full
  bundles at ``ω̂`` plus ``I(rest)``; over operators the least, by visit ratio),
  is the planned rate. When ``ω > R`` (short) or ``ω < (1 − resize_tolerance) · R``
  (over-provisioned by more than the tolerance), the job is re-sized and re-mapped
  as at the start, at ω. Otherwise only the routing is rebalanced (``collocate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from streamscale.control.controller import Decision
from streamscale.control.policies.base import (
    PolicyBase,
    decision,
    packed_initial,
    place_packed,
    without,
)
from streamscale.control.policies.spec import policy
from streamscale.errors import ModelError
from streamscale.model import (
    Allocation,
    Cluster,
    ModelPoint,
    PerformanceModel,
    Placement,
    Plan,
    Snapshot,
    Topology,
    load_models,
    operator_of,
)
from streamscale.model.ids import parse_slot
from streamscale.planning.adapters.collocation import COLLOCATE_SETTINGS
from streamscale.planning.adapters.elasticutor import SETTINGS as ELASTICUTOR_SETTINGS
from streamscale.planning.adapters.elasticutor import external_rate
from streamscale.planning.adapters.model_driven import MAPPING_SETTINGS
from streamscale.planning.allocation.model_based import model_for
from streamscale.planning.registry import PlanningContext, compose
from streamscale.settings import Schema, Setting

__all__ = ["MODEL_DRIVEN_SETTINGS", "ModelDrivenPolicy", "model_initial", "served_rate"]

MODEL_DRIVEN_SETTINGS = Schema(
    "model-driven",
    Setting(
        "allocator",
        str,
        "lsa",
        "paper 004 sizing: LSA (§6.1) or MBA (§6.2)",
        choices=("lsa", "mba"),
    ),
    Setting(
        "mapper",
        str,
        "dsm",
        "paper 004 mapping of threads to slots: DSM, RSM or SAM (§7)",
        choices=("dsm", "rsm", "sam"),
    ),
    Setting(
        "resize_tolerance",
        float,
        0.2,
        "re-size when the measured rate falls this far below the rate the threads serve",
        low=0.0,
        high=1.0,
        low_open=True,
    ),
    Setting(
        "models",
        str,
        None,
        "performance models file from 'streamscale profile' (unset: from each cost_ms)",
    ),
    ELASTICUTOR_SETTINGS["catch_up_s"],
).merged(
    COLLOCATE_SETTINGS.merged(without(MAPPING_SETTINGS, "vms", "acquisition")),
    group="model-driven",
)


def topology_models(topology: Topology) -> dict[str, PerformanceModel]:
    """One-point models from ``cost_ms``: one thread serves ``1000 / cost_ms`` tuples/s on a core."""
    out: dict[str, PerformanceModel] = {}
    for op in topology.processing:
        rate = 1000.0 / op.cost_ms if op.cost_ms > 0 else 1e9
        task = op.task or op.name
        out[task] = PerformanceModel.build(
            task, [ModelPoint(1, rate, 100.0, 0.0)], approximate=True, source="topology cost_ms"
        )
    return out


def _models(
    topology: Topology, params: Mapping[str, Any], models: Mapping[str, PerformanceModel] | None
) -> dict[str, PerformanceModel]:
    if models:
        return dict(models)
    if params.get("models"):
        return load_models(params["models"])
    return topology_models(topology)


def _capacity(model: PerformanceModel, threads: int, allocator: str) -> float:
    if threads <= 0:
        return 0.0
    if allocator == "lsa":
        return threads * model.rate(1)
    tau, peak = model.peak_threads, model.peak_rate
    rest = threads % tau
    return (threads // tau) * peak + (model.rate(rest) if rest else 0.0)


def served_rate(
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    threads: Mapping[str, int],
    allocator: str,
) -> float:
    """The DAG rate the keyed operators' ``threads`` serve under the models (0: none)."""
    visit = topology.rates(1.0)
    out = math.inf
    for op in topology.processing:
        if not op.keyed or visit.get(op.name, 0.0) <= 0:
            continue
        m = model_for(topology, op.name, models)
        if m is None:
            continue
        out = min(out, _capacity(m, int(threads.get(op.name, 0)), allocator) / visit[op.name])
    return 0.0 if math.isinf(out) else out


def _keyed(topology: Topology) -> set[str]:
    return {op.name for op in topology.processing if op.keyed}


def _size_and_map(
    context: PlanningContext, current: Plan, allocator: str, mapper: str
) -> tuple[Plan, dict[str, Any]]:
    """Threads by ``allocator`` at ``context.rate``, mapped by ``mapper``, shards routed."""
    sized, figs, notes = compose(context, current, steps=[("allocator", allocator)])
    keyed = _keyed(context.topology)
    # every keyed operator runs, however little its rate asks of the model
    threads = {op: max(1, int(sized.allocation.cores.get(op, 0))) for op in sorted(keyed)}
    slots = max(1, sized.allocation.slots or 0)
    sized = Plan(Allocation(threads, sized.allocation.slots), Placement(), current.routing)
    # threads are operator-level units op#t, numbered afresh by the mapper
    mapped, place_figs, offered = place_packed((), context, sized, mapper, cores=slots)
    nodes: dict[str, str] = {}
    for unit, slot in mapped.placement.nodes.items():
        sid = parse_slot(slot)
        nodes[unit] = sid.vm if sid is not None else slot
    placed = Plan(mapped.allocation, Placement(dict(sorted(nodes.items()))), current.routing)
    plan, route_figs, route_notes = compose(context, placed, steps=[("balancer", "collocate")])
    figures: dict[str, Any] = {
        f"allocator:{allocator}.{k}": v for k, v in figs[f"allocator:{allocator}"].items()
    }
    figures.update({k: v for k, v in place_figs.items() if not k.endswith("slot_map")})
    figures.update(
        {f"balancer:collocate.{k}": v for k, v in route_figs["balancer:collocate"].items()}
    )
    figures["nodes_offered"] = offered
    if notes or route_notes:
        figures["notes"] = [*notes, *route_notes, *figures.get("notes", ())]
    return plan, figures


def model_initial(
    topology: Topology,
    cluster: Cluster,
    params: Mapping[str, Any],
    models: Mapping[str, PerformanceModel] | None = None,
) -> Plan:
    """The sized and mapped start (module docstring); the packed one-core-per-instance plan
    when the topology models no source rate."""
    try:
        rate = float(sum(topology.rates(None)[s.name] for s in topology.sources))
    except ModelError:
        return packed_initial(topology, cluster, params)
    context = PlanningContext(
        topology, cluster, None, models=_models(topology, params, models), rate=rate, params=params
    )
    plan, _ = _size_and_map(context, Plan(), params["allocator"], params["mapper"])
    return plan


@policy(
    "model-driven",
    "paper 004: performance models size threads (LSA/MBA) and map them (DSM/RSM/SAM)",
    settings=MODEL_DRIVEN_SETTINGS,
    steps=(
        ("allocator", "lsa"),
        ("allocator", "mba"),
        ("placer", "dsm"),
        ("placer", "rsm"),
        ("placer", "sam"),
        ("balancer", "collocate"),
    ),
    initial=model_initial,
)
class ModelDrivenPolicy(PolicyBase):
    """Paper 004's allocation and mapping, re-sized when the rate departs (module docstring)."""

    def __init__(
        self,
        topology: Topology,
        cluster: Cluster,
        params: Mapping[str, Any],
        seed: int | None,
        models: Mapping[str, PerformanceModel] | None = None,
    ) -> None:
        super().__init__(topology, cluster, params, seed, _models(topology, params, models))

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        allocator = self.params["allocator"]
        omega = external_rate(context, self.loads(context))
        threads = {
            k: v
            for k, v in current.allocation.cores.items()
            if operator_of(k) in _keyed(self.topology)
        }
        served = served_rate(self.topology, self.models, threads, allocator)
        tol = self.params["resize_tolerance"]
        figures: dict[str, Any] = {"measured_rate": omega, "served_rate": served}
        if omega > 0 and (omega > served or omega < (1.0 - tol) * served):
            ctx = replace(context, rate=omega)
            plan, figs = _size_and_map(ctx, current, allocator, self.params["mapper"])
            figures.update(figs)
            reason = f"model-driven: re-sized for {omega:.4g}/s (threads served {served:.4g}/s)"
        else:
            plan, figs = self.compose(context, current, [("balancer", "collocate")])
            figures.update(figs)
            reason = "model-driven: shards rebalanced"
        figures["cores"] = plan.allocation.total
        return decision(current, plan, reason, figures)
