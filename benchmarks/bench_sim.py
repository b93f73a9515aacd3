"""Simulator speed: 60 s of the 32-node micro-benchmark (paper 000, §5.1) in wall time.

Prints one JSON line per figure: the wall/simulated-time ratio of the kernel
alone (static plan, no decisions) and of a full run with the Elasticutor policy
deciding every second (ω = 2), plus the share of that run spent in the policy.
Target: ratio ≤ 1.0. Usage: ``python benchmarks/bench_sim.py [--seconds 60]`` (a second of
simulated time is its smoke test).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _results import record

from streamscale.control.policies import initial_plan, make_policy
from streamscale.sim.run import simulate
from streamscale.sim.workloads import MicroBenchmark

__all__ = ["main"]


def _run(policy: str, seconds: float) -> dict[str, float]:
    wl = MicroBenchmark(omega=2.0, seed=1)
    topo = wl.static_topology() if policy == "static" else wl.topology()
    cluster = wl.cluster()
    pol = make_policy(policy, topo, cluster, params={"latency_target_ms": 0.5})
    t0 = time.perf_counter()
    res = simulate(
        topo,
        cluster,
        wl.demand(),
        pol,
        initial_plan(policy, topo, cluster),
        duration_s=seconds,
        seed=1,
    )
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "ratio": wall / seconds,
        "policy_s": res.scheduler_ms * res.decisions / 1e3,
        "throughput": res.throughput,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    for policy in ("static", "elastic"):
        r = _run(policy, args.seconds)
        print(
            json.dumps(
                record(
                    "sim",
                    {
                        "bench": "sim",
                        "figure": f"sim_wall_per_sim_s[{policy}]",
                        "nodes": 32,
                        "cores": 256,
                        "shards": 8192,
                        "sim_s": args.seconds,
                        "wall_s": round(r["wall_s"], 2),
                        "ratio": round(r["ratio"], 3),
                        "policy_share": round(r["policy_s"] / r["wall_s"], 3),
                        "throughput": round(r["throughput"]),
                        "target_ratio": 1.0,
                    },
                    argv=argv,
                )
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
