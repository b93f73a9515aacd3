"""Executors that follow streamscale's plan under a load surge, against static sizing,
Spark's dynamic allocation and restart-based DS2 rescaling of Spark's own stateful
operator.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores`` task
slots, executors of ``--executor-cores``, 2 by default), runs the surge scenario
(:mod:`streamscale.scenarios.surge`: a warm-up, then base → peak → base offered load,
per-tuple cost *waited* — ``cost_kind: wall`` — so the slots behave like cores on this
small machine) under each policy in turn, and prints one JSON line per policy
(``"bench": "autoscale"``) and one line of ratios (``"figure": "ratios"``). Every policy
is scored from Spark's own records (:mod:`streamscale.scenarios.surge_score`):
``slo_tuples`` (tuples that met the latency target end to end) is the headline,
``slo_batches`` beside it, core-seconds billed from each executor's request. The ratio
line carries the oracle core-seconds floor (the fewest whole executors per phase) for
executors of 1, 2 and 4 cores. Lines are appended to ``benchmarks/results/autoscale.jsonl``;
a timeline plot goes to ``--out``.

Fair order: ``--repeats N`` (1 to 20, default 1; ``--smoke`` runs 1) runs every
configuration (a policy under a start-up mode) N times, the order rotated by one at
each repeat (:func:`run_order`), so none always runs first or last; every policy line
carries ``repeat`` (0-based) and ``position`` (its place in that repeat's order), and
each repeat ends with its ratios line per mode (``repeat`` too) and its timeline
(``timeline.json``, then ``timeline-1.json`` …; ``-emulated`` before the number in the
emulated mode). With two configurations or more, the run's first configuration runs
once more at the very end: its line carries ``"order_check": true`` (counted in no
summary) and an ``{"figure": "order_check"}`` line gives its ``slo_tuples`` and
``core_seconds`` beside the first run's (``first``, ``again``) and ``again_over_first``.
Last, one ``{"figure": "summary"}`` line per policy and mode: ``repeats`` (those it was
scored in) and the median, min and max over the repeats of ``slo_tuples`` and
``core_seconds``, and on ``elastic``'s the same of every figure of the ratios line.

Run: ``.venv/bin/python benchmarks/bench_autoscale.py [--quick | --smoke] [--policies a,b]
[--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from _fair import number, order_check, run_order, spread
from _results import record

from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
from streamscale.scenarios.surge import (
    STARTUP_MODES,
    SURGE_POLICIES,
    SurgeConfig,
    SurgeOutcome,
    config_dict,
    run_surge,
)
from streamscale.scenarios.surge_report import plot_surge
from streamscale.scenarios.surge_score import summarize_surge, timeline
from streamscale.scenarios.traffic import measure_startup

TARGETS = "elastic slo_tuples>=0.90 with <=0.75x static-peak core-seconds; ahead of " \
    "spark-dynamic(-tuned) and restart-ds2 on both"  # fmt: skip
#: the figures of a policy line that the summary and the order check give
SUMMARIZED = ("slo_tuples", "core_seconds")

#: a configuration: (start-up mode, policy)
Config = tuple[str, str]


def _emit(line: dict[str, Any], argv: list[str]) -> None:
    print(json.dumps(record("autoscale", line, argv=argv), default=str), flush=True)


def ratios(figures: dict[str, dict[str, Any]], cfg: SurgeConfig) -> dict[str, Any]:
    """Elastic against every other policy that ran: core-seconds ratio and SLO difference."""
    el = figures.get("elastic", {})
    out: dict[str, Any] = {
        "figure": "ratios",
        "targets": TARGETS,
        "oracle_core_seconds_vs_static_peak": {
            f"{c}-core": round(cfg.oracle_core_ratio(c), 4) for c in (1, 2, 4)
        },
    }
    if "slo_tuples" not in el:
        return out
    out["elastic_slo_tuples"] = el["slo_tuples"]
    ahead = True
    baselines: list[str] = []
    for name, f in figures.items():
        if name == "elastic" or "core_seconds" not in f:
            continue
        key = name.replace("-", "_")
        out[f"core_seconds_vs_{key}"] = el["core_seconds"] / f["core_seconds"]
        out[f"slo_tuples_minus_{key}"] = el["slo_tuples"] - f["slo_tuples"]
        if name.startswith(("spark-dynamic", "restart")):
            baselines.append(name)
            ahead &= el["core_seconds"] < f["core_seconds"] and el["slo_tuples"] >= f["slo_tuples"]
    peak = figures.get("static-peak", {})
    for name, f in figures.items():  # elastic's warm-capacity variants, on their own
        if name.startswith("elastic-") and "core_seconds" in f and "core_seconds" in peak:
            key = name.replace("-", "_")
            out[f"{key}_slo_tuples"] = f["slo_tuples"]
            out[f"{key}_core_seconds_vs_static_peak"] = f["core_seconds"] / peak["core_seconds"]
    cs_peak = out.get("core_seconds_vs_static_peak")
    own = bool(el["slo_tuples"] >= 0.90 and cs_peak is not None and cs_peak <= 0.75)
    out["met_vs_static_peak"] = own
    out["baselines_compared"] = baselines
    # the targets name the Spark baselines: without them in this run, "met" is not known
    out["met"] = own and ahead if baselines else (False if not own else None)
    return out


def order_check_line(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """The order check (:func:`_fair.order_check`) of :data:`SUMMARIZED`."""
    return order_check(first, again, SUMMARIZED)


def summary_lines(
    runs: list[dict[Config, dict[str, Any]]], ratio_runs: list[dict[str, dict[str, Any]]],
    configs: list[Config],
) -> list[dict[str, Any]]:  # fmt: skip
    """One line per configuration: in how many repeats it was scored and the median, min
    and max over them of :data:`SUMMARIZED`; ``elastic``'s also of every number on its
    mode's ratios lines (``runs``: each repeat's figures per configuration;
    ``ratio_runs``: each repeat's ratios line per mode)."""
    out = []
    for mode, policy in configs:
        scored = [r[(mode, policy)] for r in runs if "slo_tuples" in r.get((mode, policy), {})]
        per = {k: [f[k] for f in scored if number(f.get(k))] for k in SUMMARIZED}
        if policy == "elastic":
            for rat in (r[mode] for r in ratio_runs if mode in r):
                for k, v in rat.items():
                    if number(v):
                        per.setdefault(k, []).append(v)
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append({"figure": "summary", "policy": policy, "startup": mode,
                    "repeats": len(scored), **stats})  # fmt: skip
    return out


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 s phases instead of 60 s.")
    ap.add_argument(
        "--smoke", action="store_true",
        help="One 4-slot worker, elastic and static-peak, 5 s phases: runs at all.",
    )  # fmt: skip
    ap.add_argument("--policies", default=",".join(SURGE_POLICIES))
    ap.add_argument("--repeats", type=int, default=1,
                    help="Runs of every configuration, rotated at each (1 to 20).")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=8)
    ap.add_argument("--executor-cores", type=int, default=SurgeConfig.executor_cores)
    ap.add_argument(
        "--pin", action="store_true",
        help="Enforce the plan's placement: each task prefers its unit's executor (locality "
        "wait) instead of any free slot.",
    )  # fmt: skip
    ap.add_argument("--out", type=Path,
                    default=Path(tempfile.gettempdir()) / "streamscale-autoscale")  # fmt: skip
    ap.add_argument("--startup", default="real",
                    help="Executor start-up: real, emulated (every executor started before the "
                    "run, a request usable after --startup-delay, billed from it) or "
                    "real,emulated.")  # fmt: skip
    ap.add_argument("--startup-delay", type=float, default=None,
                    help="Emulated start-up seconds (default: measured for one executor).")  # fmt: skip
    ap.add_argument("--metrics", type=Path, default=None,
                    help="Keep each run's metrics.jsonl in METRICS/MODE/POLICY (METRICS/"
                    "MODE-K/POLICY for repeat K > 0, METRICS/MODE-again/POLICY for the order "
                    "check; for `streamscale replay`).")  # fmt: skip
    args = ap.parse_args(argv)
    if args.smoke:
        args.workers, args.worker_cores, args.executor_cores = 1, 4, 2
        args.policies = "elastic,static-peak"
    return args


