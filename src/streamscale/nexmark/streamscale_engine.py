"""Nexmark Q0-Q8 and Q11 on streamscale's Python API (the ``streamscale`` engine).

Each query is a job of :func:`streamscale.stream` over file streams of the event
tables (``maxFilesPerTrigger`` files per table and batch, as the ``spark-sql`` engine
reads them): stateless stages are ``map_batches``, stateful ones ``key_by(...).process``
with the keyed functions of :mod:`~streamscale.nexmark.streamscale_ops`, elastic under
any policy. A query over several tables reads one stream of their union with an
``event_type`` column (0 person, 1 auction, 2 bid), as the Flink suite's ``datagen``
table does; times travel as epoch microseconds.

=====  =======================================================  ==============  =========
query  operators                                                key             final
=====  =======================================================  ==============  =========
q0     map                                                      -               append
q1     map                                                      -               append
q2     map                                                      -               append
q3     keyed join                                               person id       append
q4     keyed max per auction -> keyed average per category      auction, cat.   upsert
q5     map (hop windows) -> keyed counts and maxima per window  window start    replace
q6     keyed winning bid -> keyed moving average per seller     auction, seller upsert
q7     map (tumbling windows) -> keyed maximum per window       window end      replace
q8     keyed windowed join                                      person id       append
q11    keyed sessions                                           bidder          upsert
=====  =======================================================  ==============  =========

The run goes to the end of the input: one batch per file of each table; each batch
emits the current value of every window it touched, and
:func:`~streamscale.nexmark.results.finalize` keeps the last (a watermark reaching
the keyed functions, once the API passes one, will let them close windows instead:
see ``WATERMARK`` in :mod:`~streamscale.nexmark.streamscale_ops`).
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

from streamscale.nexmark import streamscale_ops as ops
from streamscale.nexmark.files import SPARK_SCHEMAS, read_meta
from streamscale.nexmark.results import check_query, finalize

__all__ = ["FINAL", "build_job", "run_streamscale", "source"]

#: How a query's emissions become its final result (mode, key): see results.finalize.
FINAL: dict[str, tuple[str, tuple[str, ...]]] = {
    "q0": ("append", ()),
    "q1": ("append", ()),
    "q2": ("append", ()),
    "q3": ("append", ()),
    "q4": ("upsert", ("id",)),
    "q5": ("replace", ("wstart",)),
    "q6": ("upsert", ("seller",)),
    "q7": ("replace", ("wend",)),
    "q8": ("append", ()),
    "q11": ("upsert", ("bidder", "starttime")),
}

# Per query and table: the columns of the source stream (Spark SQL expressions).
_SOURCES: dict[str, dict[str, dict[str, str]]] = {
    "q3": {
        "person": {"key": "id", "name": "name", "city": "city", "state": "state"},
        "auction": {"key": "seller", "aid": "id", "category": "category"},
    },
    "q4": {
        "auction": {
            "key": "id",
            "t": "unix_micros(dateTime)",
            "expires": "unix_micros(expires)",
            "category": "category",
        },
        "bid": {"key": "auction", "t": "unix_micros(dateTime)", "price": "price"},
    },
    "q6": {
        "auction": {
            "key": "id",
            "t": "unix_micros(dateTime)",
            "expires": "unix_micros(expires)",
            "seller": "seller",
        },
        "bid": {"key": "auction", "t": "unix_micros(dateTime)", "price": "price"},
    },
    "q8": {
        "person": {"key": "id", "name": "name", "t": "unix_micros(dateTime)"},
        "auction": {"key": "seller", "t": "unix_micros(dateTime)"},
    },
}
_BID = {
    "auction": "auction",
    "bidder": "bidder",
    "price": "price",
    "dateTime": "unix_micros(dateTime)",
    "extra": "extra",
}
_TYPE = {"person": 0, "auction": 1, "bid": 2}
_STRINGS = {"name", "city", "state"}


def _stream(spark: Any, events_dir: Path, table: str, files_per_trigger: int) -> Any:
    return (
        spark.readStream.schema(SPARK_SCHEMAS[table])
        .option("maxFilesPerTrigger", files_per_trigger)
        .parquet(str(Path(events_dir) / f"{table}.parquet"))
    )


def source(spark: Any, q: str, events_dir: Path, *, files_per_trigger: int = 1) -> Any:
    """The query's input stream: the bids, or the union of the tables it joins."""
    q = check_query(q)
    if q not in _SOURCES:
        return _stream(spark, events_dir, "bid", files_per_trigger).selectExpr(
            *(f"{expr} AS `{name}`" for name, expr in _BID.items())
        )
    spec = _SOURCES[q]
    names = list(dict.fromkeys(c for cols in spec.values() for c in cols))
    parts = []
    for table, cols in spec.items():
        exprs = [f"{_TYPE[table]} AS event_type"]
        for c in names:
            if c in cols:
                exprs.append(f"{cols[c]} AS `{c}`")
            else:
                exprs.append(f"CAST(NULL AS {'STRING' if c in _STRINGS else 'BIGINT'}) AS `{c}`")
        parts.append(_stream(spark, events_dir, table, files_per_trigger).selectExpr(*exprs))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    return df


