"""The keyed data path at zero per-tuple cost: streamscale's keyed stage against Spark's own.

Same generator (10 K keys, Zipf α ∈ {0.5, 1.0}, ``cost_ms`` 0), one run, local
Spark with 2 cores. One JSON line per path with ``"bench": "datapath"``,
``path``, ``alpha``, ``rows_per_s`` (and ``rows``, ``seconds``):

* ``elastic``: :func:`streamscale.runtime.spark.keyed.run_keyed` with the
  calculator, ``E = 2`` executors of ``Z = 64`` shards, shards placed on one
  unit per core by longest-processing-time first on the batch's shard loads
  (what the elastic planner's routing tables do), state read and written
  per shard every batch;
* ``static``: the same stage with each executor's shards on its own unit
  (no rebalancing);
* ``spark-sql``: Spark's own ``groupBy(key).agg(count, sum)`` over the same rows
  (no state kept between batches), written to the ``noop`` sink;
* ``spark-native``: ``applyInPandasWithState`` (:func:`~streamscale.runtime.spark.native.run_native`)
  over the streaming generator source, throughput after its first batch.

Two reference lines per α place those figures (they keep no state between batches, so
they are not baselines of a stateful operator):

* ``spark-pandas``: Spark's own grouped Python path, ``groupBy(key).applyInPandas``,
  running the same calculator function per key group (a fresh state per group), one
  output row per input row like the keyed stage, written to the ``noop`` sink: what a
  keyed Python function costs in Spark without any state kept;
* ``spark-sql-window``: the calculator's outputs in Spark SQL alone (running
  ``count`` and ``sum`` per key over arrival order, a window function), one output
  row per input row, written to the ``noop`` sink.

With ``--dags``, one line per Spark DAG example (``examples/spark-*.yaml``:
``"path": "dag"``, ``example``, ``rows_per_s`` = rows into the first keyed operator per
second of batch time after the first batch (source tuples times the fan-in, e.g. 4×
for the diamond), ``static`` policy, ``--dag-batches`` batches of
``--dag-rows`` generated tuples, the examples' own functions and keys, local Spark
with 2 cores) instead of the keyed-stage lines.

``elastic``, ``static`` and ``spark-sql`` time ``--repeat`` batches of ``--rows``
cached input rows after one warm-up batch (median batch time); the keyed stage
also returns every output row cached (one per input tuple).

Run: ``.venv/bin/python benchmarks/bench_datapath.py [--rows N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.runtime.spark.functions import calculator
from streamscale.runtime.spark.keyed import KeyedSpec, release, run_keyed
from streamscale.runtime.spark.routing import PartitionMap, global_shards
from streamscale.runtime.spark.sources import generate
from streamscale.runtime.spark.state import LocalStateBackend

E, Z, CORES = 2, 64, 2


def _emit(**line: Any) -> None:
    print(json.dumps({"bench": "datapath", **line}), flush=True)


def _lpt(loads: np.ndarray, units: int) -> tuple[int, ...]:
    """Shards onto ``units`` partitions, heaviest first onto the least-loaded one."""
    acc = [0.0] * units
    parts = [0] * len(loads)
    for g in np.argsort(-loads, kind="stable").tolist():
        p = min(range(units), key=acc.__getitem__)
        parts[g] = p
        acc[p] += float(loads[g])
    return tuple(parts)


def _keyed(df: Any, n: int, pmap: PartitionMap, root: Path, repeat: int) -> list[float]:
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("count", T.LongType()),
            T.StructField("sum", T.DoubleType()),
        ]
    )
    backend = LocalStateBackend(root / "state")
    spec = KeyedSpec("calc", "key", E, Z, calculator, {}, ("cost_ms",), backend, schema)
    times = []
    for b in range(repeat + 1):
        t0 = time.perf_counter()
        _, stats = run_keyed(
            df,
            spec,
            batch_id=b,
            upto=b - 1,
            pmap=pmap,
            attempt=uuid.uuid4().hex,
            hints=(),
            drops=(),
            dead_letter_dir=str(root / "dead"),
        )
        backend.commit("calc", b)
        if b:
            times.append(time.perf_counter() - t0)
        if stats.rows != n:
            raise SystemExit(f"keyed stage processed {stats.rows} rows of {n}")
    release("calc")
    return times


def _noop_times(out: Any, repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` runs of ``out`` into the ``noop`` sink, after a warm-up."""
    times = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        out.write.format("noop").mode("overwrite").save()
        if i:
            times.append(time.perf_counter() - t0)
    return times


