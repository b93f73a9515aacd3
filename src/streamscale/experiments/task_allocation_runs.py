"""The measurements behind ``streamscale reproduce task-allocation`` (paper 001, §7).

Each function runs one experiment and returns plain, JSON-able figures;
:mod:`streamscale.experiments.task_allocation` writes the report.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from streamscale.planning.placement.groups import GroupJob, TaskAllocation
from streamscale.planning.placement.naive_pairs import naive_pairs
from streamscale.planning.placement.optimal import optimal
from streamscale.planning.placement.reconfigure import reconfigure
from streamscale.planning.placement.task_level import task_level
from streamscale.planning.placement.top_down import top_down
from streamscale.planning.random_jobs import Shape, Split, random_jobs

__all__ = [
    "HEURISTICS",
    "optimality",
    "pipeline_job",
    "prioritization",
    "task_count",
    "throughput",
    "varying_rate",
]

HEURISTICS: dict[str, Callable[[GroupJob], TaskAllocation]] = {
    "naive": naive_pairs,
    "naive-literal": lambda j: naive_pairs(j, order="storm", refine=False),
    "tl": task_level,
    "tl-imc": lambda j: task_level(j, priority="imc"),
    "tl-storm": lambda j: task_level(j, order="storm"),
    "tl-imc-storm": lambda j: task_level(j, priority="imc", order="storm"),
    "td": top_down,
    "td-literal": lambda j: top_down(j, literal=True),
    "td-literal-to-r": lambda j: top_down(j, literal=True, no_split="to-r"),
    "td-to-r": lambda j: top_down(j, no_split="to-r"),
    "td-imc": lambda j: top_down(j, priority="imc"),
    "td-affinity": lambda j: top_down(j, singles="affinity"),
    "td-max-links": lambda j: top_down(j, split="max-links"),
}


def optimality(
    graphs: int,
    seed: int,
    *,
    cost_noise: float = 0.0,
    split: Split = "multinomial",
    imc: tuple[float, float] = (5.0, 20.0),
    shape: Shape = "dag",
    total_cost: float = 500.0,
    time_limit_s: float = 30.0,
    heuristics: Mapping[str, Callable[[GroupJob], TaskAllocation]] | None = None,
) -> dict[str, Any]:
    """Total IMC gain of every heuristic as % of the optimum over random jobs (§7.3).

    ``cost_noise``, ``split``, ``imc``, ``shape`` and ``total_cost`` choose the
    reading of the job generator (:func:`~streamscale.planning.random_jobs.random_job`). A
    heuristic that leaves a task unplaced scores 0 on that job (counted in
    ``incomplete``); jobs with no complete allocation at all are skipped.
    ``heuristics`` replaces :data:`HEURISTICS`.
    """
    algos = HEURISTICS if heuristics is None else heuristics
    totals = dict.fromkeys([*algos, "optimal"], 0.0)
    incomplete = dict.fromkeys(algos, 0)
    ratios: dict[str, list[float]] = {k: [] for k in algos}
    proven = used = 0
    solve_s: list[float] = []
    total_imc = 0.0
    jobs = random_jobs(
        graphs,
        seed=seed,
        cost_noise=cost_noise,
        split=split,
        imc=imc,
        shape=shape,
        total_cost=total_cost,
    )
    for job in jobs:
        t0 = time.perf_counter()
        best = optimal(job, time_limit_s=time_limit_s)
        solve_s.append(time.perf_counter() - t0)
        if not best.allocation.complete:
            continue
        used += 1
        proven += best.proven_optimal
        opt = best.allocation.gain
        totals["optimal"] += opt
        total_imc += sum(e.imc for e in job.edges)
        for name, fn in algos.items():
            alloc = fn(job)
            gain = alloc.gain if alloc.complete else 0.0
            incomplete[name] += not alloc.complete
            totals[name] += gain
            ratios[name].append(gain / opt if opt > 0 else 1.0)
    pct = {k: 100.0 * v / totals["optimal"] for k, v in totals.items() if totals["optimal"]}
    return {
        "graphs": used,
        "generated": graphs,
        "cost_noise": cost_noise,
        "split": split,
        "imc": list(imc),
        "shape": shape,
        "total_cost": total_cost,
        "proven_optimal": proven,
        "optimal_share_of_imc_pct": 100.0 * totals["optimal"] / total_imc if total_imc else None,
        "total_gain_gbps": {k: v / 1000.0 for k, v in totals.items()},
        "pct_of_optimal": pct,
        "median_ratio": {k: statistics.median(v) for k, v in ratios.items() if v},
        "optimal_in_ratio": {
            k: sum(r >= 1 - 1e-9 for r in v) / len(v) for k, v in ratios.items() if v
        },
        "incomplete": incomplete,
        "optimal_solve_s_median": statistics.median(solve_s) if solve_s else None,
        "optimal_solve_s_max": max(solve_s, default=None),
    }


def pipeline_job(groups: int = 4, tasks: int = 100, nodes: int = 8) -> GroupJob:
    """§7.2's pipeline: ``groups`` × ``tasks``, equal costs (100 % each), near-equal IMC."""
    names = [f"v{i + 1}" for i in range(groups)]
    return GroupJob.build(
        [(n, tasks, 100.0) for n in names],
        [(names[i], names[i + 1], 100.0 - i) for i in range(groups - 1)],
        {f"n{i + 1}": 100.0 for i in range(nodes)},
    )


