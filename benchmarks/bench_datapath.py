"""The keyed data path at zero per-tuple cost: streamscale's keyed stage against Spark's own,
every path on one harness.

The harness (``harness`` in every line, :data:`streamscale.scenarios.harness.HARNESS`):
``--batches`` + 1 Parquet files of ``--rows`` generated tuples each (10 K keys, Zipf
α ∈ {0.5, 1.0}, ``cost_ms`` 0), read by each path as a streaming query that takes one
file per batch; every output goes to Spark's ``noop`` sink; a batch's time is Spark's
own ``durationMs.triggerExecution``, the median over the batches after the first. Local
Spark with 2 cores and 2 shuffle partitions for every path. One JSON line per path with
``"bench": "datapath"``, ``path``, ``alpha``, ``rows``, ``seconds``, ``rows_per_s``:

* ``elastic`` / ``static``: streamscale's keyed operator through its Python API
  (``stream(df).key_by("key", instances=2, shards=64).process(calculator)``) under the
  ``elastic`` / ``static`` policy, state kept per shard;
* ``spark-sql``: Spark's streaming aggregation ``groupBy(key).agg(count, sum)``, update
  mode, state in Spark's default state store;
* ``spark-tws``: the calculator as a ``StatefulProcessor`` under
  ``transformWithStateInPandas`` on the RocksDB provider with changelog checkpointing
  (:mod:`streamscale.scenarios.tws`);
* ``spark-native``: the calculator under ``applyInPandasWithState`` (count and sum in the
  group state), Spark's default state store.

Declarative keyed operators (:meth:`~streamscale.runtime.spark.api.KeyedStream.agg`),
each beside the Spark SQL streaming query with the same outputs (update mode):

* ``elastic-agg``: ``key_by("key").agg(count, sum)`` (reference ``spark-sql``);
* ``elastic-window``: the same per 10 s tumbling event-time window, 10 s watermark
  (reference ``spark-sql-tumbling``: ``groupBy(window(event_time, "10 seconds"), key)``);
* ``elastic-sliding``: 10 s windows sliding by 5 s (reference ``spark-sql-sliding``).

A ``"figure": "agg-ratios"`` line per α gives each one's rows/s over its reference's.

Two reference lines keep no state between batches (so they are not baselines of a
stateful operator), run per batch in ``foreachBatch``: ``spark-pandas`` (Spark's grouped
Python path, ``groupBy(key).applyInPandas`` of the calculator) and ``spark-sql-window``
(the calculator's outputs in SQL alone: running count and sum per key by a window).

With ``--dags``, one line per Spark DAG example instead (``"path": "dag"``, rows into the
first keyed operator per second of batch time, ``static`` policy).

Then one ``"figure": "ratios"`` line per α: ``elastic_over`` — elastic's rows/s over each
other path's, from the same run.

Lines are appended to ``benchmarks/results/datapath.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_datapath.py [--quick] [--rows N] [--batches B]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import record

from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.scenarios.harness import HARNESS, batch_seconds, file_stream, write_batches
from streamscale.scenarios.spark_log import ProgressLog
from streamscale.scenarios.tws import ROCKSDB_CONF, calculator_query, group_state_query

E, Z, CORES = 2, 64, 2
TARGETS = "elastic >= 3x spark-tws and >= 5x spark-native rows/s (zero per-tuple cost)"
AGG_TARGETS = "elastic-agg, elastic-window, elastic-sliding >= 0.5x their Spark SQL reference"
#: each declarative path and the Spark SQL streaming query computing the same outputs
AGG_PAIRS = {"elastic-agg": "spark-sql", "elastic-window": "spark-sql-tumbling",
             "elastic-sliding": "spark-sql-sliding"}  # fmt: skip
PATHS = ("elastic", "static", "spark-sql", "spark-tws", "spark-native", "spark-pandas",
         "spark-sql-window", "elastic-agg", "elastic-window", "spark-sql-tumbling",
         "elastic-sliding", "spark-sql-sliding")  # fmt: skip
WATERMARK, WINDOW, SLIDE = "10 seconds", "10 seconds", "5 seconds"


def _emit(argv: list[str], **line: Any) -> None:
    full = record("datapath", {"bench": "datapath", **line}, argv=argv)
    print(json.dumps(full), flush=True)


def _noop(df: Any, batch_id: int) -> None:
    df.write.format("noop").mode("overwrite").save()


def _streamscale(spark: Any, src: Path, ck: Path, policy: str, batches: int) -> None:
    from streamscale.runtime.spark.api import stream

    calc = stream(file_stream(spark, src)).key_by("key", instances=E, shards=Z)
    out = calc.process(calculator, name="calc")
    out.to(_noop, name="noop")
    out.run(checkpoint=ck, max_batches=batches, duration_s=3600, policy=policy)


def _aggs() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.count("*").alias("count"), F.sum("value").alias("sum")]


def _streamscale_agg(spark: Any, src: Path, ck: Path, path: str, batches: int) -> None:
    """``elastic-agg``: ``key_by(key).agg(count, sum)``; ``elastic-window`` /
    ``elastic-sliding``: the same per event-time window (update mode, watermark)."""
    from streamscale.runtime.spark.api import stream

    df = file_stream(spark, src)
    if path != "elastic-agg":
        df = df.withWatermark("event_time", WATERMARK)
    keyed = stream(df).key_by("key", instances=E, shards=Z)
    if path == "elastic-agg":
        out = keyed.agg(*_aggs(), name="agg")
    else:
        slide = SLIDE if path == "elastic-sliding" else None
        out = keyed.window("event_time", WINDOW, slide).agg(*_aggs(), name="agg")
    out.to(_noop, name="noop")
    out.run(checkpoint=ck, max_batches=batches, duration_s=3600, policy="elastic")


def _spark_window(df: Any, slide: str | None) -> Any:
    from pyspark.sql import functions as F

    w = F.window("event_time", WINDOW, slide) if slide else F.window("event_time", WINDOW)
    return df.withWatermark("event_time", WATERMARK).groupBy(w, "key").agg(*_aggs())


def _query(spark: Any, df: Any, ck: Path, *, per_batch: Callable[[Any], Any] | None = None) -> None:
    """A streaming query of ``df`` into the noop sink (``per_batch``: a stateless
    transformation of each micro-batch, run in ``foreachBatch``)."""
    if per_batch is None:
        ws = df.writeStream.format("noop").outputMode("update")
    else:
        ws = df.writeStream.foreachBatch(lambda b, i: _noop(per_batch(b), i))
    q = ws.option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
    q.awaitTermination()
    if q.exception() is not None:
        raise SystemExit(f"query failed: {q.exception()}")


def _pandas_per_batch(df: Any) -> Any:
    schema = "key string, count long, sum double"
    return df.groupBy("key").applyInPandas(lambda pdf: calculator(pdf, {}), schema)


def _window_per_batch(df: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("key").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    return df.select(
        "key", F.count("*").over(w).alias("count"), F.sum("value").over(w).alias("sum")
    )


def run_path(spark: Any, path: str, src: Path, ck: Path, batches: int) -> None:
    """One path over the files in ``src`` as a streaming query (checkpoint ``ck``)."""
    from pyspark.sql import functions as F

    if path in ("elastic", "static"):
        _streamscale(spark, src, ck, path, batches)
        return
    if path in ("elastic-agg", "elastic-window", "elastic-sliding"):
        _streamscale_agg(spark, src, ck, path, batches)
        return
    df = file_stream(spark, src)
    if path == "spark-sql":
        agg = df.groupBy("key").agg(F.count("*").alias("count"), F.sum("value").alias("sum"))
        _query(spark, agg, ck)
    elif path == "spark-sql-tumbling":
        _query(spark, _spark_window(df, None), ck)
    elif path == "spark-sql-sliding":
        _query(spark, _spark_window(df, SLIDE), ck)
    elif path == "spark-tws":
        _query(spark, calculator_query(df), ck)
    elif path == "spark-native":
        _query(spark, group_state_query(df), ck)
    elif path == "spark-pandas":
        _query(spark, df, ck, per_batch=_pandas_per_batch)
    elif path == "spark-sql-window":
        _query(spark, df, ck, per_batch=_window_per_batch)
    else:
        raise SystemExit(f"unknown path {path!r} (known: {', '.join(PATHS)})")


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _dag_lines(spark: Any, rows: int, batches: int, argv: list[str]) -> None:
    """One line per Spark DAG example: first keyed operator's rows per second of batch time."""
    from streamscale.model import Operator, Topology
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.driver.graph import JobGraph

    for path in sorted(EXAMPLES.glob("spark-*.yaml")):
        base = JobGraph.from_yaml(path).topology
        ops = []
        for op in base.operators:
            if op.kind == "source":
                params = {k: v for k, v in op.params.items() if k != "rate"}
                params.update(total=rows * batches, max_rows_per_batch=rows, start_time=0,
                              seed=7, trigger_s=0)  # fmt: skip
                op = Operator(name=op.name, kind="source", params=params)
            ops.append(op)
        graph = JobGraph.build(Topology.build(base.name, ops, list(base.edges)))
        # Console sinks (the star's `show`) print on the driver: keep stdout JSON lines only.
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
            res = run_graph(spark, graph, duration_s=900, checkpoint=Path(tmp) / "ck",
                            out=Path(tmp), max_batches=batches, policy="static")  # fmt: skip
        scored = res.records[1:]
        busy = sum(b.duration_s for b in scored)
        first = graph.keyed[0]
        n = sum(b.keyed_rows.get(first, 0) for b in scored)
        _emit(argv, path="dag", example=path.name, keyed=list(graph.keyed), rows=n,
              seconds=round(busy, 3), rows_per_s=round(n / busy) if busy else None)  # fmt: skip