def _refusal(args: argparse.Namespace, policies: list[str], modes: list[str]) -> str | None:
    """What is wrong with the arguments, in one line (None: nothing), before Spark starts."""
    for m in modes:
        if m not in STARTUP_MODES:
            return f"{m}: unknown mode (known: {', '.join(STARTUP_MODES)})"
    for p in policies:
        if p not in SURGE_POLICIES:
            return f"{p}: unknown policy (known: {', '.join(SURGE_POLICIES)})"
    if not 1 <= args.repeats <= 20:
        return f"--repeats: must be 1 to 20, got {args.repeats}"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _args(argv)
    slots = args.workers * args.worker_cores
    max_ex = args.workers * (args.worker_cores // args.executor_cores)
    cfg = SurgeConfig(
        phase_s=30.0 if args.quick else 60.0,
        executor_cores=args.executor_cores,
        max_executors=max_ex,
        elastic_instances=max_ex,
        pin=args.pin,
    )
    if args.smoke:  # a light surge: phases and warm-up of seconds, 1 s triggers
        cfg = replace(cfg, phase_s=5.0, warmup_s=5.0, base_rate=20.0, cost_ms=5.0,
                      trigger_s=1.0, keys=200, shards=8)  # fmt: skip
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    modes = [m.strip() for m in args.startup.split(",") if m.strip()]
    if (refused := _refusal(args, policies, modes)) is not None:
        print(f"bench_autoscale: {refused}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="streamscale-autoscale-"))
    info = cluster_up(args.workers, args.worker_cores, memory=f"{args.worker_cores}g", directory=d)
    try:
        delay = args.startup_delay
        if delay is None and "emulated" in modes:
            delay = measure_startup(info.master_url, cfg)
        cfgs = {m: replace(cfg, startup=m, startup_delay_s=delay or 0.0) for m in modes}
        # Spark's own dynamic allocation and restarts start executors through Spark
        configs = [(m, p) for m in modes for p in policies if m == "real" or p in EMULABLE]
        run_all(info.master_url, cfgs, configs, args, slots, argv)
    finally:
        cluster_down(d)
    return 0


#: the policies whose executors streamscale requests (the emulated start-up applies)
EMULABLE = ("elastic", "elastic-standby", "elastic-proactive", "proportional",
            "static-peak", "static-base")  # fmt: skip


def _common(cfg: SurgeConfig, args: argparse.Namespace, slots: int) -> dict[str, Any]:
    """What every line of one start-up mode says."""
    return {"cost_kind": "wall", "emulated_cores": slots, "quick": args.quick,
            "startup": cfg.startup, "startup_delay_s": cfg.startup_delay_s,
            "config": config_dict(cfg)}  # fmt: skip


def _run(master: str, cfg: SurgeConfig, policy: str, args: argparse.Namespace,
         tag: str) -> SurgeOutcome:  # fmt: skip
    """One run of one policy (its metrics in ``METRICS/<tag>`` when kept)."""
    metrics = None if args.metrics is None else args.metrics / tag
    return run_surge(
        master, cfg, [policy], metrics_dir=metrics,
        on_batch=lambda row: print(json.dumps(row, default=str), file=sys.stderr, flush=True),
    )[0]  # fmt: skip


def run_all(master: str, cfgs: dict[str, SurgeConfig], configs: list[Config],
            args: argparse.Namespace, slots: int, argv: list[str]) -> None:  # fmt: skip
    """Every repeat in its order (:func:`run_order`), the order check, the summary lines."""
    orders = run_order(configs, args.repeats)
    runs: list[dict[Config, dict[str, Any]]] = []
    ratio_runs: list[dict[str, dict[str, Any]]] = []
    for k, order in enumerate(orders[: args.repeats]):
        figures = _repeat(master, cfgs, order, k, args, slots, argv)
        runs.append(figures)
        ratio_runs.append(_ratio_lines(figures, cfgs, configs, k, args, slots, argv))
    if len(orders) > args.repeats:
        mode, policy = orders[-1][0]
        o = _run(master, cfgs[mode], policy, args, f"{mode}-again")
        again = summarize_surge(o, cfgs[mode])
        common = _common(cfgs[mode], args, slots)
        _emit({"bench": "autoscale", **again, "settings": o.settings, **common,
               "repeat": args.repeats, "position": 0, "order_check": True}, argv)  # fmt: skip
        check = order_check_line(runs[0].get((mode, policy), {}), again)
        _emit({"bench": "autoscale", **check, "policy": policy, **common}, argv)
    for line in summary_lines(runs, ratio_runs, configs):
        _emit({"bench": "autoscale", **line, **_common(cfgs[line["startup"]], args, slots)}, argv)


def _repeat(master: str, cfgs: dict[str, SurgeConfig], order: list[Config], k: int,
            args: argparse.Namespace, slots: int,
            argv: list[str]) -> dict[Config, dict[str, Any]]:  # fmt: skip
    """One repeat: each configuration in ``order`` run and its line printed; each mode's
    timeline written; returns each configuration's figures."""
    figures: dict[Config, dict[str, Any]] = {}
    outcomes: dict[str, list[SurgeOutcome]] = {}
    for i, (mode, policy) in enumerate(order):
        o = _run(master, cfgs[mode], policy, args, mode if k == 0 else f"{mode}-{k}")
        figures[(mode, policy)] = fig = summarize_surge(o, cfgs[mode])
        _emit({"bench": "autoscale", **fig, "settings": o.settings,
               **_common(cfgs[mode], args, slots), "repeat": k, "position": i}, argv)  # fmt: skip
        outcomes.setdefault(mode, []).append(o)
    for mode, outs in outcomes.items():
        _timeline(args.out, cfgs[mode], k, outs)
    return figures


def _timeline(out: Path, cfg: SurgeConfig, k: int, outcomes: list[SurgeOutcome]) -> None:
    suffix = ("" if cfg.startup == "real" else f"-{cfg.startup}") + ("" if k == 0 else f"-{k}")
    (out / f"timeline{suffix}.json").write_text(
        json.dumps({o.policy: timeline(o, cfg) for o in outcomes}, indent=1, default=str)
    )
    plot_surge(out / f"timeline{suffix}.png", outcomes, cfg)


def _ratio_lines(figures: dict[Config, dict[str, Any]], cfgs: dict[str, SurgeConfig],
                 configs: list[Config], k: int, args: argparse.Namespace, slots: int,
                 argv: list[str]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Each mode's ratios line of repeat ``k`` (its policies in the configurations' order),
    printed and returned by mode."""
    out = {}
    for mode, cfg in cfgs.items():
        figs = {p: figures[(m, p)] for m, p in configs if m == mode and (m, p) in figures}
        if figs:
            out[mode] = ratios(figs, cfg)
            _emit({"bench": "autoscale", **out[mode], **_common(cfg, args, slots),
                   "repeat": k}, argv)  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