def _rate(fn: Callable[[], object], window_s: float, windows: int) -> list[float]:
    rates = []
    for _ in range(windows):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= window_s:
                break
        rates.append(n / dt)
    return rates


def throughput(*, window_s: float, windows: int) -> dict[str, Any]:
    """Allocations per second of TD and TL on the 4 × 100 pipeline (§7.2).

    One allocation = run the algorithm and expand it to a task → node map.
    The figure is the median over ``windows`` timing windows.
    """
    job = pipeline_job()
    out: dict[str, Any] = {"job": "4 groups x 100 tasks, 100 % per group, 8 nodes x 100 %"}
    for name, fn in (("td", top_down), ("tl", task_level), ("tl-imc", HEURISTICS["tl-imc"])):
        rates = _rate(lambda fn=fn: fn(job).assignment(), window_s, windows)
        out[f"{name}_per_s"] = statistics.median(rates)
        out[f"{name}_windows"] = rates
        out[f"{name}_gain"] = fn(job).gain
    out["td_over_tl"] = out["td_per_s"] / out["tl-imc_per_s"]
    return out


def prioritization(steps: int = 10) -> dict[str, Any]:
    """Fig. 4(a): TL by relative significance vs by IMC as ⟨v2,v3⟩'s IMC shrinks.

    Pipeline v1 → v2 → v3, 10 tasks each; v1 and v2 cost 40 %, v3 100 %;
    ⟨v1,v2⟩ carries 100 MB/s, ⟨v2,v3⟩ from 200 down to 100 MB/s; three
    100 % nodes.
    """
    rows = []
    for s in range(steps + 1):
        imc23 = 200.0 - 100.0 * s / steps
        job = GroupJob.build(
            [("v1", 10, 40.0), ("v2", 10, 40.0), ("v3", 10, 100.0)],
            [("v1", "v2", 100.0), ("v2", "v3", imc23)],
            {"n1": 100.0, "n2": 100.0, "n3": 100.0},
        )
        rows.append(
            {
                "imc_v2_v3": imc23,
                "tl_significance": task_level(job).gain,
                "tl_imc": task_level(job, priority="imc").gain,
                "td": top_down(job).gain,
            }
        )
    return {"rows": rows}


def task_count(factors: int = 7) -> dict[str, Any]:
    """Fig. 4(b): TL vs TD as the second group's task count grows ×1 … ×7.

    A group pair of 10 tasks each, each group costing twice a node's spare
    capacity (2 × 80 %), 100 MB/s between them, six nodes with 80 % spare.
    """
    rows = []
    for f in range(1, factors + 1):
        job = GroupJob.build(
            [("v1", 10, 160.0), ("v2", 10 * f, 160.0)],
            [("v1", "v2", 100.0)],
            {f"n{i + 1}": 80.0 for i in range(6)},
        )
        best = optimal(job, time_limit_s=20.0)
        rows.append(
            {
                "tasks_v2": 10 * f,
                "tl": task_level(job).gain,
                "tl_imc": task_level(job, priority="imc").gain,
                "td": top_down(job).gain,
                "optimal": best.allocation.gain,
                "optimal_proven": best.proven_optimal,
            }
        )
    return {"rows": rows}


def varying_rate(*, threshold: float = 0.2) -> dict[str, Any]:
    """Fig. 9: IMC gain of TD planned once at peak rate vs TD-RC as the rate varies.

    A top-k pipeline (spout 4 tasks → count 8 → rank 8 → merge 1) whose costs
    and IMC scale with the input rate; six 100 % nodes. TD is planned at the
    peak rate and kept; TD-RC re-plans when costs move by more than
    ``threshold`` (relative).
    """
    peak = GroupJob.build(
        [("spout", 4, 80.0), ("count", 8, 220.0), ("rank", 8, 160.0), ("merge", 1, 20.0)],
        [("spout", "count", 40.0), ("count", "rank", 30.0), ("rank", "merge", 6.0)],
        {f"n{i + 1}": 100.0 for i in range(6)},
    )
    profile = [1.0, 1.0, 0.8, 0.6, 0.4, 0.4, 0.5, 0.7, 0.9, 1.0, 0.6, 0.3]
    static = top_down(peak)
    current, planned = static, peak
    rows = []
    for minute, factor in enumerate(profile):
        job = peak.scaled(factor)
        static_now = TaskAllocation.of(job, static.counts, "td")
        step = reconfigure(current, job, threshold=threshold, planned_for=planned)
        current, planned = step.allocation, step.planned_for
        rows.append(
            {
                "minute": minute,
                "rate_factor": factor,
                "td_gain": static_now.gain,
                "td_rc_gain": current.gain,
                "replanned": step.replanned,
                "reason": step.reason,
            }
        )
    return {"rows": rows, "threshold": threshold}
