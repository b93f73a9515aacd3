"""The Spark-native baseline: the same keyed job written the idiomatic Spark way.

``groupBy(key).applyInPandasWithState(...)`` with Spark's own state store: the
number of state partitions is fixed at the query's first batch
(``spark.sql.shuffle.partitions``), keys are hash-partitioned by Spark and never
rebalanced. This is what paper 000 (§1, §6) calls a static key partitioning,
on Spark's terms, and the reference every elastic policy is compared against
on the same generated tuples.

The job's own keyed function runs unchanged: for each key in a batch it gets
that key's rows in arrival order (``seq``) and a state dict holding only that
key's entries, pickled in Spark's state store between batches. Each group
reports its rows, busy time, per-tuple latency (event time → processed) and the
key's state as JSON, so one action per batch yields a
:class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`, the record every job's
batches have.
"""

from __future__ import annotations

import json
import math
import pickle
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat.group_state import from_group_state
from streamscale.runtime.spark.driver.drive import drive_query
from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.history import RunHistory
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.metrics import MetricsWriter, imbalance
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.driver.runner import summarize_run
from streamscale.runtime.spark.sources.sources import register_sources

__all__ = ["NATIVE_POLICY", "from_group_state", "group_function", "run_native"]

NATIVE_POLICY = "spark-native"

_OUTPUT_SCHEMA = (
    "key string, rows long, dead long, busy_s double, out_rows long, "
    "latency_ms array<double>, state string"
)
_STATE_SCHEMA = "blob binary"
_ETS = "__ets"
_PYSPARK_CONCAT_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"


