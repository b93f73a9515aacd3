"""Many stages at one stage's price: a chain of 1-4 keyed operators, median batch seconds.

The harness (``harness`` in every line): generated tuples (10,000 keys, Zipf 1.0, zero
per-tuple cost) written once per batch size as Parquet files of ``rows_per_batch``
tuples, one file per micro-batch; local Spark, 2 cores, 2 shuffle partitions; a sink
that only counts. Every configuration reads the same files.

* ``streamscale``: ``stream(df).key_by("key").agg(count, sum)`` followed by ``n - 1``
  keyed aggregations on the same key, each over the previous one's update-mode output
  (``sum(n)``, ``max(v)``) (:func:`chain_job`), 2 instances × 8 shards each, policy
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
after the first (min and max beside it; ``batches``: how many were scored, at least 10
in a full run: ``--batches 11``).

**Order.** A configuration measured later in a session runs warmer (the session's
caches, the JIT, the Python workers), so the order is part of the measurement: at each
batch size every repeat runs all the configurations (chain length × engine) in one
interleaved pass, forward in even repeats and backward in odd ones, and then the pass's
first configuration once more (``again: true``, not scored: its ``again_over_first`` is
its median over the same configuration's at the pass's start, the drift the pass saw).
The session's first query is a warm-up, not recorded.

One JSON line per configuration and repeat: ``{"bench": "stages", "engine",
"operators", "rows_per_batch", "repeat", "position", "median_s", "min_s", "max_s",
"batches", "ratio_vs_one_operator", ...}``; ``ratio_vs_one_operator`` = ``median_s`` ÷
the same engine's one-operator ``median_s`` at the same batch size in the same repeat;
on a ``spark-sql`` line, ``streamscale_over_spark`` = streamscale's (fused) ``median_s``
÷ Spark's at the same length and size in the same repeat (below 1: streamscale is
faster). After the repeats, per batch size, engine and length one ``figure: "summary"``
line with ``repeats`` and, for ``median_s``, ``ratio_vs_one_operator`` and
``streamscale_over_spark``, ``{"median", "min", "max"}`` over the repeats. ``--quick``
(3 scored batches, one repeat) says so in every line (``quick: true`` and a ``note``).
Lines are appended to ``benchmarks/results/stages.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_stages.py [--quick] [--rows 1000,50000]
[--operators 1,2,3,4] [--batches 11] [--repeats 3]
[--engines streamscale,streamscale-unfused,spark-sql]`` on a quiet host.
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
#: scored batches per configuration in a full run (the first batch with input is not)
FULL_SCORED = 10
E, Z = 2, 8
OPTIONS = {"keys": "10000", "alpha": "1.0", "cost_ms": "0", "seed": "7"}
HARNESS = (
    "generated tuples (10,000 keys, Zipf 1.0, zero cost) as one Parquet file per batch, "
    "same files per engine, counting sink, local[2]; median triggerExecution of the batches "
    "with input after the first"
)


def chain_job(df: Any, n: int, *, instances: int = E, shards: int = Z) -> Any:
    """``n`` keyed aggregations on ``key`` in a chain over ``df`` (the generator's
    columns): ``count(*) AS n, sum(value) AS v``, then ``n - 1`` times ``sum(n) AS n,
    max(v) AS v`` over the previous operator's update-mode output; returns the stream
    (add a sink with ``.to``)."""
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.api import stream

    kw = {"instances": instances, "shards": shards}
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
    fuse: bool = True, src: Path | None = None,
) -> Any:  # fmt: skip
    """The chain of ``n`` over ``batches`` files of ``rows`` tuples (``src``, by default
    ``work/in``, written unless there); returns the run's result. ``fuse=False``: every
    keyed operator in a stage of its own (:func:`~streamscale.runtime.spark.driver.dag.run_graph`)."""
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.driver.graph import JobGraph
    from streamscale.scenarios.harness import file_stream

    src = work / "in" if src is None else src
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


def measure(
    spark: Any, engine: str, n: int, rows: int, batches: int, work: Path,
    src: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One configuration: median batch seconds (Spark's progress, batches after the
    first), over the files in ``src`` (default ``work/in``, written unless there); its
    checkpoints under ``work``, which must be new."""
    from streamscale.scenarios.harness import batch_seconds, file_stream
    from streamscale.scenarios.spark_log import ProgressLog

    src = work / "in" if src is None else src
    if not src.exists():
        write_inputs(src, rows, batches)
    log = ProgressLog().attach(spark)
    extra: dict[str, Any] = {}
    try:
        if engine.startswith("streamscale"):
            run_chain_streamscale(
                spark, n, rows, batches, work, fuse=engine == "streamscale", src=src
            )
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


Config = tuple[int, str]


def pass_order(configs: list[Config], repeat: int) -> list[Config]:
    """The configurations of one repeat's pass: forward in even repeats, backward in odd
    ones, then the pass's first configuration again (the drift check)."""
    order = configs if repeat % 2 == 0 else configs[::-1]
    return [*order, order[0]]