def main(argv: list[str] | None = None, spark: Any | None = None) -> None:
    """Run the benchmark; ``spark``: a ``local[N]`` session to run on (left running)
    instead of building one (the smoke test's)."""
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows per batch")
    ap.add_argument("--batches", type=int, default=3, help="timed batches (after one warm-up)")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--alphas", default="0.5,1.0")
    ap.add_argument("--quick", action="store_true", help="50,000 rows, 2 batches, α 1.0")
    ap.add_argument(
        "--smoke", action="store_true",
        help="2,000 rows, 1 batch, α 1.0, elastic and spark-sql: runs at all",
    )  # fmt: skip
    ap.add_argument("--dags", action="store_true", help="Lines for the DAG examples instead.")
    ap.add_argument("--dag-rows", type=int, default=20_000)
    ap.add_argument("--dag-batches", type=int, default=4)
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.batches, args.alphas = 50_000, 2, "1.0"
    if args.smoke:
        args.rows, args.batches, args.alphas = 2_000, 1, "1.0"
        args.paths, args.dag_rows, args.dag_batches = "elastic,spark-sql", 500, 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.executors.session import build_session

    conf = {k: v for k, v in ROCKSDB_CONF.items() if "changelog" in k}
    own = spark is None
    if spark is None:
        spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES, conf=conf)
    try:
        _main(spark, args, argv)
    finally:
        if own:
            spark.stop()


