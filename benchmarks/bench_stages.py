"""Many stages at one stage's price: a chain of 1-4 keyed operators, median batch seconds.

The harness (``harness`` in every line): generated tuples (10,000 keys, Zipf 1.0, zero
per-tuple cost) written once per batch size as Parquet files of ``rows_per_batch``
tuples, one file per micro-batch; local Spark, 2 cores, 2 shuffle partitions; a sink
that only counts. Every configuration reads the same files.

* ``streamscale``: ``stream(df).key_by("key").agg(count, sum)`` followed by ``n - 1``
  keyed aggregations on the same key, each over the previous one's update-mode output
  (``sum(n)``, ``max(v)``) (:func:`chain_job`), 2 executors × 8 shards each, policy
  ``static``;
* ``streamscale-unfused``: the same job with every keyed operator in a stage of its own
  (``run_graph(..., fuse=False)``: what the chain cost before fusion);
* ``spark-sql``: the same chain in Spark SQL, streamed. Spark streams one aggregation in
  update mode; several stateful operators only in append mode (each an event-time
  window over the previous window's ``window_time``, under a watermark): update mode
  is refused at ``start()`` (its message is in the line, ``spark_refused``), so the
  lines of ``n >= 2`` are Spark's chained window aggregations in append mode
  (``spark_mode``), the chain Spark does stream, on the same rows.

``median_s``: the median of Spark's ``triggerExecution`` over the batches with input
after the first (min and max beside it). One JSON line per engine, chain length and
batch size: ``{"bench": "stages", "engine", "operators", "rows_per_batch", "median_s",
"ratio_vs_one_operator", ...}``; ``ratio_vs_one_operator`` = ``median_s`` ÷ the same
engine's one-operator ``median_s`` at the same batch size, in the same run;
``ratio_vs_spark_sql`` = streamscale's ÷ Spark's at the same length and size. Lines are
appended to ``benchmarks/results/stages.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_stages.py [--quick] [--rows 1000,50000]
[--operators 1,2,3,4] [--batches 8] [--engines streamscale,streamscale-unfused,spark-sql]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _results import record

CORES = 2
E, Z = 2, 8
OPTIONS = {"keys": "10000", "alpha": "1.0", "cost_ms": "0", "seed": "7"}
HARNESS = (
    "generated tuples (10,000 keys, Zipf 1.0, zero cost) as one Parquet file per batch, "
    "same files per engine, counting sink, local[2]; median triggerExecution of the batches "
    "with input after the first"
)


def chain_job(df: Any, n: int, *, executors: int = E, shards: int = Z) -> Any:
    """``n`` keyed aggregations on ``key`` in a chain over ``df`` (the generator's
    columns): ``count(*) AS n, sum(value) AS v``, then ``n - 1`` times ``sum(n) AS n,
    max(v) AS v`` over the previous operator's update-mode output; returns the stream
    (add a sink with ``.to``)."""
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.api import stream

    kw = {"instances": executors, "shards": shards}
    out = (
        stream(df, name=f"chain{n}", available_now=True)
        .key_by("key", **kw)
        .agg(F.count("*").alias("n"), F.sum("value").alias("v"), name="op1")
    )
    for i in range(2, n + 1):
        out = out.key_by("key", **kw).agg(
            F.sum("n").alias("n"), F.max("v").alias("v"), name=f"op{i}"
        )
    return out


def write_inputs(directory: Path, rows: int, batches: int) -> None:
    """``batches`` files of ``rows`` generated tuples (:func:`~streamscale.scenarios.harness.write_batches`)."""
    from streamscale.scenarios.harness import write_batches

    write_batches(directory, OPTIONS, rows, batches)


def run_chain_streamscale(
    spark: Any, n: int, rows: int, batches: int, work: Path, *, sink: Any = "none",
    fuse: bool = True,
) -> Any:  # fmt: skip
    """The chain of ``n`` over ``batches`` files of ``rows`` tuples (written under
    ``work/in`` unless there); returns the run's result. ``fuse=False``: every keyed
    operator in a stage of its own (:func:`~streamscale.runtime.spark.driver.dag.run_graph`)."""
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.driver.graph import JobGraph
    from streamscale.scenarios.harness import file_stream

    src = work / "in"
    if not src.exists():
        write_inputs(src, rows, batches)
    job = chain_job(file_stream(spark, src), n).to(sink, name="out")
    graph = JobGraph.build(job.topology(), job._b.functions)
    return run_graph(spark, graph, duration_s=3600.0, checkpoint=(work / f"ck-{n}").absolute(),
                     out=(work / f"out-{n}").absolute(), source_df=job._b.source_df,
                     policy="static", available_now=True, fuse=fuse)  # fmt: skip


def spark_chain(df: Any, n: int) -> tuple[Any, str]:
    """Spark SQL's streamed form of the chain and its output mode: one aggregation in
    update mode; several as chained event-time windows in append mode."""
    from pyspark.sql import functions as F

    if n == 1:
        return df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("v")), "update"
    w = df.withWatermark("event_time", "10 seconds")
    out = w.groupBy(F.window("event_time", "10 seconds"), "key").agg(
        F.count("*").alias("n"), F.sum("value").alias("v")
    )
    for _ in range(2, n + 1):
        out = out.groupBy(F.window(F.window_time("window"), "10 seconds"), "key").agg(
            F.sum("n").alias("n"), F.max("v").alias("v")
        )
    return out, "append"


def spark_update_refusal(spark: Any, df: Any, n: int, work: Path) -> str | None:
    """Spark's message when it refuses the update-mode chain of ``n`` (``None``: it runs)."""
    from pyspark.sql import functions as F

    out = df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("v"))
    for _ in range(2, n + 1):
        out = out.groupBy("key").agg(F.sum("n").alias("n"), F.max("v").alias("v"))
    try:
        q = (out.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", str(work / f"refused-{n}")).start())  # fmt: skip
    except Exception as exc:  # AnalysisException: Spark's own rule
        return str(exc).strip().splitlines()[0][:300]
    q.stop()
    return None


def _medians(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"median_s": None, "batches": 0}
    return {"median_s": round(statistics.median(seconds), 4), "min_s": round(min(seconds), 4),
            "max_s": round(max(seconds), 4), "batches": len(seconds)}  # fmt: skip


def measure(spark: Any, engine: str, n: int, rows: int, batches: int, work: Path) -> dict[str, Any]:
    """One configuration: median batch seconds (Spark's progress, batches after the first)."""
    from streamscale.scenarios.harness import batch_seconds, file_stream
    from streamscale.scenarios.spark_log import ProgressLog

    src = work / "in"
    if not src.exists():
        write_inputs(src, rows, batches)
    log = ProgressLog().attach(spark)
    extra: dict[str, Any] = {}
    try:
        if engine.startswith("streamscale"):
            run_chain_streamscale(spark, n, rows, batches, work, fuse=engine == "streamscale")
        else:
            refused = (
                None if n == 1 else spark_update_refusal(spark, file_stream(spark, src), n, work)
            )
            df, mode = spark_chain(file_stream(spark, src), n)
            q = (df.writeStream.outputMode(mode).format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", str(work / f"spark-ck-{n}")).start())  # fmt: skip
            q.awaitTermination()
            extra["spark_mode"] = f"streaming {mode}" + (
                "" if n == 1 else ", chained event-time windows"
            )
            if refused is not None:
                extra["spark_refused"] = f"update mode: {refused}"
        secs = batch_seconds(log.settle(), skip=1)
    finally:
        log.detach()
    return {**_medians(secs), **extra}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000,50000", help="rows a batch")
    ap.add_argument("--operators", default="1,2,3,4")
    ap.add_argument("--batches", type=int, default=8, help="files (= batches) per run")
    ap.add_argument("--engines", default="streamscale,streamscale-unfused,spark-sql")
    ap.add_argument("--quick", action="store_true", help="4 batches per run")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches = 4
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.executors.session import build_session

    sizes = [int(r) for r in args.rows.split(",") if r.strip()]
    lengths = [int(n) for n in args.operators.split(",") if n.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    with tempfile.TemporaryDirectory(prefix="streamscale-bench-stages-") as tmp:
        # warm-up, not recorded: the session's first query pays Spark's and the Python
        # workers' start-up, which would land on the first configuration measured
        warm = Path(tmp) / "warm-up"
        write_inputs(warm / "in", min(sizes), 2)
        run_chain_streamscale(spark, 2, min(sizes), 2, warm)
        for rows in sizes:
            work = Path(tmp) / f"rows-{rows}"
            write_inputs(work / "in", rows, args.batches)
            base: dict[str, float] = {}
            ours: dict[int, float] = {}
            for n in lengths:  # engines back to back at each length
                for engine in engines:
                    got = measure(spark, engine, n, rows, args.batches, work / engine)
                    med = got["median_s"]
                    if n == lengths[0] and med:
                        base[engine] = med
                    ratio = med / base[engine] if med and base.get(engine) else None
                    line: dict[str, Any] = {
                        "bench": "stages", "engine": engine, "operators": n,
                        "rows_per_batch": rows, **got,
                        "ratio_vs_one_operator": None if ratio is None else round(ratio, 3),
                        "ratio_base_operators": lengths[0],
                    }  # fmt: skip
                    if engine.startswith("streamscale"):
                        line["policy"] = "static"
                        line["fused"] = engine == "streamscale"
                    if engine == "streamscale" and med:
                        ours[n] = med
                    elif engine == "spark-sql" and med and ours.get(n):
                        line["streamscale_over_spark"] = round(ours[n] / med, 3)
                    line["harness"] = HARNESS
                    print(json.dumps(record("stages", line, argv=argv)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
