"""Where a long run's driver heap grows: tracemalloc snapshots of a local run, compared.

Runs the keyed calculator on the generator source (``local[2]``, triggers back to
back, ``elastic``) and takes a tracemalloc snapshot at batch ``--first`` and batch
``--last``; prints one JSON line per snapshot (driver RSS, traced heap) and then the
allocation sites that grew most between them (traceback, KiB, blocks). tracemalloc
slows the driver several times over: the batch counts are small on purpose.

``--rss-every N`` instead runs without tracemalloc (full speed) to ``--last`` and prints,
every ``N`` batches, where the driver's resident memory is: RSS, the Python objects'
allocator blocks, glibc malloc's in-use and free-but-held bytes (``mallinfo2``) and
Arrow's default memory pool — so growth beyond the traced heap can be told apart as
Python objects, native allocations, allocator fragmentation or Arrow buffers.

Run: ``.venv/bin/python benchmarks/probe_heap.py [--first 60] [--last 300]
[--rss-every N]`` (``--first 1 --last 4``: its smoke test, seconds long).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import psutil


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the probe; ``spark``: a ``local[N]`` session to run on (left running) instead
    of building one (the smoke test's)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first", type=int, default=60)
    ap.add_argument("--last", type=int, default=300)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--rss-every", type=int, default=0, help="No tracemalloc: sample every N.")
    args = ap.parse_args(argv)
    if not 0 <= args.first < args.last:
        print("probe_heap: need 0 <= --first < --last", file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.driver.runner import run_job
    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.runtime.spark.keyed.functions import calculator

    work = Path(tempfile.mkdtemp(prefix="streamscale-heap-"))
    own = spark is None
    if spark is None:
        spark = build_session("local[2]", app_name="streamscale-heap-probe")
    opts = {"keys": "500", "rate": "400", "cost_ms": "0", "alpha": "0.8"}
    job = Job.simple("calc", calculator, source_options=opts, instances=2, shards=8, trigger_s=0)
    snaps: dict[int, Any] = {}

    def sample(rec: Any) -> None:
        if rec.batch_id % args.rss_every == 0 or rec.batch_id == args.last:
            print(json.dumps({"bench": "heap-rss", "batch": rec.batch_id, **memory_breakdown()}),
                  flush=True)  # fmt: skip

    def on_batch(rec: Any) -> None:
        if rec.batch_id in (args.first, args.last):
            gc.collect()
            snaps[rec.batch_id] = tracemalloc.take_snapshot()
            print(json.dumps({"bench": "heap", "batch": rec.batch_id,
                              "rss_mb": psutil.Process().memory_info().rss / 2**20,
                              "traced_mb": tracemalloc.get_traced_memory()[0] / 2**20}),
                  flush=True)  # fmt: skip

    if not args.rss_every:
        tracemalloc.start(12)
    run_job(spark, job, policy="elastic", duration_s=7200, checkpoint=work / "ck",
            out=work / "out", max_batches=args.last + 1,
            on_batch=sample if args.rss_every else on_batch,
            params={"interval_s": 0})  # fmt: skip
    if own:
        spark.stop()
    if args.rss_every:
        return 0
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    a, b = (snaps[args.first].filter_traces(keep), snaps[args.last].filter_traces(keep))
    tracemalloc.stop()  # the caller's process runs on at full speed
    for stat in b.compare_to(a, "traceback")[: args.top]:
        print(f"{stat.size_diff / 1024:.1f} KiB, {stat.count_diff} blocks")
        for line in stat.traceback.format()[-8:]:
            print("   ", line)
    return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def memory_breakdown() -> dict[str, Any]:
    """The driver's memory by holder (MiB): RSS, Python's allocator blocks (count),
    glibc malloc in use / free but held (``None`` off glibc), Arrow's default pool."""
    import pyarrow as pa

    gc.collect()
    out: dict[str, Any] = {
        "rss_mb": psutil.Process().memory_info().rss / 2**20,
        "python_blocks": sys.getallocatedblocks(),
        "arrow_mb": pa.total_allocated_bytes() / 2**20,
        "arrow_pool": pa.default_memory_pool().backend_name,
    }
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        mi = libc.mallinfo2()
        out["malloc_in_use_mb"] = (mi.uordblks + mi.hblkhd) / 2**20
        out["malloc_free_held_mb"] = mi.fordblks / 2**20
        out["malloc_arena_mb"] = mi.arena / 2**20
    except (OSError, AttributeError):
        out["malloc_in_use_mb"] = out["malloc_free_held_mb"] = out["malloc_arena_mb"] = None
    return out


if __name__ == "__main__":
    raise SystemExit(main())
