"""Elasticity on real traffic: a load trace replayed as offered load under each policy.

A replay stands for a deployment (``--deployment``, :mod:`streamscale.scenarios.deployment`):
``minutes`` (c = 60: trigger 2 min, latency target 10 min, start-up 60 s emulated at 1 s;
24 h, ``--quick`` the 6 h around the replayed day's steepest rise), ``seconds`` (c = 10:
trigger 20 s, target 100 s, start-up real; 2 h, ``--quick`` 1 h) or ``compressed`` (a day
in 4 minutes, the stress case). Every time constant is the deployment's divided by ``c``,
and every line says which deployment it stands for, with the real trigger, target and
start-up and the core-hours of the real window. The replayed day is the file's 8th when
it has 8 days or more; the days before it are written out as the forecast's history
(``--history FILE`` gives another), never the window or what follows it.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores`` task slots,
executors of ``--executor-cores``), reads a ``timestamp,value`` trace (``--trace``; its
window's 99th percentile maps to ``--peak-rate`` tuples/s, values above clip at 1.25×),
and runs the surge scenario's harness on that
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

``--repeats N`` runs every policy N times, each in a fresh session, the order rotated
at each repeat, and with two policies or more the first of them once more at the end
(its line marked ``order_check``, then a ``"figure": "order_check"`` line of its figures
beside its first run's: how far the host drifted); one JSON line per policy, mode and
repeat (``"bench": "trace"``, with ``repeat``, ``position`` and ``excess``: the
core-hours above the oracle split by cause, :mod:`streamscale.scenarios.excess`), the
oracle line and a ratios line per repeat, then
one ``"figure": "summary"`` line per policy and mode with the median, min and max of
``slo_tuples``, ``core_hours`` and the ratios over the repeats — all appended to
``benchmarks/results/trace.jsonl``; a timeline picture per mode in ``--out``.

Run: ``.venv/bin/python benchmarks/bench_trace.py --trace FILE --deployment minutes [--quick]
[--repeats 3] [--policies a,b]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from _fair import order_check, run_order, spread
from _results import record

from streamscale.errors import StreamscaleError
from streamscale.scenarios.deployment import DEPLOYMENTS, Deployment, deployment
from streamscale.scenarios.excess import excess_split
from streamscale.scenarios.surge import STARTUP_MODES, SURGE_POLICIES, config_dict, run_surge
from streamscale.scenarios.surge_report import plot_surge
from streamscale.scenarios.surge_score import summarize_surge, timeline
from streamscale.scenarios.traffic import (
    Oracle,
    TrafficConfig,
    held_of,
    measure_startup,
    oracle,
)

#: each deployment's targets for ``elastic`` (tuples within target; core-hours over the
#: oracle's and over static-peak's; against the Spark baselines where they ran)
TARGETS = {
    "minutes": {"slo_tuples": 0.99, "vs_oracle": 1.25, "vs_static_peak": 0.75},
    "seconds": {"slo_tuples": 0.98, "vs_oracle": 1.5},
    "compressed": {"slo_tuples": 0.95, "vs_static_peak": 1.0},
}
#: the policies each deployment runs by default
DEFAULT_POLICIES = {
    "minutes": "elastic,elastic-reactive,static-peak",
    "seconds": "elastic,static-peak,spark-dynamic-tuned,restart-ds2",
    "compressed": "elastic,static-peak,spark-dynamic-tuned,restart-ds2",
}
#: policies whose executors Spark itself starts: the real start-up only
REAL_ONLY = ("spark-dynamic", "spark-dynamic-tuned", "restart-ds2")
#: the figures a summary line gives the median and range of
CHECKED = ("slo_tuples", "core_seconds", "p99_ms")
"""The figures of the order check: the first policy's first run against its run again."""
SUMMARIZED = ("slo_tuples", "core_hours", "core_hours_vs_oracle", "core_hours_vs_static_peak")


def _emit(line: dict[str, Any], argv: list[str]) -> None:
    print(json.dumps(record("trace", line, argv=argv), default=str), flush=True)


