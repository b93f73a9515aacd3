"""Elasticity on real traffic: a load trace replayed as offered load under each policy.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores`` task slots,
executors of ``--executor-cores``), reads a ``timestamp,value`` trace (``--trace``; its
window's 99th percentile maps to ``--peak-rate`` tuples/s, values above clip at 1.25×,
the window replayed in ``--minutes``), and runs the surge scenario's harness on that
load (:mod:`streamscale.scenarios.traffic`: the micro-benchmark, per-tuple cost *waited*
— ``cost_kind: wall`` — so the slots behave like cores on this small machine) under each
policy in turn, each scored alike: ``slo_tuples`` (tuples that met the latency target
end to end) is the headline, ``slo_batches`` beside it, core-seconds billed from each
executor's request, scale events, host CPU.

``--startup real`` (default) starts executors on request on this host; ``--startup
emulated`` starts every executor before the run and makes a request usable after a
stated delay (``--startup-delay``; default: the start-up of one executor measured on this
host at the run's start), billed from the request; ``real,emulated`` runs both.
``spark-dynamic`` and ``restart-ds2`` start executors through Spark and run in the real
mode only. An ``oracle`` line (fewest whole executors per interval, perfect foresight,
the measured start-up) is printed whichever policies ran.

One JSON line per policy and mode (``"bench": "trace"``), the oracle line and a ratios
line per mode, appended to ``benchmarks/results/trace.jsonl``; a timeline picture per
mode in ``--out``.

Run: ``.venv/bin/python benchmarks/bench_trace.py --trace FILE [--quick] [--policies a,b]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from _results import record

from streamscale.errors import StreamscaleError
from streamscale.scenarios.surge import STARTUP_MODES, SURGE_POLICIES, config_dict, run_surge
from streamscale.scenarios.surge_report import plot_surge
from streamscale.scenarios.surge_score import summarize_surge, timeline
from streamscale.scenarios.traffic import TrafficConfig, measure_startup, oracle

TARGETS = "elastic slo_tuples>=0.98 with <=0.7x static-peak and <=1.3x oracle core-seconds; " \
    "no more core-seconds than spark-dynamic; ahead of restart-ds2 on both"  # fmt: skip
DEFAULT_POLICIES = "elastic,static-peak,spark-dynamic,restart-ds2"
#: policies whose executors Spark itself starts: the real start-up only
REAL_ONLY = ("spark-dynamic", "spark-dynamic-tuned", "restart-ds2")


def _emit(line: dict[str, Any], argv: list[str]) -> None:
    print(json.dumps(record("trace", line, argv=argv), default=str), flush=True)


def ratios(figures: dict[str, dict[str, Any]], oracle_cs: float) -> dict[str, Any]:
    """Elastic against static-peak, the oracle and the Spark baselines that ran."""
    el = figures.get("elastic", {})
    out: dict[str, Any] = {"figure": "ratios", "targets": TARGETS}
    if "slo_tuples" not in el:
        return out
    cs, slo = el["core_seconds"], el["slo_tuples"]
    out.update(elastic_slo_tuples=slo, core_seconds_vs_oracle=cs / oracle_cs)
    checks = [slo >= 0.98, cs / oracle_cs <= 1.3]
    for name, f in figures.items():
        if name == "elastic" or "core_seconds" not in f:
            continue
        key = name.replace("-", "_")
        out[f"core_seconds_vs_{key}"] = cs / f["core_seconds"]
        out[f"slo_tuples_minus_{key}"] = slo - f["slo_tuples"]
        if name == "static-peak":
            checks.append(cs / f["core_seconds"] <= 0.7)
        elif name == "spark-dynamic":
            checks.append(cs <= f["core_seconds"])
        elif name == "restart-ds2":
            checks.append(cs < f["core_seconds"] and slo > f["slo_tuples"])
    out["compared"] = sorted(n for n in figures if n != "elastic")
    known = {"static-peak", "spark-dynamic", "restart-ds2"} <= set(figures)
    out["met"] = all(checks) if known else (False if not all(checks) else None)
    return out


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="A timestamp,value CSV.")
    ap.add_argument("--window", default=None,
                    help="START,HOURS of the trace (default: the first 24 h).")  # fmt: skip
    ap.add_argument("--minutes", type=float, default=None,
                    help="Replay the window in M minutes (default 10; --quick 4).")  # fmt: skip
    ap.add_argument("--peak-rate", type=float, default=300.0,
                    help="Tuples/s the window's 99th percentile maps to.")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="4 minutes per policy, 30 s warm-up.")
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--startup", default="real", help="real, emulated or real,emulated.")
    ap.add_argument("--startup-delay", type=float, default=None,
                    help="Start-up seconds of the emulation and the oracle (default: measured "
                    "for one executor at the start).")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=8)
    ap.add_argument("--executor-cores", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=None, help="Seconds before the replay.")
    ap.add_argument("--out", type=Path,
                    default=Path(tempfile.gettempdir()) / "streamscale-trace")  # fmt: skip
    ap.add_argument("--metrics", type=Path, default=None,
                    help="Keep each run's metrics.jsonl in METRICS/MODE/POLICY.")  # fmt: skip
    return ap.parse_args(argv)


def _config(args: argparse.Namespace) -> TrafficConfig:
    """The scenario from the arguments: every bad value is one line, before Spark starts."""
    max_ex = args.workers * (args.worker_cores // args.executor_cores)
    if max_ex < 1:
        raise StreamscaleError("no executor fits a worker", item="--executor-cores")
    if args.startup_delay is not None and not args.startup_delay >= 0:
        raise StreamscaleError(f"must be >= 0, got {args.startup_delay}", item="--startup-delay")
    minutes = args.minutes if args.minutes is not None else (4.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else (30.0 if args.quick else 45.0)
    return TrafficConfig.from_trace(
        args.trace, window=args.window, minutes=minutes, peak_rate=args.peak_rate,
        executor_cores=args.executor_cores, max_executors=max_ex, elastic_instances=max_ex,
        warmup_s=warmup,
    )  # fmt: skip


def _plan(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    modes = [m.strip() for m in args.startup.split(",") if m.strip()]
    for p in policies:
        if p not in SURGE_POLICIES:
            raise StreamscaleError(f"unknown policy (known: {', '.join(SURGE_POLICIES)})", item=p)
    for m in modes:
        if m not in STARTUP_MODES:
            raise StreamscaleError(f"unknown mode (known: {', '.join(STARTUP_MODES)})", item=m)
    if not policies or not modes:
        raise StreamscaleError("nothing to run", item="--policies/--startup")
    if modes == ["emulated"] and all(p in REAL_ONLY for p in policies):
        raise StreamscaleError(
            "no emulated start-up (Spark starts these policies' executors): use --startup real",
            item=",".join(policies),
        )
    return policies, modes


def run_mode(
    master: str, cfg: TrafficConfig, mode: str, policies: list[str], args: argparse.Namespace,
    startup_s: float, argv: list[str],
) -> None:  # fmt: skip
    """The policies under one start-up mode: their lines, the oracle's, the ratios."""
    from dataclasses import replace

    delay = args.startup_delay if args.startup_delay is not None else startup_s
    run_cfg = replace(cfg, startup=mode, startup_delay_s=delay if mode == "emulated" else 0.0)
    names = [p for p in policies if mode == "real" or p not in REAL_ONLY]
    metrics = None if args.metrics is None else args.metrics / mode
    outcomes = run_surge(
        master, run_cfg, names, metrics_dir=metrics,
        on_batch=lambda row: print(json.dumps(row, default=str), file=sys.stderr, flush=True),
    )  # fmt: skip
    ora_startup = delay if mode == "emulated" else startup_s
    ora = oracle(cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
                 startup_s=ora_startup)  # fmt: skip
    figures = {o.policy: summarize_surge(o, run_cfg) for o in outcomes}
    ora_window = cfg.trace.length_s
    common = {"cost_kind": "wall", "emulated_cores": cfg.max_executors * cfg.executor_cores,
              "startup": mode, "startup_delay_s": run_cfg.startup_delay_s,
              "measured_startup_s": startup_s if args.startup_delay is None else None, "quick": args.quick, **cfg.trace_fields(),
              "config": {k: v for k, v in config_dict(run_cfg).items()
                         if k not in ("load", "schedule")}}  # fmt: skip
    for o in outcomes:
        _emit({"bench": "trace", **figures[o.policy], "settings": o.settings, **common}, argv)
    _emit({"bench": "trace", "policy": "oracle", "core_seconds": ora.core_seconds,
           "mean_executors": ora.mean_executors,
           "peak_executors": max(ora.executors), "mean_cores": ora.core_seconds / ora_window, "oracle_startup_s": ora.startup_s,
           **common}, argv)  # fmt: skip
    _emit({"bench": "trace", **ratios(figures, ora.core_seconds), **common}, argv)
    (args.out / f"timeline-{mode}.json").write_text(
        json.dumps({o.policy: timeline(o, run_cfg) for o in outcomes}, indent=1, default=str)
    )
    (args.out / f"executors-{mode}.json").write_text(json.dumps(
        {o.policy: {"t0": o.t0, "requests": o.requests, "executors": o.executors}
         for o in outcomes}, default=lambda x: x.__dict__ if hasattr(x, "__dict__") else
        [getattr(x, f) for f in x.__slots__]))  # fmt: skip
    plot_surge(args.out / f"timeline-{mode}.png", outcomes, run_cfg, oracle=ora)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _args(argv)
    try:
        policies, modes = _plan(args)
        cfg = _config(args)
    except StreamscaleError as exc:
        print(f"bench_trace: {exc}", file=sys.stderr)
        return 2
    from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

    args.out.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="streamscale-trace-"))
    info = cluster_up(args.workers, args.worker_cores, memory=f"{args.worker_cores}g", directory=d)
    try:
        # a stated delay is the start-up of both the emulation and the oracle; else measured
        startup_s = args.startup_delay
        if startup_s is None:
            startup_s = measure_startup(info.master_url, cfg)
        if not math.isfinite(startup_s):
            startup_s = cfg.startup_delay_s
        for mode in modes:
            run_mode(info.master_url, cfg, mode, policies, args, startup_s, argv)
    finally:
        cluster_down(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
