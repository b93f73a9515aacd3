"""Elastic executors under a load surge, against static sizing and Spark's dynamic allocation.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores`` task
slots, executors of ``--executor-cores``), runs the surge scenario
(:mod:`streamscale.runtime.spark.surge`: a warm-up, then base → peak → base offered load, per-tuple
cost *waited* — ``cost_kind: wall`` — so the slots behave like cores on this small
machine) under each policy in turn, and prints one JSON line per policy
(``"bench": "autoscale"``) plus one line of ratios against ``static-peak`` and
``spark-dynamic`` (``"figure": "ratios"``) with the targets: elastic SLO attainment
≥ 0.95 with ≤ 0.6× the core-seconds of static-peak, ahead of Spark's dynamic
allocation on both. The ratios line also carries
``oracle_core_seconds_vs_static_peak``: the least core-seconds any policy holding
whole executors can have against static-peak (the fewest executors that cover each
phase's load, for exactly that phase; :meth:`SurgeConfig.oracle_core_ratio`), the
floor below which the core-seconds target cannot be met in the scenario run. A
timeline plot goes to ``--out`` (default ``results/autoscale``).

Run: ``.venv/bin/python benchmarks/bench_autoscale.py [--quick] [--policies a,b]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from streamscale.runtime.spark.cluster import cluster_down, cluster_up
from streamscale.runtime.spark.surge import (
    SURGE_POLICIES,
    SurgeConfig,
    config_dict,
    plot_surge,
    run_surge,
    summarize_surge,
)


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 s phases instead of 60 s.")
    ap.add_argument("--policies", default=",".join(SURGE_POLICIES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=8)
    ap.add_argument("--executor-cores", type=int, default=SurgeConfig.executor_cores)
    ap.add_argument("--out", type=Path, default=Path("results/autoscale"))
    args = ap.parse_args(argv)
    slots = args.workers * args.worker_cores
    cfg = SurgeConfig(
        phase_s=30.0 if args.quick else 60.0,
        executor_cores=args.executor_cores,
        max_executors=args.workers * (args.worker_cores // args.executor_cores),
    )
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="streamscale-autoscale-"))
    info = cluster_up(args.workers, args.worker_cores, memory=f"{args.worker_cores}g", directory=d)
    try:
        outcomes = run_surge(
            info.master_url,
            cfg,
            policies,
            on_batch=lambda row: print(json.dumps(row), file=sys.stderr, flush=True),
        )
    finally:
        cluster_down(d)
    figures = {o.policy: summarize_surge(o, cfg) for o in outcomes}
    common = {"cost_kind": "wall", "emulated_cores": slots, "config": config_dict(cfg)}
    dyn_defaults = {  # Spark's defaults, left unchanged for the spark-dynamic policy
        "executorIdleTimeout": "60s",
        "schedulerBacklogTimeout": "1s",
        "sustainedSchedulerBacklogTimeout": "1s",
        "shuffleTracking.timeout": "infinity",
    }
    for f in figures.values():
        more = {"spark_dynamic_defaults": dyn_defaults} if f["policy"] == "spark-dynamic" else {}
        _emit(bench="autoscale", **f, **common, **more)
    (args.out / "timeline.json").write_text(
        json.dumps({o.policy: o.timeline for o in outcomes}, indent=1)
    )
    plot_surge(args.out / "timeline.png", outcomes, cfg)
    el, peak, dyn = (figures.get(p, {}) for p in ("elastic", "static-peak", "spark-dynamic"))
    if "slo_attainment" in el:
        ratios: dict[str, Any] = {"elastic_slo_attainment": el["slo_attainment"]}
        # the least any policy can hold: whole executors per phase, known in advance
        ratios["oracle_core_seconds_vs_static_peak"] = cfg.oracle_core_ratio()
        # core-seconds over the same length of time: each run's mean cores × elastic's window
        if "mean_cores" in peak:
            ratios["core_seconds_vs_static_peak"] = el["mean_cores"] / peak["mean_cores"]
        if "mean_cores" in dyn:
            ratios["core_seconds_vs_spark_dynamic"] = el["mean_cores"] / dyn["mean_cores"]
            ratios["slo_attainment_minus_spark_dynamic"] = (
                el["slo_attainment"] - dyn["slo_attainment"]
            )
        ratios["met"] = bool(
            el["slo_attainment"] >= 0.95
            and ratios.get("core_seconds_vs_static_peak", 9.9) <= 0.6
            and ratios.get("core_seconds_vs_spark_dynamic", 9.9) < 1.0
            and ratios.get("slo_attainment_minus_spark_dynamic", -1.0) >= 0.0
        )
        _emit(bench="autoscale", figure="ratios", targets="slo>=0.95, cs<=0.6x static-peak, "
              "ahead of spark-dynamic on both", **ratios, **common)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
