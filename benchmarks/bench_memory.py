"""Driver memory over a long run: does the RSS stay flat once the job is warm?

Runs the micro-benchmark (``examples/microbench.yaml``: generator → keyed calculator)
under ``--policy`` at a low rate for ``--minutes`` and samples, at every ``--every``
minutes, the resident set size of the Python driver and of its JVM (the py4j gateway,
a child process), with the batches run so far. The last line is the figure:

* ``"bench": "memory"``, ``"sample"``: one line per sample (minute, RSS in MB);
* ``"bench": "memory"``, ``"figure": "rss_growth"``: driver RSS (Python + JVM) at the
  last sample over the sample at ``--from-minute`` minus 1; target < 0.10.

Run: ``.venv/bin/python benchmarks/bench_memory.py [--minutes 30] [--quick]``
(``--quick``: 3 minutes, growth from minute 1; ``--smoke``: 21 seconds, runs at all).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from _results import record

EXAMPLE = Path(__file__).parents[1] / "examples" / "microbench.yaml"


_ARGV: list[str] = []  # the arguments of main, recorded with each line


def _emit(**fields: Any) -> None:
    print(json.dumps(record("memory", fields, argv=_ARGV)), flush=True)


def _rss_mb() -> tuple[float, float]:
    me = psutil.Process()
    jvm = 0
    for child in me.children(recursive=True):
        try:
            if "java" in child.name():
                jvm += child.memory_info().rss
        except psutil.Error:
            continue
    return me.memory_info().rss / 2**20, jvm / 2**20


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the benchmark; ``spark``: a ``local[N]`` session to run on (left running)
    instead of building one (the smoke test's)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=5.0, help="Minutes between samples.")
    ap.add_argument("--from-minute", type=float, default=5.0, help="Growth is measured from here.")
    ap.add_argument("--rate", type=float, default=200.0, help="Offered tuples/s.")
    ap.add_argument("--trigger", type=float, default=0.5, help="Micro-batch interval (s).")
    ap.add_argument("--policy", default="elastic")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="21 s, samples every 6 s: runs at all")
    args = ap.parse_args(argv)
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.minutes, args.every, args.from_minute = 3.0, 1.0, 1.0
    if args.smoke:
        args.minutes, args.every, args.from_minute, args.rate = 0.35, 0.1, 0.1, 50.0

    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.executors.session import build_session

    doc = yaml.safe_load(EXAMPLE.read_text())
    gen = next(o for o in doc["operators"] if o["name"] == "gen")
    gen["rate"] = args.rate
    gen["params"]["trigger_s"] = args.trigger
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-bench-memory-"))
    (scratch / "job.yaml").write_text(yaml.safe_dump(doc))
    job = Job.from_yaml(scratch / "job.yaml")

    own = spark is None
    if spark is None:
        spark = build_session("local[2]", app_name="streamscale-bench-memory")
    t0 = time.monotonic()
    samples: list[dict[str, float]] = []
    batches = [0]
    next_at = [args.every]

    def on_batch(rec: Any) -> None:
        batches[0] += 1
        minute = (time.monotonic() - t0) / 60.0
        if minute >= next_at[0] - 1e-9:
            py, jvm = _rss_mb()
            s = {"minute": round(next_at[0], 3), "python_rss_mb": py, "jvm_rss_mb": jvm}
            samples.append(s)
            _emit(bench="memory", sample=True, policy=args.policy, rate=args.rate,
                  cost_kind="cpu", batches=batches[0], elapsed_min=round(minute, 3),
                  **s)  # fmt: skip
            next_at[0] += args.every

    try:
        res = run_job(
            spark,
            job,
            policy=args.policy,
            duration_s=args.minutes * 60.0 + 5.0,
            checkpoint=scratch / "ckpt",
            on_batch=on_batch,
            seed=1,
        )
    finally:
        if own:
            spark.stop()
    base = next((s for s in samples if s["minute"] >= args.from_minute - 1e-9), None)
    last = samples[-1] if samples else None
    if base is None or last is None or last is base:
        _emit(bench="memory", figure="rss_growth", error="too few samples", samples=len(samples))
        return 1
    total0 = base["python_rss_mb"] + base["jvm_rss_mb"]
    total1 = last["python_rss_mb"] + last["jvm_rss_mb"]
    growth = total1 / total0 - 1.0
    _emit(
        bench="memory",
        figure="rss_growth",
        policy=args.policy,
        rate=args.rate,
        cost_kind="cpu",
        from_minute=base["minute"],
        to_minute=last["minute"],
        batches=res.batches,
        records_kept=len(res.records),
        driver_rss_mb=[round(total0, 1), round(total1, 1)],
        python_growth=last["python_rss_mb"] / base["python_rss_mb"] - 1.0,
        jvm_growth=last["jvm_rss_mb"] / base["jvm_rss_mb"] - 1.0 if base["jvm_rss_mb"] else None,
        growth=growth,
        target=0.10,
        met=growth < 0.10,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
