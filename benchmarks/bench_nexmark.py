"""Nexmark throughput: every query on streamscale and on Spark's own engine, one harness.

The harness (``harness`` in every line): ``--events`` Nexmark events (rate ``--rate``
events/s of event time, seed 7) written once by ``streamscale nexmark generate`` as
``--files`` Parquet files per table; every run reads the same files, one file of each
table per micro-batch, and writes to a sink that only counts (Spark's ``noop`` format,
streamscale's ``none`` sink), at zero per-tuple cost. Local Spark, 2 cores, 2 shuffle
partitions for every run.

* ``streamscale``: the query's job on streamscale's Python API
  (:mod:`streamscale.nexmark.streamscale_engine`) under ``--policy`` (keyed operators: 2
  executors × 8 shards), a streaming query; ``rows_per_s`` = input rows of the batches
  after the first ÷ their Spark ``triggerExecution`` seconds;
* ``spark-sql``: the query in Spark SQL (:mod:`streamscale.nexmark.spark_sql`). Where
  Spark streams it (Q0-Q3, Q11) it is timed like streamscale; where it does not (Q4-Q8:
  ``spark_mode`` ``batch``) it is one batch job over all the files, run once to warm up
  and timed the second time, ``rows_per_s`` = the tables' rows ÷ its wall seconds (no
  per-batch overhead, so the batch line is an upper bound of a streaming run);
* ``streamscale-1batch`` (beside those batch lines only): the streamscale job over all
  the files in one micro-batch, run once to warm up and timed the second time by the
  batch's own duration (streamscale's ``GraphBatch.duration_s``: the whole DAG and its
  sink), ``rows_per_s`` = the tables' rows ÷ that: the same shape as the batch line.

One JSON line per query and engine: ``{"bench": "nexmark", "query", "engine",
"rows_per_s", "ratio_vs_spark_sql", ...}``, ``ratio_vs_spark_sql`` = rows_per_s ÷ the
spark-sql line's of the same query in the same run. Lines are appended to
``benchmarks/results/nexmark.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_nexmark.py [--quick] [--events N] [--files F]
[--queries q0,q5] [--policy static]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import record

from streamscale.nexmark.files import write_events
from streamscale.nexmark.generator import GeneratorConfig
from streamscale.nexmark.results import QUERIES, check_query
from streamscale.nexmark.spark_sql import MODES, run_spark_sql
from streamscale.nexmark.streamscale_engine import run_streamscale
from streamscale.scenarios.spark_log import ProgressLog

CORES = 2
HARNESS = (
    "same Nexmark files per engine, one file per table per batch, counting sink (noop/none), "
    "streaming: rows of batches after the first / Spark triggerExecution; batch: 2nd run wall"
)
TABLES_OF = {"q3": ("person", "auction"), "q4": ("auction", "bid"), "q6": ("auction", "bid"),
             "q8": ("person", "auction")}  # fmt: skip


def _streaming_rate(log: ProgressLog) -> tuple[float, int, float, int]:
    """(rows/s, rows, seconds, batches) of the batches with rows after the first."""
    batches = [p for p in sorted(log.settle(), key=lambda p: p.batch_id) if p.rows > 0][1:]
    rows = sum(p.rows for p in batches)
    secs = sum(p.trigger_ms for p in batches) / 1000.0
    return (rows / secs if secs else float("nan")), rows, secs, len(batches)


def _run(spark: Any, engine: str, q: str, events: Path, work: Path, policy: str,
         rows_of: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    out = work / f"{q}-{engine}"
    if engine == "streamscale-1batch":  # the whole input as one batch, like spark-sql's batch
        files = int(json.loads((events / "nexmark.json").read_text())["files"])
        runs = [run_streamscale(spark, q, events, out, policy=policy, sink="none",
                                files_per_trigger=files) for _ in range(2)]  # fmt: skip
        secs = runs[1]["committed"][0].duration_s
        rows = sum(rows_of[t] for t in TABLES_OF.get(q, ("bid",)))
        return {"rows": rows, "seconds": round(secs, 3), "rows_per_s": rows / secs,
                "batches": 1, "policy": policy}  # fmt: skip
    if engine == "spark-sql" and MODES[q] == "batch":
        run_spark_sql(spark, q, events, out, sink="noop")  # warm-up
        t0 = time.perf_counter()
        run_spark_sql(spark, q, events, out, sink="noop")
        secs = time.perf_counter() - t0
        rows = sum(rows_of[t] for t in TABLES_OF.get(q, ("bid",)))
        return {"spark_mode": "batch", "rows": rows, "seconds": round(secs, 3),
                "rows_per_s": rows / secs, "batches": 1}  # fmt: skip
    log = ProgressLog().attach(spark)
    try:
        if engine == "spark-sql":
            run_spark_sql(spark, q, events, out, sink="noop")
        else:
            run_streamscale(spark, q, events, out, policy=policy, sink="none")
        rate, rows, secs, n = _streaming_rate(log)
    finally:
        log.detach()
    line: dict[str, Any] = {"rows": rows, "seconds": round(secs, 3), "rows_per_s": rate,
                            "batches": n}  # fmt: skip
    if engine == "spark-sql":
        line["spark_mode"] = "streaming " + MODES[q]
    else:
        line["policy"] = policy
    return line


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=6, help="files per table (= batches)")
    ap.add_argument("--rate", type=float, default=10_000.0, help="events/s of event time")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--engines", default="spark-sql,streamscale,streamscale-1batch")
    ap.add_argument("--policy", default="static", help="streamscale's policy")
    ap.add_argument("--quick", action="store_true", help="200,000 events, 4 files")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.files = 200_000, 4
    queries = [check_query(q) for q in args.queries.split(",") if q.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.session import build_session

    spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events"
        cfg = GeneratorConfig.constant(args.rate, seed=7)
        meta = write_events(cfg, args.events, events, files=args.files)
        for q in queries:
            base: float | None = None
            for engine in engines:
                if engine == "streamscale-1batch" and MODES[q] != "batch":
                    continue  # only beside spark-sql's batch runs
                line = _run(spark, engine, q, events, Path(tmp), args.policy, meta["rows"])
                if engine == "spark-sql":
                    base = line["rows_per_s"]
                ratio = line["rows_per_s"] / base if base else None
                full = record("nexmark", {
                    "bench": "nexmark", "query": q, "engine": engine,
                    "rows_per_s": round(line.pop("rows_per_s")),
                    "ratio_vs_spark_sql": None if ratio is None else round(ratio, 3),
                    **line, "events": args.events, "files": args.files, "rate": args.rate,
                    "harness": HARNESS,
                }, argv=argv)  # fmt: skip
                print(json.dumps(full), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
