"""Thread and slot allocation from per-task performance models (paper 004, §6).

Two allocators decide, for a DAG input rate Ω, how many threads each task gets
and how much of a slot's CPU and memory those threads need:

* :func:`allocate_lsa` — Linear Scaling Allocation (paper 004, §6.1, Algorithm 2):
  one thread's peak rate, CPU and memory are extrapolated linearly.
* :func:`allocate_mba` — Model Based Allocation (paper 004, §6.2, Algorithm 3):
  full bundles of τ̂ threads at the model's best rate ω̂, each counted as a whole
  slot, plus a model-sized remainder.

Both return the slots ρ = max(⌈Σ c_i⌉, ⌈Σ m_i⌉) (resources in percent of a slot,
so 100 % is one slot). Input rates follow the recurrence of §6 through
:meth:`streamscale.model.Topology.rates`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from streamscale.errors import ModelError
from streamscale.model import PerformanceModel, Topology

__all__ = [
    "AllocationResult",
    "TaskAllocation",
    "allocate",
    "allocate_lsa",
    "allocate_mba",
    "bundle_needs",
    "model_for",
    "modelled_tasks",
    "slots_needed",
]

# Rate arithmetic noise (e.g. 3 × 33.333… ≥ 100) must not buy a whole extra thread.
_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class TaskAllocation:
    """Threads τ_i, CPU % c_i and memory % m_i allocated to one task at input rate ω_i."""

    task: str
    rate: float
    threads: int
    cpu: float
    memory: float


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """An allocator's output: per-task allocations (topological order) and slots ρ."""

    algorithm: str
    dag_rate: float
    tasks: tuple[TaskAllocation, ...]
    slots: int

    @property
    def threads(self) -> dict[str, int]:
        return {t.task: t.threads for t in self.tasks}

    @property
    def total_cpu(self) -> float:
        return sum(t.cpu for t in self.tasks)

    @property
    def total_memory(self) -> float:
        return sum(t.memory for t in self.tasks)


def slots_needed(cpu: float, memory: float) -> int:
    """ρ = max(⌈Σc⌉, ⌈Σm⌉) with c, m in percent of one slot (paper 004, §6.2)."""
    return max(math.ceil(cpu / 100.0 - 1e-9), math.ceil(memory / 100.0 - 1e-9), 0)


def model_for(
    topology: Topology, name: str, models: Mapping[str, PerformanceModel]
) -> PerformanceModel | None:
    """The model of operator ``name``: looked up by its ``task`` field, else by its name."""
    op = topology.operator(name)
    key = op.task or op.name
    return models.get(key) or models.get(op.name)


def modelled_tasks(topology: Topology, models: Mapping[str, PerformanceModel]) -> tuple[str, ...]:
    """Operators that get threads, in topological order.

    Processing operators must have a model; sources and sinks are allocated only
    when a model exists for them (the paper maps its spout and sink too, §8.3,
    but a DAG whose endpoints are external systems has none).
    """
    out: list[str] = []
    for name in topology.topological_order():
        op = topology.operator(name)
        m = model_for(topology, name, models)
        if m is None:
            if op.kind == "operator":
                raise ModelError(
                    f"no performance model for task {op.task or op.name!r}",
                    item=f"operator {name}",
                )
            continue
        out.append(name)
    return tuple(out)


def _lsa_task(name: str, omega: float, model: PerformanceModel) -> TaskAllocation:
    """Algorithm 2, lines 4-20, for one task."""
    bar = model.rate(1)
    c1, m1 = model.cpu(1), model.memory(1)
    full = math.floor(omega / bar + _EPS)
    rest = omega - full * bar
    threads, cpu, mem = full, full * c1, full * m1
    if rest > _EPS * bar:
        threads += 1
        cpu += c1 * rest / bar
        mem += m1 * rest / bar
    return TaskAllocation(name, omega, threads, cpu, mem)


def _mba_task(name: str, omega: float, model: PerformanceModel) -> TaskAllocation:
    """Algorithm 3, lines 4-27, for one task."""
    hat = model.peak_rate
    tau_hat = model.peak_threads
    bundles = math.floor(omega / hat + _EPS)
    rest = omega - bundles * hat
    threads, cpu, mem = bundles * tau_hat, 100.0 * bundles, 100.0 * bundles
    if rest > _EPS * hat:
        q = model.threads_for(rest)
        threads += q
        if q > 1:
            cpu += model.cpu(q)
            mem += model.memory(q)
        else:
            cpu += model.cpu(1) * rest / model.rate(1)
            mem += model.memory(1) * rest / model.rate(1)
    return TaskAllocation(name, omega, threads, cpu, mem)


def _allocate(
    algorithm: str,
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    rate: float | Mapping[str, float] | None,
) -> AllocationResult:
    omega = topology.rates(rate)
    one = _lsa_task if algorithm == "lsa" else _mba_task
    tasks = tuple(
        one(n, omega[n], model_for(topology, n, models))  # type: ignore[arg-type]
        for n in modelled_tasks(topology, models)
        if omega[n] > 0
    )
    dag = float(sum(omega[s.name] for s in topology.sources))
    cpu, mem = sum(t.cpu for t in tasks), sum(t.memory for t in tasks)
    return AllocationResult(algorithm, dag, tasks, slots_needed(cpu, mem))