def _references(df: Any) -> dict[str, Any]:
    """The reference paths' outputs over ``df``: one row per input row, no state kept."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    schema = "key string, count long, sum double"
    grouped = df.groupBy("key").applyInPandas(lambda pdf: calculator(pdf, {}), schema)
    w = Window.partitionBy("key").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    window = df.select(
        "key", F.count("*").over(w).alias("count"), F.sum("value").over(w).alias("sum")
    )
    return {"spark-pandas": grouped, "spark-sql-window": window}


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _dag_lines(spark: Any, rows: int, batches: int) -> None:
    """One line per Spark DAG example: first keyed operator's rows per second of batch time."""
    from streamscale.model import Operator, Topology
    from streamscale.runtime.spark.dag import run_graph
    from streamscale.runtime.spark.graph import JobGraph

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
                            out=Path(tmp), max_batches=batches)  # fmt: skip
        scored = res.batches[1:]
        busy = sum(b.duration_s for b in scored)
        first = graph.keyed[0]
        n = sum(b.keyed_rows.get(first, 0) for b in scored)
        _emit(path="dag", example=path.name, keyed=list(graph.keyed), rows=n,
              seconds=round(busy, 3), rows_per_s=round(n / busy) if busy else None)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--native-rows", type=int, default=20_000, help="rows per native batch")
    ap.add_argument("--dags", action="store_true", help="Lines for the DAG examples instead.")
    ap.add_argument("--dag-rows", type=int, default=20_000)
    ap.add_argument("--dag-batches", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.job import Job
    from streamscale.runtime.spark.native import run_native
    from streamscale.runtime.spark.session import build_session

    spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES)
    if args.dags:
        _dag_lines(spark, args.dag_rows, args.dag_batches)
        spark.stop()
        return
    for alpha in (0.5, 1.0):
        opts = {"keys": "10000", "alpha": str(alpha), "cost_ms": "0", "seed": "7"}
        pdf = generate(opts, 0, args.rows)
        df = spark.createDataFrame(pdf).repartition(CORES).cache()
        n = df.count()
        loads = np.bincount(global_shards(pdf["key"].tolist(), E, Z), minlength=E * Z)
        units = tuple(f"u{p}" for p in range(CORES))
        paths = {
            "elastic": PartitionMap("calc", E, Z, units, _lpt(loads.astype(float), CORES)),
            "static": PartitionMap("calc", E, Z, units, tuple(g // Z for g in range(E * Z))),
        }
        for name, pmap in paths.items():
            with tempfile.TemporaryDirectory() as tmp:
                t = statistics.median(_keyed(df, n, pmap, Path(tmp), args.repeat))
            _emit(path=name, alpha=alpha, rows=n, seconds=round(t, 3), rows_per_s=round(n / t))
        agg = df.groupBy("key").agg(F.count("*").alias("count"), F.sum("value").alias("sum"))
        t = statistics.median(_noop_times(agg, args.repeat))
        _emit(path="spark-sql", alpha=alpha, rows=n, seconds=round(t, 3), rows_per_s=round(n / t))
        for name, out in _references(df).items():
            t = statistics.median(_noop_times(out, args.repeat))
            _emit(path=name, alpha=alpha, rows=n, seconds=round(t, 3), rows_per_s=round(n / t))
        df.unpersist()
        m = args.native_rows
        nopts = {**opts, "rate": "1e9", "start_time": "0", "total": str(3 * m)}
        nopts["max_rows_per_batch"] = str(m)
        job = Job.simple(
            "calc", calculator, source_options=nopts, instances=E, shards=Z, trigger_s=0
        )
        with tempfile.TemporaryDirectory() as tmp:
            res = run_native(spark, job, duration_s=600, checkpoint=Path(tmp) / "ck", max_batches=3)
        _emit(
            path="spark-native",
            alpha=alpha,
            rows=res.rows,
            rows_per_s=round(res.throughput),
        )
    spark.stop()


if __name__ == "__main__":
    main()
