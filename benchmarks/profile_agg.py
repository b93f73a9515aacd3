"""Where a batch of ``elastic-agg`` spends its time, on bench_datapath's harness.

Runs ``stream(files).key_by("key").agg(count, sum)`` (the ``elastic-agg`` path: same
generated Parquet files, one per batch, noop sink) with Spark's UI on, and prints one
JSON line per timed batch (after the first) splitting its wall time into:

* ``spark_stages_s``: per Spark stage of the batch's jobs (Spark's own stage durations,
  from its status REST API), named by what the stage does (``partial`` — scan and
  partial aggregation before the shuffle; ``route`` — final partial merge and routing;
  ``merge`` — the Python reduce tasks merging partials into shard state; ``sink``);
* ``task_python_s``: the reduce tasks' own time in Python (``TaskStats.busy_s``, summed
  over tasks) and its CPU time;
* ``driver``: the batch's foreachBatch wall time minus its Spark jobs' wall time (driver
  Python, planning, py4j round trips, commits);

then a ``cProfile`` of the driver over the whole run (top functions by own time), and
the reduce side's Python profiled in-process on the last batch's real partials
(``kernel_profile``: the fold, IPC and output steps).

Run: ``.venv/bin/python benchmarks/profile_agg.py [--rows 50000] [--batches 3]``.
Prints only (its JSON lines name ``"bench": "profile_agg"``); it records no results file
(bench_datapath.py does). ``--rows 2000 --batches 1`` is its smoke test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
import urllib.request
from inspect import signature
from pathlib import Path
from typing import Any

from streamscale.scenarios.harness import file_stream, write_batches

E, Z, CORES = 2, 64, 2


def _stages(spark: Any) -> list[dict[str, Any]]:
    url = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages") as r:
        return json.loads(r.read())


def _wall_ms(stage: dict[str, Any]) -> float | None:
    from datetime import datetime

    a, b = stage.get("submissionTime"), stage.get("completionTime")
    if not a or not b:
        return None
    fmt = "%Y-%m-%dT%H:%M:%S.%f%Z"
    return (datetime.strptime(b, fmt) - datetime.strptime(a, fmt)).total_seconds() * 1000


def _stage_kind(stage: dict[str, Any]) -> str:
    desc = f"{stage.get('name', '')} {stage.get('details', '')}"
    if "mapInArrow" in desc or "MapInArrow" in desc:
        return "merge"
    if "noop" in desc.lower() or "save at" in desc:
        return "sink"
    if "FileScan" in desc or "parquet" in desc.lower():
        return "partial"
    return "route"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--window", default=None, help="e.g. '10 seconds': elastic-window")
    ap.add_argument("--slide", default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.api import stream
    from streamscale.runtime.spark.executors.session import build_session

    spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES, ui=True)
    records: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in"
        opts = {"keys": "10000", "alpha": "1.0", "cost_ms": "0", "seed": "7"}
        write_batches(src, opts, args.rows, args.batches + 1)
        df = file_stream(spark, src)
        aggs = (F.count("*").alias("count"), F.sum("value").alias("sum"))
        if args.window:
            df = df.withWatermark("event_time", "10 seconds")
            job = stream(df).key_by("key", instances=E, shards=Z)
            out = job.window("event_time", args.window, args.slide).agg(*aggs, name="agg")
        else:
            out = stream(df).key_by("key", instances=E, shards=Z).agg(*aggs, name="agg")
        out.to(lambda df, b: df.write.format("noop").mode("overwrite").save(), name="noop")
        import streamscale.runtime.spark.keyed.agg.operator as agg_op

        real = agg_op.run_chain  # the driver runs every aggregation as a (fused) chain
        tasks: dict[int, Any] = {}

        inner = cProfile.Profile()  # the batch runs on Spark's callback thread

        def spy(*a: Any, **kw: Any) -> Any:
            timed = signature(real).bind(*a, **kw).arguments["version"].batch_id > 0
            if timed:
                inner.enable()
            try:
                outputs, every = real(*a, **kw)
            finally:
                if timed:
                    inner.disable()
            tasks[every[0].batch_id] = every[0]
            return outputs, every

        agg_op.run_chain = spy  # type: ignore[assignment]
        prof = cProfile.Profile()
        t0 = time.time()
        prof.enable()
        res = out.run(checkpoint=Path(tmp) / "ck", max_batches=args.batches + 1,
                      duration_s=3600, policy="elastic")  # fmt: skip
        prof.disable()
        wall = time.time() - t0
        records = list(res.records)
    stages = [s for s in _stages(spark) if s.get("status") == "COMPLETE"]
    for b in records[1:]:
        st = tasks.get(b.batch_id)
        line = {"bench": "profile_agg", "batch": b.batch_id,
                "foreach_batch_s": round(b.duration_s, 3),
                "rows": b.keyed_rows.get("agg")}  # fmt: skip
        if st is not None:
            line["run_agg_s"] = round(st.duration_s, 3)
            line["task_busy_s"] = [round(t.busy_s, 3) for t in st.tasks]
            line["task_cpu_s"] = [round(t.cpu_s, 3) for t in st.tasks]
        print(json.dumps(line))
    for st_ in sorted(stages, key=lambda x: x["stageId"])[-8:]:
        print(json.dumps({"bench": "profile_agg", "stage": st_["stageId"],
                          "name": st_.get("name"),
                          "tasks": st_.get("numTasks"),
                          "wall_ms": _wall_ms(st_), "run_ms": st_.get("executorRunTime"),
                          "shuffle_write_records": st_.get("shuffleWriteRecords"),
                          "desc": st_.get("description", "")[:60]}))  # fmt: skip
    by_kind: dict[str, float] = {}
    for s in stages:
        ms = s.get("executorRunTime", 0)
        by_kind[_stage_kind(s)] = by_kind.get(_stage_kind(s), 0.0) + ms / 1000.0
    print(json.dumps({"bench": "profile_agg", "run_wall_s": round(wall, 2),
                      "stages": len(stages),
                      "executor_run_s_by_kind": {k: round(v, 2) for k, v in by_kind.items()}}))  # fmt: skip
    s = io.StringIO()
    pstats.Stats(inner, stream=s).sort_stats("cumulative").print_stats(40)
    print(s.getvalue())
    del prof
    spark.stop()


if __name__ == "__main__":
    main()