def allocate_lsa(
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    rate: float | Mapping[str, float] | None = None,
) -> AllocationResult:
    """Linear Scaling Allocation (paper 004, §6.1, Algorithm 2).

    Each task gets ⌊ω_i / I_i(1)⌋ threads at C_i(1), M_i(1) each, plus one
    thread whose resources are scaled by the remaining rate over I_i(1).

    Parameters
    ----------
    topology
        The DAG; operators are matched to models by their ``task`` field.
    models
        Performance models by task name.
    rate
        The DAG input rate Ω (or one per source); sources' own rates otherwise.

    Examples
    --------
    One modelled task between a source and a sink (neither has a model, so neither gets
    threads). One ``parse`` thread serves 100 t/s at 20 % CPU and 10 % memory of a slot; at
    Ω = 450 LSA gives ⌊450/100⌋ = 4 threads plus one scaled to the remaining 50 t/s:
    CPU 4 × 20 + 10 = 90 %, memory 4 × 10 + 5 = 45 %, so one slot.

    >>> from streamscale.model import Edge, ModelPoint, Operator, PerformanceModel, Topology
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> model = PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                          ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                          ModelPoint(3, 220.0, 50.0, 20.0)])
    >>> r = allocate_lsa(topo, {"parse": model}, 450.0)
    >>> r.threads, r.total_cpu, r.total_memory, r.slots
    ({'parse': 5}, 90.0, 45.0, 1)
    """
    return _allocate("lsa", topology, models, rate)


def allocate_mba(
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    rate: float | Mapping[str, float] | None = None,
) -> AllocationResult:
    """Model Based Allocation (paper 004, §6.2, Algorithm 3).

    While ω_i ≥ ω̂_i = max_q I_i(q) a bundle of τ̂_i = T_i(ω̂_i) threads is added
    and counted as 100 % CPU and memory of a slot; the remaining rate gets
    T_i(ω) threads with C_i(T(ω)), M_i(T(ω)), or, when one thread suffices,
    C_i(1) and M_i(1) scaled by ω / I_i(1).

    Parameters are as for :func:`allocate_lsa`.

    Examples
    --------
    The task of :func:`allocate_lsa`'s example peaks at ω̂ = 220 t/s with τ̂ = 3 threads. At
    Ω = 450 MBA takes ⌊450/220⌋ = 2 full bundles (6 threads, 200 %) and one thread for the
    remaining 10 t/s (20 % × 10/100 = 2 % CPU, 1 % memory): 3 slots where LSA's linear
    extrapolation saw one.

    >>> from streamscale.model import Edge, ModelPoint, Operator, PerformanceModel, Topology
    >>> topo = Topology.build("t", [Operator("src", "source"), Operator("parse", task="parse"),
    ...                             Operator("out", "sink")],
    ...                       [Edge("src", "parse"), Edge("parse", "out")])
    >>> model = PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
    ...                                          ModelPoint(2, 180.0, 35.0, 15.0),
    ...                                          ModelPoint(3, 220.0, 50.0, 20.0)])
    >>> r = allocate_mba(topo, {"parse": model}, 450.0)
    >>> r.threads, r.total_cpu, r.total_memory, r.slots
    ({'parse': 7}, 202.0, 201.0, 3)
    >>> allocate("mba", topo, {"parse": model}, 450.0) == r
    True
    """
    return _allocate("mba", topology, models, rate)


def allocate(
    algorithm: str,
    topology: Topology,
    models: Mapping[str, PerformanceModel],
    rate: float | Mapping[str, float] | None = None,
) -> AllocationResult:
    """Dispatch to :func:`allocate_lsa` (``"lsa"``) or :func:`allocate_mba` (``"mba"``)."""
    if algorithm not in ("lsa", "mba"):
        raise ModelError("allocator must be 'lsa' or 'mba'", item=algorithm)
    return _allocate(algorithm, topology, models, rate)


def bundle_needs(model: PerformanceModel, omega: float, threads: int) -> tuple[int, float, float]:
    """Full bundles, CPU % and memory % of ``threads`` threads serving ``omega``, the MBA way.

    A full bundle is τ̂ threads sized to serve ω̂ (Algorithm 3's while loop), so
    there are min(⌊threads/τ̂⌋, ⌊ω/ω̂⌋) of them, 100 % each; the remaining r
    threads count C(r), M(r), or for one thread C(1), M(1) scaled by the rate
    it is left with (paper 004, §6.2, Algorithm 3, lines 9-27). For an MBA
    allocation this reproduces its c_i, m_i; SAM (§7.4) uses it for any
    allocation.
    """
    if threads <= 0:
        return 0, 0.0, 0.0
    tau_hat, hat = model.peak_threads, model.peak_rate
    bundles = min(threads // tau_hat, math.floor(omega / hat + _EPS))
    r = threads - bundles * tau_hat
    rest = max(0.0, omega - bundles * hat)
    cpu = mem = 100.0 * bundles
    if r > 1:
        cpu += model.cpu(r)
        mem += model.memory(r)
    elif r == 1:
        f = min(1.0, rest / model.rate(1))
        cpu += model.cpu(1) * f
        mem += model.memory(1) * f
    return bundles, cpu, mem