def _main(spark: Any, args: argparse.Namespace, argv: list[str]) -> None:
    if args.dags:
        _dag_lines(spark, args.dag_rows, args.dag_batches, argv)
        return
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    provider = "spark.sql.streaming.stateStore.providerClass"
    default_provider = spark.conf.get(provider)
    for alpha in [float(a) for a in args.alphas.split(",")]:
        rates: dict[str, float] = {}
        opts = {"keys": "10000", "alpha": str(alpha), "cost_ms": "0", "seed": "7"}
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "in"
            write_batches(src, opts, args.rows, args.batches + 1)
            for path in paths:
                # the state store is fixed per query at its start: RocksDB for spark-tws
                # (the only store it supports), Spark's default for everything else
                spark.conf.set(provider, ROCKSDB_CONF[provider] if path == "spark-tws"
                               else default_provider)  # fmt: skip
                log = ProgressLog().attach(spark)
                try:
                    run_path(spark, path, src, Path(tmp) / f"ck-{path}", args.batches + 1)
                    secs = batch_seconds(log.settle())
                finally:
                    log.detach()
                t = statistics.median(secs)
                rates[path] = args.rows / t
                _emit(argv, path=path, alpha=alpha, rows=args.rows, batches=len(secs),
                      seconds=round(t, 3), rows_per_s=round(args.rows / t),
                      seconds_min=round(min(secs), 3), seconds_max=round(max(secs), 3),
                      harness=HARNESS, cost_ms=0, cores=CORES)  # fmt: skip
        if "elastic" in rates:
            _emit(argv, figure="ratios", alpha=alpha, targets=TARGETS, harness=HARNESS,
                  elastic_over={p: round(rates["elastic"] / r, 3) for p, r in rates.items()
                                if p != "elastic"})  # fmt: skip
        pairs = {p: ref for p, ref in AGG_PAIRS.items() if p in rates and ref in rates}
        if pairs:
            _emit(argv, figure="agg-ratios", alpha=alpha, targets=AGG_TARGETS, harness=HARNESS,
                  over_spark={p: round(rates[p] / rates[ref], 3) for p, ref in pairs.items()},
                  reference=pairs)  # fmt: skip


if __name__ == "__main__":
    main()
