"""The Spark data pipeline under each policy: paper 000's micro-benchmark (§6.1, Figure 6).

Runs generator → keyed calculator (10 K keys, 1 ms mean cost per tuple,
128-byte payloads) on embedded Spark for ``elastic``, ``static``, ``rc`` and
``spark-native`` at Zipf α ∈ {0.5, 1.0} and ω ∈ {0, 2, 8} key-frequency
shuffles per minute, all in one run on one machine, and prints one JSON line
per configuration (``"bench": "pipeline"``) with ``policy``, ``alpha``,
``omega``, ``throughput`` (tuples/s after the warm-up batch), ``p50_ms``,
``p99_ms`` and ``efficiency`` (throughput ÷ cores ÷ mean per-tuple cost),
``trigger_s``, ``rows_per_batch`` (a batch takes at most one trigger interval of the
offered rate) and ``overhead_s_per_batch``: the median, over the batches after the
first, of the time since the previous batch ended minus the tasks' summed busy time ÷
cores — what a batch costs besides its tuples' work spread evenly on the cores
(Spark's per-batch work: offsets, query planning, two jobs; the driver's; the tasks'
imbalance). ``efficiency`` at most ``work ÷ (work + overhead)`` per batch, so longer
triggers (``--trigger``) amortize it.
Then one ``"bench": "pipeline_ratio"`` line per (α, ω) comparing ``elastic``'s
throughput with ``static``'s and ``spark-native``'s, and one
``"bench": "pipeline_efficiency"`` line with the median efficiency of
``elastic``.

ω counts shuffles per minute of event time, and a run processes only the
tuples offered in its first (processed ÷ rate) seconds of event time: a short
run sees few shuffles or none. ``--quick`` runs 6 s of batches per
configuration (at most one shuffle at ω = 8, none at ω = 2); the default runs
60 s.

Run: ``.venv/bin/python benchmarks/bench_pipeline.py [--quick] [--duration S]
[--policies elastic,static,rc,spark-native] [--alphas 0.5,1.0] [--omegas 0,2,8]
[--master local[*]]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _results import record

from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.scenarios.demo import DemoConfig, run_demo

ALPHAS = (0.5, 1.0)
OMEGAS = (0.0, 2.0, 8.0)
POLICIES = ("elastic", "static", "rc", "spark-native")


_ARGV: list[str] = []  # the arguments of main, recorded with each line


def _emit(line: dict[str, Any]) -> None:
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in line.items()
    }
    print(json.dumps(record("pipeline", clean, argv=_ARGV)), flush=True)


def _overhead(records: Sequence[GraphBatch], cores: int) -> float | None:
    """Median of (time since the previous batch ended − busy ÷ cores) after the first batch."""
    gaps = [cur.time - prev.time - cur.busy_s / cores for prev, cur in itertools.pairwise(records)]
    return round(statistics.median(gaps), 3) if gaps else None


def main(argv: list[str] | None = None, spark: Any | None = None) -> None:
    """Run the benchmark; ``spark``: a session to run on (left running) instead of
    building one for ``--master`` (the smoke test's)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="6 s per configuration")
    ap.add_argument(
        "--smoke", action="store_true",
        help="elastic and static, 4 s, alpha 1.0, omega 0, 1 s triggers: runs at all",
    )  # fmt: skip
    ap.add_argument("--duration", type=float, default=None, help="seconds per configuration")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--trigger", type=float, default=2.0, help="micro-batch interval (s)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--alphas", default=",".join(map(str, ALPHAS)), help="Zipf skews to run")
    ap.add_argument("--omegas", default=",".join(map(str, OMEGAS)), help="shuffles/min to run")
    args = ap.parse_args(argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    if args.smoke:
        args.duration, args.policies, args.trigger = 4.0, "elastic,static", 1.0
        args.alphas, args.omegas = "1.0", "0"
    duration = args.duration or (6.0 if args.quick else 60.0)
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    alphas = tuple(float(a) for a in args.alphas.split(",") if a.strip())
    omegas = tuple(float(w) for w in args.omegas.split(",") if w.strip())

    from streamscale.runtime.spark.executors.session import build_session

    own = spark is None
    if spark is None:
        spark = build_session(args.master, app_name="streamscale-bench")
    cores = int(spark.sparkContext.defaultParallelism)
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-bench-"))
    results: dict[tuple[str, float, float], dict[str, Any]] = {}
    try:
        for alpha in alphas:
            for omega in omegas:
                cfg = DemoConfig(
                    duration_s=duration,
                    policies=policies,
                    alpha=alpha,
                    omega=omega,
                    trigger_s=args.trigger,
                    seed=args.seed,
                )
                out = scratch / f"a{alpha}-w{omega}"
                for o in run_demo(spark, cfg, out):
                    line: dict[str, Any] = {
                        "bench": "pipeline",
                        "policy": o.policy,
                        "alpha": alpha,
                        "omega": omega,
                    }
                    if o.result is None:
                        line["error"] = o.error
                    else:
                        r = o.result
                        line.update(
                            trigger_s=args.trigger,
                            rows_per_batch=round(statistics.mean(x.rows for x in r.records[1:]))
                            if len(r.records) > 1
                            else None,
                            overhead_s_per_batch=_overhead(r.records, cores),
                            throughput=round(r.throughput, 1),
                            p50_ms=round(r.p50_ms, 1),
                            p99_ms=round(r.p99_ms, 1),
                            efficiency=round(r.efficiency, 4),
                            batches=len(r.records),
                            cores=cores,
                            rate=round(cfg.rate_for(cores), 1),
                            duration_s=duration,
                        )
                    results[(o.policy, alpha, omega)] = line
                    _emit(line)
    finally:
        if own:
            spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    for alpha in alphas:
        for omega in omegas:
            el = results.get(("elastic", alpha, omega), {}).get("throughput")
            ratio: dict[str, Any] = {"bench": "pipeline_ratio", "alpha": alpha, "omega": omega}
            for other in ("static", "spark-native", "rc"):
                th = results.get((other, alpha, omega), {}).get("throughput")
                ratio[f"elastic_over_{other.replace('-', '_')}"] = (
                    round(el / th, 3) if el and th else None
                )
            _emit(ratio)
    effs = [
        v["efficiency"]
        for (p, _, _), v in results.items()
        if p == "elastic" and v.get("efficiency") is not None
    ]
    _emit(
        {
            "bench": "pipeline_efficiency",
            "policy": "elastic",
            "median_efficiency": statistics.median(effs) if effs else None,
            "target": 0.9,
            "configurations": len(effs),
        }
    )


if __name__ == "__main__":
    main()
