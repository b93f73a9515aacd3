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

Fair order: ``--repeats N`` (1 to 20, default 1) runs every configuration (a policy
at an α and ω) N times, the order rotated by one at each repeat (:func:`run_order`),
so none always runs first or last; every configuration's line carries ``repeat``
(0-based) and ``position`` (its place in that repeat's order), and each repeat ends
with its ratio lines and its efficiency line (``repeat`` too), computed from that
repeat's runs. With two configurations or more, the run's first configuration runs
once more at the very end: its line carries ``"order_check": true`` (counted in no
summary, ratio or efficiency) and an ``{"figure": "order_check"}`` line gives its
``throughput`` and ``p99_ms`` beside the first run's (``first``, ``again``) and
``again_over_first``. Last, one ``{"figure": "summary"}`` line per policy, α and ω:
``repeats`` and the median, min and max over the repeats of ``throughput``,
``p99_ms`` and ``efficiency``.

Run: ``.venv/bin/python benchmarks/bench_pipeline.py [--quick] [--duration S]
[--policies elastic,static,rc,spark-native] [--alphas 0.5,1.0] [--omegas 0,2,8]
[--master local[*]] [--repeats 3]``.
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

from _fair import bad_repeats, number, order_check, run_order, spread
from _results import record

from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.scenarios.demo import DemoConfig, run_demo

ALPHAS = (0.5, 1.0)
OMEGAS = (0.0, 2.0, 8.0)
POLICIES = ("elastic", "static", "rc", "spark-native")
#: the figures of a configuration's line that its summary line gives
SUMMARIZED = ("throughput", "p99_ms", "efficiency")
#: the headline figures that the order check gives
CHECKED = ("throughput", "p99_ms")

_ARGV: list[str] = []  # the arguments of main, recorded with each line

#: a configuration: (policy, α, ω)
Config = tuple[str, float, float]


def _emit(line: dict[str, Any]) -> None:
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in line.items()
    }
    print(json.dumps(record("pipeline", clean, argv=_ARGV)), flush=True)


def _overhead(records: Sequence[GraphBatch], cores: int) -> float | None:
    """Median of (time since the previous batch ended − busy ÷ cores) after the first batch."""
    gaps = [cur.time - prev.time - cur.busy_s / cores for prev, cur in itertools.pairwise(records)]
    return round(statistics.median(gaps), 3) if gaps else None