def group_function(
    fn: Callable[..., Any],
    params: Mapping[str, Any],
    required: tuple[str, ...],
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], Any], Iterator[pd.DataFrame]]:
    """Wrap a keyed function ``fn(rows, state, **params)`` for ``applyInPandasWithState``.

    Tuples with a missing key or a non-numeric required field are counted as
    dead letters and skipped, as the elastic operator does.
    """

    quiet: list[bool] = [False]

    def run(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        if not quiet[0]:
            # pyspark's worker pads this operator's output with all-NA frames and pandas
            # warns about it on every batch; the warning concerns pyspark, not the job.
            warnings.filterwarnings("ignore", _PYSPARK_CONCAT_WARNING, FutureWarning)
            quiet[0] = True
        rows = pd.concat(list(frames), ignore_index=True)
        if "seq" in rows.columns:
            rows = rows.sort_values("seq", kind="stable", ignore_index=True)
        ets = rows.pop(_ETS).to_numpy(dtype=float)
        ok = np.full(len(rows), key[0] is not None and str(key[0]) != "")
        for col in required:
            num = pd.to_numeric(rows[col], errors="coerce") if col in rows else None
            ok &= False if num is None else np.isfinite(num.to_numpy(dtype=float))
        dead = int((~ok).sum())
        rows, ets = rows[ok].reset_index(drop=True), ets[ok]
        st: dict[Any, Any] = pickle.loads(state.get[0]) if state.exists else {}
        out_rows = 0
        t0 = time.perf_counter()
        if len(rows):
            res = fn(rows, st, **params)
            if isinstance(res, tuple):
                res, st = res
            out_rows = 0 if res is None else len(res)
        busy = time.perf_counter() - t0
        latency = (time.time() - ets) * 1000.0
        state.update((pickle.dumps(st),))
        yield pd.DataFrame(
            {
                "key": [None if key[0] is None else str(key[0])],
                "rows": [len(rows)],
                "dead": [dead],
                "busy_s": [busy],
                "out_rows": [out_rows],
                "latency_ms": [latency.tolist()],
                "state": [json.dumps(st, default=str)],
            }
        )

    return run


def run_native(
    spark: Any,
    job: Job,
    *,
    duration_s: float,
    checkpoint: Path,
    out: Path | None = None,
    params: Mapping[str, Any] | None = None,
    on_batch: Callable[[GraphBatch], None] | None = None,
    max_batches: int | None = None,
    seed: int | None = None,
    on_state: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    """Run ``job``'s keyed operator as a Spark-native stateful query.

    Parameters
    ----------
    spark, job, duration_s, checkpoint, out, on_batch, max_batches
        As for :func:`streamscale.runtime.spark.driver.runner.run_job`.
    params
        ``partitions``: Spark state partitions (default: the operator's
        ``instances``, the parallelism of the ``static`` policy).
    seed
        Unused (Spark's placement is not randomised); accepted for symmetry.
    on_state
        Called per batch with ``{key: state}`` of the keys that batch touched.

    Raises
    ------
    StreamscaleError
        The job has stateless operators (not supported here), or a batch failed.
    """
    del seed
    if job.before or job.after:
        raise StreamscaleError(
            "the Spark-native baseline runs source → keyed → sink jobs only",
            item=f"topology {job.topology.name}",
        )
    from pyspark.sql import functions as F

    opts = dict(params or {})
    partitions = int(opts.get("partitions", job.operator.instances))
    cores = int(spark.sparkContext.defaultParallelism)
    register_sources(spark)
    if job.source_class is not None:
        spark.dataSource.register(job.source_class)
    writer = MetricsWriter(Path(out) / "metrics.jsonl") if out is not None else None
    history = RunHistory()
    dead_total = [0]
    done = threading.Event()
    in_batch = threading.Event()
    clock = time.monotonic
    t_start = clock()
    last_end = [0.0]

    def on_micro_batch(batch_df: Any, batch_id: int) -> None:
        if done.is_set():  # past max_batches: Spark started it before the query stopped
            return
        in_batch.set()
        try:
            t0 = time.perf_counter()
            res = batch_df.withColumn("pid", F.spark_partition_id()).toPandas()
            duration = time.perf_counter() - t0
            now = clock() - t_start
            rec, lat = _record(res, job, batch_id, duration, now, last_end[0],
                               cores=cores, partitions=partitions)  # fmt: skip
            dead_total[0] += rec.dead_letters
            last_end[0] = now
            history.add(rec, lat)
            if writer is not None:
                writer.write(rec)
            if on_state is not None:
                on_state({k: json.loads(s) for k, s in zip(res["key"], res["state"], strict=True)})
            if on_batch is not None:
                on_batch(rec)
            if max_batches is not None and len(history) >= max_batches:
                done.set()
        finally:
            in_batch.clear()

    query = _start(spark, job, partitions, on_micro_batch, checkpoint)
    drive_query(
        query,
        stop_at=t_start + duration_s,
        done=done,
        in_batch=in_batch,
        records=history.recent,
        item=f"operator {job.keyed}",
        clock=clock,
    )
    return summarize_run(history, job, cores, dead_letters=dead_total[0], plan=None)


def _record(
    res: Any, job: Job, batch_id: int, duration: float, now: float, last_end: float, *,
    cores: int, partitions: int,
) -> tuple[GraphBatch, np.ndarray]:  # fmt: skip
    """One micro-batch's record from its collected rows (one per key touched, with its
    Spark partition ``pid``), and every tuple's latency (ms)."""
    lat = np.concatenate([np.asarray(x, dtype=float) for x in res["latency_ms"]] or [[]])
    busy = res.groupby("pid")["busy_s"].sum()
    loads = [float(busy.get(p, 0.0)) for p in range(partitions)]
    rows = int(res["rows"].sum())
    rec = GraphBatch(
        batch_id=batch_id,
        duration_s=duration,
        keyed_rows={job.keyed: rows},
        sinks={},
        dead_letters=int(res["dead"].sum()),
        cores={job.keyed: cores},
        tasks={job.keyed: partitions},
        extra={
            "per_task": {str(p): {"busy_s": round(x, 6)} for p, x in enumerate(loads)},
            "out_rows": {job.keyed: int(res["out_rows"].sum())},
            "keys": len(res),
        },
        time=now,
        rows=rows,
        input_rate=rows / (now - last_end) if now > last_end else math.nan,
        processing_rate=rows / duration if duration > 0 else math.nan,
        latency_p50_ms=float(np.percentile(lat, 50)) if len(lat) else math.nan,
        latency_p99_ms=float(np.percentile(lat, 99)) if len(lat) else math.nan,
        delta=imbalance(loads),
        busy_s=float(res["busy_s"].sum()),
        policy=NATIVE_POLICY,
    )
    return rec, lat


def _start(
    spark: Any, job: Job, partitions: int, on_micro_batch: Callable[[Any, int], None],
    checkpoint: Path,
) -> Any:  # fmt: skip
    """Start the query: the source, ``applyInPandasWithState`` on the operator's key over
    ``partitions`` state partitions, ``on_micro_batch`` as its ``foreachBatch``."""
    from pyspark.sql import functions as F

    op = job.operator
    fn = job.functions[job.keyed]
    required = tuple(getattr(fn, "required_fields", ()))
    reader = spark.readStream.format(job.source_format)
    if job.source_options:
        reader = reader.options(**dict(job.source_options))
    stream = reader.load().withColumn(_ETS, F.unix_micros("event_time").cast("double") / 1e6)
    grouped = stream.groupBy(str(op.key)).applyInPandasWithState(
        group_function(fn, dict(op.params), required),
        _OUTPUT_SCHEMA,
        _STATE_SCHEMA,
        "update",
        "NoTimeout",
    )
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        ws = (
            grouped.writeStream.foreachBatch(on_micro_batch)
            .outputMode("update")
            .option("checkpointLocation", str((Path(checkpoint) / "spark").resolve()))
        )
        if job.trigger_s > 0:
            ws = ws.trigger(processingTime=f"{job.trigger_s} seconds")
        return ws.start()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