def ratios(lines: list[dict[str, Any]]) -> None:
    """Set ``ratio_vs_one_operator`` and, on ``spark-sql`` lines, ``streamscale_over_spark``
    on the scored lines of one pass (one batch size, one repeat), in place; the pass's
    repeated first configuration gets ``again_over_first``."""
    scored = [x for x in lines if not x.get("again")]
    med = {(x["engine"], x["operators"]): x["median_s"] for x in scored}
    base = min(x["operators"] for x in scored)
    for x in lines:
        m = x["median_s"]
        if x.get("again"):
            first = med.get((x["engine"], x["operators"]))
            x["again_over_first"] = round(m / first, 3) if m and first else None
            continue
        one = med.get((x["engine"], base))
        x["ratio_vs_one_operator"] = round(m / one, 3) if m and one else None
        x["ratio_base_operators"] = base
        ours = med.get(("streamscale", x["operators"]))
        if x["engine"] == "spark-sql" and ours and m:
            x["streamscale_over_spark"] = round(ours / m, 3)


def _spread(values: list[Any]) -> dict[str, Any] | None:
    got = [v for v in values if v is not None]
    if not got:
        return None
    return {"median": round(statistics.median(got), 4), "min": min(got), "max": max(got)}


def summaries(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per batch size, engine and length, over the repeats of its scored lines: one
    ``figure: "summary"`` line with the median and range of ``median_s`` and of each
    ratio; the first configuration's also with the passes' ``again_over_first``."""
    out = []
    keys = dict.fromkeys((x["rows_per_batch"], x["engine"], x["operators"]) for x in lines)
    for rows, engine, n in keys:
        of = [x for x in lines if (x["rows_per_batch"], x["engine"], x["operators"])
              == (rows, engine, n)]  # fmt: skip
        scored = [x for x in of if not x.get("again")]
        line: dict[str, Any] = {
            "bench": "stages", "figure": "summary", "engine": engine, "operators": n,
            "rows_per_batch": rows, "repeats": len(scored),
            "batches": min((x["batches"] for x in scored), default=0),
            "median_s": _spread([x["median_s"] for x in scored]),
            "ratio_vs_one_operator": _spread([x.get("ratio_vs_one_operator") for x in scored]),
        }  # fmt: skip
        if engine == "spark-sql":
            line["streamscale_over_spark"] = _spread(
                [x.get("streamscale_over_spark") for x in scored]
            )
            line["spark_mode"] = scored[-1].get("spark_mode") if scored else None
        again = [x["again_over_first"] for x in of if x.get("again")]
        if again:
            line["again_over_first"] = _spread(again)
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000,50000", help="rows a batch")
    ap.add_argument("--operators", default="1,2,3,4")
    ap.add_argument("--batches", type=int, default=FULL_SCORED + 1,
                    help="files (= batches) per configuration; the first is not scored")  # fmt: skip
    ap.add_argument("--repeats", type=int, default=None,
                    help="interleaved passes per batch size (default 3; --quick: 1)")  # fmt: skip
    ap.add_argument("--engines", default="streamscale,streamscale-unfused,spark-sql")
    ap.add_argument("--quick", action="store_true", help="4 batches (3 scored), one repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches = 4
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1 or args.batches < 2:
        ap.error("--repeats must be >= 1 and --batches >= 2")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.executors.session import build_session

    sizes = [int(r) for r in args.rows.split(",") if r.strip()]
    lengths = [int(n) for n in args.operators.split(",") if n.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    configs = [(n, e) for n in lengths for e in engines]
    scored = args.batches - 1
    flags: dict[str, Any] = {"quick": args.quick}
    if scored < FULL_SCORED:
        flags["note"] = (
            f"{'quick: ' if args.quick else ''}{scored} scored batches per configuration, "
            f"fewer than a full run's {FULL_SCORED}"
        )
    spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    with tempfile.TemporaryDirectory(prefix="streamscale-bench-stages-") as tmp:
        # warm-up, not recorded: the session's first query pays Spark's and the Python
        # workers' start-up, which would land on the first configuration measured
        warm = Path(tmp) / "warm-up"
        write_inputs(warm / "in", min(sizes), 2)
        run_chain_streamscale(spark, 2, min(sizes), 2, warm)
        for rows in sizes:
            src = Path(tmp) / f"rows-{rows}" / "in"
            write_inputs(src, rows, args.batches)
            measured: list[dict[str, Any]] = []
            for r in range(repeats):
                order = pass_order(configs, r)
                lines: list[dict[str, Any]] = []
                for i, (n, engine) in enumerate(order):
                    work = Path(tmp) / f"rows-{rows}" / f"r{r}-{i}-{engine}-{n}"
                    got = measure(spark, engine, n, rows, args.batches, work, src)
                    line: dict[str, Any] = {
                        "bench": "stages", "engine": engine, "operators": n,
                        "rows_per_batch": rows, "repeat": r, "position": i,
                        "order": "forward" if r % 2 == 0 else "backward", **got,
                    }  # fmt: skip
                    if i == len(order) - 1:
                        line["again"] = True
                    if engine.startswith("streamscale"):
                        line["policy"] = "static"
                        line["fused"] = engine == "streamscale"
                    lines.append(line)
                ratios(lines)
                for line in lines:
                    full = {**line, **flags, "harness": HARNESS}
                    print(json.dumps(record("stages", full, argv=argv)), flush=True)
                measured += lines
            for line in summaries(measured):
                full = {**line, **flags, "harness": HARNESS}
                print(json.dumps(record("stages", full, argv=argv)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