def order_check_line(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """The order check (:func:`_fair.order_check`) of :data:`CHECKED`."""
    return order_check(first, again, CHECKED)


def summary_lines(
    runs: list[dict[Config, dict[str, Any]]], configs: list[Config]
) -> list[dict[str, Any]]:
    """One line per configuration: its repeats and the median, min and max over them of
    :data:`SUMMARIZED` (finite values only; ``runs``: each repeat's line per
    configuration)."""
    out = []
    for policy, alpha, omega in configs:
        ran = [r[(policy, alpha, omega)] for r in runs if (policy, alpha, omega) in r]
        per = {k: [f[k] for f in ran if number(f.get(k))] for k in SUMMARIZED}
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append({"figure": "summary", "policy": policy, "alpha": alpha, "omega": omega,
                    "repeats": len(ran), **stats})  # fmt: skip
    return out


def _args(argv: list[str]) -> argparse.Namespace:
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
    ap.add_argument(
        "--repeats", type=int, default=1,
        help="Runs of every configuration, the order rotated at each (1 to 20).",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.smoke:
        args.duration, args.policies, args.trigger = 4.0, "elastic,static", 1.0
        args.alphas, args.omegas = "1.0", "0"
    args.duration = args.duration or (6.0 if args.quick else 60.0)
    return args


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the benchmark; ``spark``: a session to run on (left running) instead of
    building one for ``--master`` (the smoke test's)."""
    args = _args(sys.argv[1:] if argv is None else argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    if bad_repeats("bench_pipeline", args.repeats):
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    alphas = [float(a) for a in args.alphas.split(",") if a.strip()]
    omegas = [float(w) for w in args.omegas.split(",") if w.strip()]
    configs = [(p, a, w) for a in alphas for w in omegas for p in policies]

    from streamscale.runtime.spark.executors.session import build_session

    own = spark is None
    if spark is None:
        spark = build_session(args.master, app_name="streamscale-bench")
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-bench-"))
    try:
        run_all(spark, configs, args, scratch)
    finally:
        if own:
            spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def run_all(spark: Any, configs: list[Config], args: argparse.Namespace, scratch: Path) -> None:
    """Every repeat in its order (:func:`run_order`) with its ratio and efficiency lines,
    the order check, the summary lines."""
    orders = run_order(configs, args.repeats)
    runs: list[dict[Config, dict[str, Any]]] = []
    for k, order in enumerate(orders[: args.repeats]):
        got: dict[Config, dict[str, Any]] = {}
        for i, config in enumerate(order):
            got[config] = line = run_config(spark, config, args, scratch)
            _emit({**line, "repeat": k, "position": i})
        runs.append(got)
        for line in repeat_lines(got, configs):
            _emit({**line, "repeat": k})
    if len(orders) > args.repeats:
        config = orders[-1][0]
        again = run_config(spark, config, args, scratch)
        _emit({**again, "repeat": args.repeats, "position": 0, "order_check": True})
        check = order_check_line(runs[0][config], again)
        policy, alpha, omega = config
        _emit({"bench": "pipeline", **check, "policy": policy, "alpha": alpha, "omega": omega})
    for line in summary_lines(runs, configs):
        _emit({"bench": "pipeline", **line})


def run_config(
    spark: Any, config: Config, args: argparse.Namespace, scratch: Path
) -> dict[str, Any]:
    """One configuration's run and its line (``error`` when the policy failed)."""
    policy, alpha, omega = config
    cores = int(spark.sparkContext.defaultParallelism)
    cfg = DemoConfig(
        duration_s=args.duration,
        policies=(policy,),
        alpha=alpha,
        omega=omega,
        trigger_s=args.trigger,
        seed=args.seed,
    )
    (o,) = run_demo(spark, cfg, scratch / f"a{alpha}-w{omega}")
    line: dict[str, Any] = {"bench": "pipeline", "policy": policy, "alpha": alpha, "omega": omega}
    if o.result is None:
        return {**line, "error": o.error}
    r = o.result
    return {
        **line,
        "trigger_s": args.trigger,
        "rows_per_batch": round(statistics.mean(x.rows for x in r.records[1:]))
        if len(r.records) > 1
        else None,
        "overhead_s_per_batch": _overhead(r.records, cores),
        "throughput": round(r.throughput, 1),
        "p50_ms": round(r.p50_ms, 1),
        "p99_ms": round(r.p99_ms, 1),
        "efficiency": round(r.efficiency, 4),
        "batches": len(r.records),
        "cores": cores,
        "rate": round(cfg.rate_for(cores), 1),
        "duration_s": args.duration,
    }


def repeat_lines(got: dict[Config, dict[str, Any]], configs: list[Config]) -> list[dict[str, Any]]:
    """One repeat's ratio line per (α, ω) (``elastic``'s throughput over each other
    policy's) and its efficiency line (``elastic``'s median efficiency)."""
    out: list[dict[str, Any]] = []
    for alpha, omega in dict.fromkeys((a, w) for _, a, w in configs):
        el = got.get(("elastic", alpha, omega), {}).get("throughput")
        ratio: dict[str, Any] = {"bench": "pipeline_ratio", "alpha": alpha, "omega": omega}
        for other in ("static", "spark-native", "rc"):
            th = got.get((other, alpha, omega), {}).get("throughput")
            ratio[f"elastic_over_{other.replace('-', '_')}"] = (
                round(el / th, 3) if el and th else None
            )
        out.append(ratio)
    effs = [
        v["efficiency"]
        for (p, _, _), v in got.items()
        if p == "elastic" and v.get("efficiency") is not None
    ]
    out.append(
        {
            "bench": "pipeline_efficiency",
            "policy": "elastic",
            "median_efficiency": statistics.median(effs) if effs else None,
            "target": 0.9,
            "configurations": len(effs),
        }
    )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