def ratios(figures: dict[str, dict[str, Any]], oracle_cs: float, dep: str) -> dict[str, Any]:
    """Elastic against the oracle, static-peak and the other policies that ran, and
    whether the deployment's targets (:data:`TARGETS`) were met."""
    el = figures.get("elastic", {})
    target = TARGETS.get(dep, {})
    out: dict[str, Any] = {"figure": "ratios", "targets": target}
    if "slo_tuples" not in el:
        return out
    cs, slo = el["core_seconds"], el["slo_tuples"]
    out.update(elastic_slo_tuples=slo, core_seconds_vs_oracle=cs / oracle_cs)
    checks = [
        slo >= target.get("slo_tuples", 0.0),
        cs / oracle_cs <= target.get("vs_oracle", math.inf),
    ]
    for name, f in figures.items():
        if name == "elastic" or "core_seconds" not in f:
            continue
        key = name.replace("-", "_")
        out[f"core_seconds_vs_{key}"] = cs / f["core_seconds"]
        out[f"slo_tuples_minus_{key}"] = slo - f["slo_tuples"]
        if name == "static-peak":
            checks.append(cs / f["core_seconds"] <= target.get("vs_static_peak", math.inf))
        elif name == "spark-dynamic-tuned":
            checks.append(cs <= f["core_seconds"])
        elif name == "restart-ds2":
            checks.append(cs < f["core_seconds"] and slo > f["slo_tuples"])
    out["compared"] = sorted(n for n in figures if n != "elastic")
    out["met"] = all(checks)
    return out


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True, help="A timestamp,value CSV.")
    ap.add_argument("--deployment", default="minutes",
                    help=f"The deployment the replay stands for: {', '.join(DEPLOYMENTS)}.")  # fmt: skip
    ap.add_argument("--window", default=None,
                    help="START,HOURS of the trace (default: the deployment's window of the "
                    "file's 8th day, or its first).")  # fmt: skip
    ap.add_argument("--minutes", type=float, default=None,
                    help="Replay the window in M minutes, every time constant rescaled with "
                    "it (default: the deployment's compression).")  # fmt: skip
    ap.add_argument("--history", default=None,
                    help="The load's earlier days (the trace format) for the forecast "
                    "(default: the trace's rows before the window).")  # fmt: skip
    ap.add_argument("--peak-rate", type=float, default=300.0,
                    help="Tuples/s the window's 99th percentile maps to.")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="The deployment's short window.")
    ap.add_argument("--repeats", type=int, default=1, help="Runs of every policy.")
    ap.add_argument("--policies", default=None, help="Default: the deployment's.")
    ap.add_argument("--startup", default=None,
                    help="real, emulated or real,emulated (default: the deployment's).")  # fmt: skip
    ap.add_argument("--startup-delay", type=float, default=None,
                    help="Replayed start-up seconds of the emulation and the oracle (default: "
                    "the deployment's when emulated, measured for one executor when real).")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=8)
    ap.add_argument("--executor-cores", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=None, help="Seconds before the replay.")
    ap.add_argument("--out", type=Path,
                    default=Path(tempfile.gettempdir()) / "streamscale-trace")  # fmt: skip
    ap.add_argument("--metrics", type=Path, default=None,
                    help="Keep each run's metrics.jsonl in METRICS/MODE/POLICY.")  # fmt: skip
    return ap.parse_args(argv)


