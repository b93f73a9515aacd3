"""Chaos on real traffic: executors, the driver and workers killed under a load trace.

Starts a loopback Spark standalone cluster (``--workers`` × ``--worker-cores``), replays
a load trace (``--trace``, default the bundled road-sensor day; ``--window``,
``--minutes``, ``--peak-rate``) as the generator's offered rate into a keyed calculator
under the ``elastic`` policy with executors requested and released, and injects
``--faults`` faults spread over the replay, one in each of as many equal slices of it at a
seeded time (``--seed``), from the first batch that commits tuples on
(:mod:`streamscale.scenarios.chaos`): executors SIGKILLed mid-batch and while being
warmed up or released, the driver SIGKILLed and restarted on its checkpoint, a worker
that hosts executors of the job SIGKILLed and started again. At the end every key's
state, every sink row (each tuple's ``seq`` exactly once) and every output's running count
are checked against pandas over the offered tuples. One JSON line (``"bench": "chaos"``)
with ``faults``, ``lost``, ``duplicated``, ``state_exact``, ``recovery_by_kind`` (per kind:
the faults that hit work in flight, ``in_flight``, and the median and longest recovery,
``median_s`` and ``max_s``, of those), ``not_in_flight`` (the faults that hit none: an
executor already being released, or idle), ``backlog_recovery_max_s`` (the longest time
from a fault that hit work in flight until the backlog was back to its level before it)
and the per-fault list, appended to ``benchmarks/results/chaos.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_chaos.py [--quick | --smoke] [--seed N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from _results import record

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
from streamscale.scenarios.chaos import KINDS, ChaosConfig, run_chaos, summarize

TARGETS = ("0 tuples lost or duplicated over >= 20 faults, >= 4 of each kind hitting work in "
           "flight; median recovery of those <= 30 s")  # fmt: skip
#: (minutes of trace, faults) per size: one fault per slice of the replay, each after the
#: last one's recovery; of 28, seven of each kind (one warm-release fault in four aims at a
#: release, which is not work in flight: six aim at warm-ups, which need an executor to
#: arrive while armed, so that two may find none and four still hit work in flight)
SIZES = {"full": (45.0, 30), "quick": (32.0, 28), "smoke": (2.5, 4)}
#: the faults of each kind run that must hit work in flight for the targets to be met
IN_FLIGHT_PER_KIND = 4


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="32 minutes of trace, 28 faults.")
    size.add_argument("--smoke", action="store_true", help="2.5 minutes of trace, 4 faults.")
    ap.add_argument("--trace", default=None, help="A timestamp,value CSV (default: bundled).")
    ap.add_argument("--window", default=None, help="START,HOURS of the trace.")
    ap.add_argument("--minutes", type=float, default=None, help="Minutes to replay it in.")
    ap.add_argument("--peak-rate", type=float, default=100.0,
                    help="Tuples/s at the window's 99th percentile.")  # fmt: skip
    ap.add_argument("--faults", type=int, default=None)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=2)
    ap.add_argument("--executor-cores", type=int, default=1)
    ap.add_argument("--max-executors", type=int, default=4)
    ap.add_argument("--keep", type=Path, default=None,
                    help="Keep the run's directory (checkpoint, sink, logs) here.")  # fmt: skip
    return ap.parse_args(argv)


def _config(args: argparse.Namespace) -> ChaosConfig:
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    minutes, faults = SIZES[size]
    cfg = ChaosConfig(
        minutes=args.minutes or minutes,
        faults=faults if args.faults is None else args.faults,
        peak_rate=args.peak_rate,
        window=args.window,
        kinds=tuple(k for k in args.kinds.split(",") if k),
        seed=args.seed,
        executor_cores=args.executor_cores,
        max_executors=args.max_executors,
    )
    if args.trace is not None:
        if not Path(args.trace).is_file():
            raise StreamscaleError("no such trace file", item=args.trace)
        cfg = replace(cfg, trace=str(Path(args.trace).resolve()))
    if args.smoke:
        cfg = replace(cfg, arm_timeout_s=45.0)
    cfg.options()  # a trace or window that does not parse is refused here
    return cfg


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = _args(argv)
        cfg = _config(args)
    except StreamscaleError as exc:
        print(f"bench_chaos: {exc}", file=sys.stderr)
        return 2
    # a terminated benchmark still stops its driver and its cluster (the finally blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="streamscale-chaos-"))
    info = cluster_up(args.workers, args.worker_cores, memory="3g", directory=work / "cluster")
    try:
        run = run_chaos(info, cfg, work / "run", log=lambda s: print(s, file=sys.stderr))
        figures = summarize(run, cfg, work / "run")
    finally:
        cluster_down(work / "cluster")
        if args.keep is not None:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    conf: dict[str, Any] = asdict(cfg)
    conf["trace"] = os.path.basename(cfg.trace)
    conf["faults_planned"] = conf.pop("faults")
    in_flight = [v["in_flight"] for k, v in figures["recovery_by_kind"].items() if k in cfg.kinds]
    line = {"bench": "chaos", **figures, "targets": TARGETS,
            "met": figures["faults"] >= 20 and figures["lost"] == 0
            and figures["duplicated"] == 0 and figures["unexpected"] == 0
            and bool(figures["state_exact"]) and bool(figures["outputs_exact"])
            and min(in_flight, default=0) >= IN_FLIGHT_PER_KIND
            and (figures["recovery_median_s"] or 1e9) <= 30.0,
            "workers": args.workers, "worker_cores": args.worker_cores,
            "cost_kind": "wall", "policy": "elastic", **conf}  # fmt: skip
    print(json.dumps(record("chaos", line, argv=argv), default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