def build_job(
    df: Any, q: str, *, executors: int = 2, shards: int = 8, available_now: bool = False
) -> Any:
    """The query's operators on ``df`` (:func:`source`); returns the output stream.
    ``available_now``: a run processes what the files hold, then stops."""
    q = check_query(q)
    from streamscale.runtime.spark.api import stream

    s = stream(df, name=f"nexmark-{q}", available_now=available_now)
    kw = {"executors": executors, "shards": shards}
    if q == "q0":
        return s.map_batches(ops.q0_project, name="q0")
    if q == "q1":
        return s.map_batches(ops.q1_euro, name="q1")
    if q == "q2":
        return s.map_batches(ops.q2_select, name="q2")
    if q == "q3":
        return s.key_by("key", **kw).process(ops.q3_join, name="join")
    if q == "q4":
        m = s.key_by("key", **kw).process(ops.q4_max_per_auction, name="max_per_auction")
        return m.key_by("category", **kw).process(ops.q4_category_avg, name="avg_per_category")
    if q == "q5":
        w = s.map_batches(ops.q5_windows, name="hop")
        return w.key_by("wstart", **kw).process(ops.q5_hot_items, name="hot_items")
    if q == "q6":
        w = s.key_by("key", **kw).process(ops.q6_winning_bid, name="winning_bid")
        return w.key_by("seller", **kw).process(ops.q6_avg_per_seller, name="avg_per_seller")
    if q == "q7":
        w = s.map_batches(ops.q7_windows, name="tumble")
        return w.key_by("wend", **kw).process(ops.q7_highest, name="highest")
    if q == "q8":
        return s.key_by("key", **kw).process(ops.q8_new_sellers, name="new_sellers")
    return s.key_by("bidder", **kw).process(ops.q11_sessions, name="sessions")


def _parquet_sink(parts: Path) -> Any:
    def write(df: Any, batch_id: int) -> None:
        if df.columns:  # a batch with no output at all has no schema
            df.write.mode("overwrite").parquet(str(parts / f"batch_id={batch_id}"))

    return write


_STATELESS = {"q0": ops.q0_project, "q1": ops.q1_euro, "q2": ops.q2_select}


def _run_stateless(
    spark: Any, df: Any, topology: Any, q: str, writer: Any, out: Path, batches: int
) -> tuple[int, ...]:
    """A job without keyed operators, batch by batch through streamscale's DAG step
    (:func:`~streamscale.runtime.spark.graph.run_graph_batch`: ``map_batches`` as
    ``mapInPandas``). ``Stream.run`` needs a keyed operator (its controller plans keyed
    operators), so this drives the same step from its own ``foreachBatch``."""
    from streamscale.runtime.spark.graph import JobGraph, run_graph_batch

    fns: dict[str, Any] = {q: _STATELESS[q]}
    if writer is not None:
        fns["out"] = writer
    graph = JobGraph.build(topology, fns)
    schemas: dict[str, Any] = {}
    seen: list[int] = []

    def each(batch_df: Any, batch_id: int) -> None:
        run_graph_batch(
            batch_df, graph, batch_id=batch_id, run_keyed_op=_no_keyed, out_dir=out,
            schemas=schemas,
        )  # fmt: skip
        seen.append(batch_id)

    query = (
        df.writeStream.foreachBatch(each)
        .option("checkpointLocation", str((out / "checkpoint" / "spark").resolve()))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"streamscale {q} failed: {query.exception()}")
    del batches  # availableNow ends at the end of the input by itself
    return tuple(seen)


def _no_keyed(name: str, df: Any) -> Any:
    raise AssertionError(f"no keyed operator expected, got {name}")


def run_streamscale(
    spark: Any,
    q: str,
    events_dir: Path,
    out: Path,
    *,
    policy: str = "static",
    files_per_trigger: int = 1,
    executors: int = 2,
    shards: int = 8,
    sink: str = "parquet",
    fresh: bool = True,
    params: dict[str, Any] | None = None,
    seed: int | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Run ``q`` over ``events_dir`` to the end of the input; the final result goes to
    ``out/result.parquet`` (``sink="none"``: rows counted, nothing written).

    ``fresh=False`` resumes from ``out/checkpoint`` (a run stopped mid-way goes on where
    its last committed batch ended); ``stop_after`` stops after that many batches of
    this run (the result is then written from what the batches so far emitted).
    Returns batches, rows out and wall seconds.
    """
    q = check_query(q)
    meta = read_meta(events_dir)
    out = Path(out)
    parts = out / "parts"
    if fresh:
        shutil.rmtree(parts, ignore_errors=True)
        shutil.rmtree(out / "checkpoint", ignore_errors=True)
    batches = math.ceil(int(meta["files"]) / files_per_trigger)
    df = source(spark, q, events_dir, files_per_trigger=files_per_trigger)
    # To the end of the input: the files the source has not committed, however Spark
    # groups them into batches (a restart may take two files in its first batch: the
    # file source logs a file before the batch's offsets, and a killed driver can stop
    # between the two).
    job = build_job(df, q, executors=executors, shards=shards, available_now=stop_after is None)
    target: Any = "none" if sink == "none" else _parquet_sink(parts)
    job = job.to(target, name="out")
    done = len(list((out / "checkpoint" / "spark" / "commits").glob("[0-9]*")))
    t0 = time.perf_counter()
    committed: tuple[Any, ...] = ()
    if q in _STATELESS and done < batches:  # (stop_after: keyed queries only)
        writer = None if sink == "none" else _parquet_sink(parts)
        committed = _run_stateless(spark, df, job.topology(), q, writer, out, batches - done)
    elif done < batches:  # else the checkpoint already holds the whole input
        committed = job.run(
            checkpoint=out / "checkpoint",
            out=out,
            max_batches=None if stop_after is None else stop_after,
            duration_s=24 * 3600.0,
            spark=spark,
            policy=policy,
            params=params,
            seed=seed,
        ).batches
    wall = time.perf_counter() - t0
    rows_out = None
    if sink != "none":
        mode, key = FINAL[q]
        rows_out = len(finalize(q, parts, out, mode=mode, key=key))
    return {
        "query": q,
        "engine": "streamscale",
        "mode": "streaming",
        "policy": policy,
        "batches": len(committed),
        "rows_out": rows_out,
        "wall_s": wall,
        "committed": committed,
    }