def _config(args: argparse.Namespace, dep: Deployment) -> TrafficConfig:
    """The scenario from the arguments: every bad value is one line, before Spark starts."""
    max_ex = args.workers * (args.worker_cores // args.executor_cores)
    if max_ex < 1:
        raise StreamscaleError("no executor fits a worker", item="--executor-cores")
    if args.startup_delay is not None and not args.startup_delay >= 0:
        raise StreamscaleError(f"must be >= 0, got {args.startup_delay}", item="--startup-delay")
    if args.minutes is not None and not args.minutes > 0:
        raise StreamscaleError(f"must be > 0, got {args.minutes}", item="--minutes")
    if not 1 <= args.repeats <= 20:
        raise StreamscaleError(f"must be 1 to 20, got {args.repeats}", item="--repeats")
    warmup = args.warmup if args.warmup is not None else 30.0
    extra = {} if args.startup_delay is None else {"startup_delay_s": args.startup_delay}
    return TrafficConfig.for_deployment(
        args.trace, dep, quick=args.quick, window=args.window, minutes=args.minutes,
        history=args.history, history_out=args.out / "history.csv", peak_rate=args.peak_rate,
        executor_cores=args.executor_cores, max_executors=max_ex, elastic_instances=max_ex,
        warmup_s=warmup, **extra,
    )  # fmt: skip


def _plan(args: argparse.Namespace, dep: Deployment) -> tuple[list[str], list[str]]:
    text = args.policies if args.policies is not None else DEFAULT_POLICIES[dep.name]
    policies = [p.strip() for p in text.split(",") if p.strip()]
    modes = [m.strip() for m in (args.startup or dep.startup).split(",") if m.strip()]
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


def _common(cfg: TrafficConfig, dep: Deployment, mode: str, startup_s: float,
            args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """What every line of one mode says: the harness, the deployment, the trace."""
    return {
        "cost_kind": "wall", "emulated_cores": cfg.max_executors * cfg.executor_cores,
        "startup": mode, "startup_delay_s": startup_s, **dep.fields(startup_s),
        "deployment_words": dep.describe(mode, startup_s), "quick": args.quick,
        "history": cfg.history is not None, **cfg.trace_fields(),
        "config": {k: v for k, v in config_dict(cfg).items() if k not in ("load", "schedule")},
    }  # fmt: skip


def _policy_line(o: Any, fig: dict[str, Any], cfg: TrafficConfig, dep: Deployment,
                 ora: Oracle) -> dict[str, Any]:  # fmt: skip
    line = {"bench": "trace", **fig, "settings": o.settings}
    if "core_seconds" in fig:
        line["core_hours"] = dep.core_hours(fig["core_seconds"])
        line["excess"] = excess_split(
            held_of(o, cfg), cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
            startup_s=ora.startup_s, target_s=cfg.latency_target_ms / 1000.0,
            oracle_core_seconds=ora.core_seconds,
        )  # fmt: skip
    return line


def run_once(master: str, cfg: TrafficConfig, dep: Deployment, mode: str, names: list[str],
             startup_s: float, repeat: int, args: argparse.Namespace,
             argv: list[str]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """One repeat of the policies under one start-up mode: their lines, the oracle's, the
    ratios; returns each policy's figures (``oracle`` among them)."""
    run_cfg = replace(cfg, startup=mode, startup_delay_s=startup_s)
    metrics = None if args.metrics is None else args.metrics / mode / str(repeat)
    outcomes = run_surge(
        master, run_cfg, names, metrics_dir=metrics,
        on_batch=lambda row: print(json.dumps(row, default=str), file=sys.stderr, flush=True),
    )  # fmt: skip
    ora = oracle(cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
                 startup_s=startup_s)  # fmt: skip
    common = {**_common(run_cfg, dep, mode, startup_s, args), "repeat": repeat}
    figures = {o.policy: summarize_surge(o, run_cfg) for o in outcomes}
    for o in outcomes:
        _emit({**_policy_line(o, figures[o.policy], run_cfg, dep, ora), **common,
               "position": names.index(o.policy)}, argv)  # fmt: skip
    ora_line = {"policy": "oracle", "core_seconds": ora.core_seconds,
                "core_hours": dep.core_hours(ora.core_seconds),
                "mean_executors": ora.mean_executors, "peak_executors": max(ora.executors),
                "mean_cores": ora.core_seconds / cfg.trace.length_s,
                "oracle_startup_s": ora.startup_s}  # fmt: skip
    _emit({"bench": "trace", **ora_line, **common}, argv)
    _emit({"bench": "trace", **ratios(figures, ora.core_seconds, dep.name), **common}, argv)
    _pictures(args.out, mode, repeat, outcomes, run_cfg, ora)
    return {**figures, "oracle": {"core_seconds": ora.core_seconds}}


def _pictures(out: Path, mode: str, repeat: int, outcomes: list[Any], cfg: TrafficConfig,
              ora: Oracle) -> None:  # fmt: skip
    tag = mode if repeat == 0 else f"{mode}-{repeat}"
    (out / f"timeline-{tag}.json").write_text(
        json.dumps({o.policy: timeline(o, cfg) for o in outcomes}, indent=1, default=str)
    )
    (out / f"executors-{tag}.json").write_text(json.dumps(
        {o.policy: {"t0": o.t0, "requests": o.requests, "executors": o.executors}
         for o in outcomes}, default=lambda x: x.__dict__ if hasattr(x, "__dict__") else
        [getattr(x, f) for f in x.__slots__]))  # fmt: skip
    plot_surge(out / f"timeline-{tag}.png", outcomes, cfg, oracle=ora)


def summary_lines(runs: list[dict[str, dict[str, Any]]], dep: Deployment) -> list[dict[str, Any]]:
    """One line per policy: the median, min and max over the repeats of
    :data:`SUMMARIZED` (``core_hours`` of the real window; ratios within each repeat).

    >>> runs = [{"elastic": {"slo_tuples": s, "core_seconds": c}, "oracle": {"core_seconds": 60.0},
    ...          "static-peak": {"slo_tuples": 1.0, "core_seconds": 240.0}}
    ...         for s, c in ((0.99, 72.0), (1.0, 90.0), (0.98, 66.0))]
    >>> line = summary_lines(runs, DEPLOYMENTS["minutes"])[0]
    >>> line["policy"], line["repeats"], line["slo_tuples"], line["core_hours_vs_oracle"]["median"]
    ('elastic', 3, {'median': 0.99, 'min': 0.98, 'max': 1.0}, 1.2)
    """
    names = [n for n in runs[0] if n != "oracle"]
    out = []
    for name in names:
        per: dict[str, list[float]] = {k: [] for k in SUMMARIZED}
        for run in runs:
            f = run.get(name, {})
            if "core_seconds" not in f:
                continue
            per["slo_tuples"].append(f["slo_tuples"])
            per["core_hours"].append(dep.core_hours(f["core_seconds"]))
            per["core_hours_vs_oracle"].append(f["core_seconds"] / run["oracle"]["core_seconds"])
            peak = run.get("static-peak", {}).get("core_seconds")
            if peak:
                per["core_hours_vs_static_peak"].append(f["core_seconds"] / peak)
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append(
            {"figure": "summary", "policy": name, "repeats": len(per["core_hours"]), **stats}
        )
    return out


def run_mode(master: str, cfg: TrafficConfig, dep: Deployment, mode: str, policies: list[str],
             startup_s: float, args: argparse.Namespace, argv: list[str]) -> None:  # fmt: skip
    """Every repeat of the policies under one start-up mode, then their summary lines."""
    names = [p for p in policies if mode == "real" or p not in REAL_ONLY]
    orders = run_order(names, args.repeats)
    runs = []
    for k, order in enumerate(orders[: args.repeats]):
        figs = run_once(master, cfg, dep, mode, order, startup_s, k, args, argv)
        runs.append({n: figs[n] for n in [*names, "oracle"] if n in figs})
    common = _common(replace(cfg, startup=mode), dep, mode, startup_s, args)
    if len(orders) > args.repeats:
        again = run_again(master, cfg, dep, mode, orders[-1][0], startup_s, args, argv)
        check = order_check(runs[0].get(orders[-1][0], {}), again, CHECKED)
        _emit({"bench": "trace", **check, "policy": orders[-1][0], **common}, argv)
    for line in summary_lines(runs, dep):
        _emit({"bench": "trace", **line, **common}, argv)


def run_again(master: str, cfg: TrafficConfig, dep: Deployment, mode: str, name: str,
              startup_s: float, args: argparse.Namespace,
              argv: list[str]) -> dict[str, Any]:  # fmt: skip
    """The run's first policy once more, after every repeat: the order check's run (its
    line is marked ``order_check`` and kept out of the summaries and tables)."""
    run_cfg = replace(cfg, startup=mode, startup_delay_s=startup_s)
    (o,) = run_surge(master, run_cfg, [name])
    ora = oracle(cfg.trace, cost_ms=cfg.cost_ms, executor_cores=cfg.executor_cores,
                 startup_s=startup_s)  # fmt: skip
    fig = summarize_surge(o, run_cfg)
    common = _common(run_cfg, dep, mode, startup_s, args)
    _emit({**_policy_line(o, fig, run_cfg, dep, ora), **common, "repeat": args.repeats,
           "position": 0, "order_check": True}, argv)  # fmt: skip
    return fig


def _startup(args: argparse.Namespace, dep: Deployment, cfg: TrafficConfig, mode: str,
             master: str, measured: list[float]) -> float:  # fmt: skip
    """The replayed start-up of a mode: the stated delay, the deployment's emulated one,
    or (real) one executor's measured on this host at the start (once)."""
    if args.startup_delay is not None:
        return float(args.startup_delay)
    if mode == "emulated":
        return cfg.startup_delay_s
    if not measured:
        got = measure_startup(master, cfg)
        measured.append(got if math.isfinite(got) else dep.emulated_startup_s)
    return measured[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _args(argv)
    try:
        dep = deployment(args.deployment)
        policies, modes = _plan(args, dep)
        args.out.mkdir(parents=True, exist_ok=True)
        cfg = _config(args, dep)
    except StreamscaleError as exc:
        print(f"bench_trace: {exc}", file=sys.stderr)
        return 2
    from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up

    dep = cfg.deployment or dep
    d = Path(tempfile.mkdtemp(prefix="streamscale-trace-"))
    info = cluster_up(args.workers, args.worker_cores, memory=f"{args.worker_cores}g", directory=d)
    try:
        measured: list[float] = []
        for mode in modes:
            startup_s = _startup(args, dep, cfg, mode, info.master_url, measured)
            run_mode(info.master_url, cfg, dep, mode, policies, startup_s, args, argv)
    finally:
        cluster_down(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
