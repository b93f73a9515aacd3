"""Nexmark Q0-Q8 and Q11 on streamscale's Python API (the ``streamscale`` engine).

Each query is a job of :func:`streamscale.stream` over file streams of the event
tables (``maxFilesPerTrigger`` files per table and batch, as the ``spark-sql`` engine
reads them): stateless stages are ``map_batches``; aggregations are the declarative,
vectorized operators (``key_by(...).agg``, ``key_by(...).window(...).agg``: Spark
computes each batch's partial aggregates, tasks merge them into Arrow shard state,
:mod:`streamscale.runtime.spark.keyed.agg`); joins and what no aggregate expresses are
``key_by(...).process`` with the keyed functions of
:mod:`~streamscale.nexmark.streamscale_ops`. Every keyed stage is elastic under any
policy. A query over several tables reads one stream of their union with an
``event_type`` column (0 person, 1 auction, 2 bid), as the Flink suite's ``datagen``
table does.

=====  ===========================================================  =========  =========
query  operators (``agg``, ``join``: declarative, vectorized)        keyed by   final
=====  ===========================================================  =========  =========
q0     map                                                          -          append
q1     map                                                          -          append
q2     map                                                          -          append
q3     join of persons and auctions                                 person id  append
q4     keyed join, max per auction -> agg sum, count per category   auction,   upsert
       -> map average                                               category
q5     agg count per (hop window, auction) -> agg max per window    auction,   top
       -> left_semi join of the counts with the max                 window
q6     keyed winning bid -> keyed moving average per seller         auction,   upsert
                                                                    seller
q7     map (combiner) -> agg max per tumbling window -> left_semi   window     top
       join of the bids with the max
q8     agg per (person id, tumbling window) of persons and          person id  upsert
       auctions -> map: both there
q11    agg count per (bidder, session window), complete mode        bidder     last
=====  ===========================================================  =========  =========

Q5, Q7, Q8 and Q11 read ``dateTime`` as a timestamp, Q5, Q7 and Q11 with the published
4 s watermark (as the spark-sql engine's streams: late rows dropped; with the
generator's files in event-time order none is; the watermark bounds the joins' state
and closes Q5's windows, at the price of one batch without input after the last
file); Q8's update-mode windows keep their state, as the spark-sql engine's batch plan
holds every group; the other queries take times as epoch microseconds. The run goes
to the end of the input: one batch per file of each table; update-mode stages emit the
current value of every group a batch changed, and
:func:`~streamscale.nexmark.results.finalize` keeps the last (Spark's streaming
watermark moves only with data, so the windows still open at the end of the input
are flushed this way); Q11's complete mode emits every session each batch, the last
batch's are final. Q3 is the declarative stream-stream join (``join``: inner, no
time bound, so its state grows as Spark's).

Q5's and Q7's "rows at their window's maximum" (:func:`_with_top`): the maximum per
window is a declarative update-mode ``max``, and a ``left_semi`` join on (window end,
value) lets each row through once, in the batch it arrives, if it equals its window's
maximum then; the final result is, per window, the rows at the highest value emitted
(mode ``top``). What is still a keyed function: Q4's first stage (the auction-bid
interval join with the maximum per auction: its per-category average needs each
auction's maximum to be replaced, not added, and no declarative operator emits a
retraction) and Q6 (a row-based OVER window).
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamscale.nexmark import streamscale_ops as ops
from streamscale.nexmark.files import SPARK_SCHEMAS, read_meta
from streamscale.nexmark.results import check_query, finalize
from streamscale.runtime.run_config import RUN_SETTINGS

__all__ = ["FINAL", "WATERMARK", "build_job", "prepare", "run_streamscale", "source"]

#: How a query's emissions become its final result (mode, key): see results.finalize.
FINAL: dict[str, tuple[str, tuple[str, ...]]] = {
    "q0": ("append", ()),
    "q1": ("append", ()),
    "q2": ("append", ()),
    "q3": ("append", ()),
    "q4": ("upsert", ("id",)),
    "q5": ("top", ("wend", "num")),
    "q6": ("upsert", ("seller",)),
    "q7": ("top", ("wend", "price")),
    "q8": ("upsert", ("id", "stime")),
    "q11": ("last", ()),
}

#: The published watermark of the event-time queries (as spark_sql's streams).
WATERMARK = "4 seconds"
TUMBLE_US = 10_000_000  # Q7's tumbling window

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
        "person": {"key": "id", "name": "name", "dateTime": "dateTime", "p": "1", "a": "0"},
        "auction": {"key": "seller", "dateTime": "dateTime", "p": "0", "a": "1"},
    },
}
#: Queries reading event time as a timestamp (bid columns when they read bids only).
_EVENT_TIME = {"q5": ("auction", "dateTime"), "q8": (), "q11": ("bidder", "dateTime")}
#: ... and those under the published watermark. Q5's and Q8's update-mode windows run
#: without one: a watermark makes Spark run a batch without input after the last file
#: to move it, which closes nothing the flush at the end does not already give.
_WATERMARKED = ("q5", "q11")
_INT = {"p", "a"}
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
    frames = {
        t: _stream(spark, events_dir, t, files_per_trigger) for t in _SOURCES.get(q, {"bid": {}})
    }
    return prepare(q, frames)


def _q7_source(bids: Any) -> Any:
    """Q7's bids, each with the end ``wend`` of its 10 s tumbling window and ``mprice``
    (its price: it counts for that window's maximum); a bid exactly on a window's end
    comes a second time with that window and a null ``mprice`` (``B.dateTime BETWEEN
    end - 10 s AND end`` holds there too, but the bid is not in that window). Epoch-
    aligned windows in µs, in Spark SQL (no time zone)."""
    from pyspark.sql import functions as F

    size = TUMBLE_US
    us = F.unix_micros(F.col("dateTime"))
    own = F.struct((F.floor(us / size) * size + size).alias("e"), F.lit(True).alias("m"))
    edge = F.struct(us.alias("e"), F.lit(False).alias("m"))
    wins = F.when(us % size == 0, F.array(own, edge)).otherwise(F.array(own))
    cols = ["auction", "bidder", "price", "dateTime", "extra"]
    w = bids.select(*cols, F.explode(wins).alias("w"))
    return w.select(
        *cols,
        F.expr("timestamp_micros(w.e)").alias("wend"),
        F.when(F.col("w.m"), F.col("price")).alias("mprice"),
    )


def prepare(q: str, frames: dict[str, Any]) -> Any:
    """The query's input stream from streams of the event tables (``frames``: table
    name -> a stream with Nexmark's columns, files or the ``streamscale_nexmark``
    source): the columns the query's first operator takes; the published watermark
    for the event-time queries."""
    q = check_query(q)
    if q == "q7":
        return _q7_source(frames["bid"]).withWatermark("dateTime", WATERMARK)
    if q in _EVENT_TIME and q not in _SOURCES:
        df = frames["bid"].select(*_EVENT_TIME[q])
        return df.withWatermark("dateTime", WATERMARK) if q in _WATERMARKED else df
    if q not in _SOURCES:
        return frames["bid"].selectExpr(*(f"{expr} AS `{name}`" for name, expr in _BID.items()))
    spec = _SOURCES[q]
    names = list(dict.fromkeys(c for cols in spec.values() for c in cols))
    parts = []
    for table, cols in spec.items():
        exprs = [f"{_TYPE[table]} AS event_type"]
        for c in names:
            if c in cols:
                exprs.append(f"{cols[c]} AS `{c}`")
            else:
                kind = "STRING" if c in _STRINGS else "INT" if c in _INT else "BIGINT"
                exprs.append(f"CAST(NULL AS {kind}) AS `{c}`")
        parts.append(frames[table].selectExpr(*exprs))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    return df.withWatermark("dateTime", WATERMARK) if q in _WATERMARKED else df


def build_job(
    df: Any,
    q: str,
    *,
    instances: int = 2,
    shards: int = 8,
    available_now: bool = RUN_SETTINGS["available_now"].default,
    wait_ms: float = 0.0,
    trigger_s: float = 0.0,
    source: tuple[str, Mapping[str, Any]] | None = None,
) -> Any:
    """The query's operators on ``df`` (:func:`source`); returns the output stream.
    ``available_now``: a run processes what the files hold, then stops; ``wait_ms``:
    an emulated cost per input row of Q5's and Q8's windowed aggregation, waited
    (the surge scenario's per-tuple cost); ``source``: the registered source ``df``
    reads, ``(format, options)`` (:func:`~streamscale.runtime.spark.api.stream`), for
    its backlog and offered rate."""
    q = check_query(q)
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.api import stream

    s = stream(
        df, name=f"nexmark-{q}", available_now=available_now, trigger_s=trigger_s, source=source
    )
    kw = {"instances": instances, "shards": shards}
    if q == "q0":
        return s.map_batches(ops.q0_project, name="q0")
    if q == "q1":
        return s.map_batches(ops.q1_euro, name="q1")
    if q == "q2":
        return s.map_batches(ops.q2_select, name="q2")
    if q == "q3":
        persons = s.map_batches(ops.q3_persons, name="persons")
        auctions = s.map_batches(ops.q3_auctions, name="auctions")
        joined = persons.join(auctions, on="key", name="join", **kw)  # unbounded, as Spark's
        return joined.map_batches(ops.q3_project, name="q3")
    if q == "q4":
        m = s.key_by("key", **kw).process(ops.q4_max_delta, name="max_per_auction")
        sums = m.key_by("category", **kw).agg(
            F.sum("dsum").alias("total"), F.sum("dcount").alias("auctions"), name="per_category"
        )
        return sums.map_batches(ops.q4_average, name="average")
    if q == "q5":
        counts = (
            s.key_by("auction", **kw)
            .window("dateTime", "10 seconds", "2 seconds")
            .agg(
                F.count("*").alias("num"),
                bounds=("wstart", "wend"),
                wait_ms=wait_ms,
                name="bids_per_window",
            )
        )
        return _with_top(counts, "num", time_col="wend", upper=0, name="hot_items", **kw)
    if q == "q6":
        w = s.key_by("key", **kw).process(ops.q6_winning_bid, name="winning_bid")
        return w.key_by("seller", **kw).process(ops.q6_avg_per_seller, name="avg_per_seller")
    if q == "q7":
        bids = s.map_batches(ops.q7_candidates, name="candidates")
        return _with_top(
            bids, "price", top_of="mprice", time_col="dateTime", upper="10 seconds",
            name="highest", **kw,
        )  # fmt: skip
    if q == "q8":
        groups = (
            s.key_by("key", **kw)
            .window("dateTime", "10 seconds")
            .agg(
                F.max("p").alias("p"), F.max("a").alias("a"),
                F.first("name", ignorenulls=True).alias("name"),
                bounds=("stime", "etime"), wait_ms=wait_ms, name="per_window",
            )
        )  # fmt: skip
        return groups.map_batches(ops.q8_new_sellers, name="new_sellers")
    return (
        s.key_by("bidder", **kw)
        .window("dateTime", session_gap="10 seconds")
        .agg(
            F.count("*").alias("bid_count"), mode="complete",
            bounds=("starttime", "endtime"), name="sessions",
        )
    )  # fmt: skip


def _with_top(
    rows: Any,
    value: str,
    *,
    time_col: str,
    upper: str | int,
    name: str,
    top_of: str | None = None,
    instances: int,
    shards: int,
) -> Any:
    """The rows of ``rows`` (keyed by window end ``wend``) whose ``value`` equals their
    window's maximum so far: a declarative ``max`` per window (of ``top_of``, default
    ``value``; update mode), and a ``left_semi`` join of the rows with it on
    ``(wend, value)`` within ``wend BETWEEN time_col AND time_col + upper``.

    Each row comes out at most once, in the batch it arrives if it is at the maximum
    then: the maximum only grows, so a row below it can never reach it later, and a
    later row at the maximum meets the maximum the same batch emits for its window. A
    window's result is its rows at the highest ``value`` emitted (``results.finalize``,
    mode ``top``)."""
    from pyspark.sql import functions as F

    kw = {"instances": instances, "shards": shards}
    top = rows.key_by("wend", **kw).agg(F.max(top_of or value).alias(value), name="max_per_window")
    return rows.join(
        top, on=["wend", value], within=(time_col, "wend", 0, upper), how="left_semi",
        name=name, **kw,
    )  # fmt: skip


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
    (:func:`~streamscale.runtime.spark.driver.graph.run_graph_batch`: ``map_batches`` as
    ``mapInPandas``). ``Stream.run`` needs a keyed operator (its controller plans keyed
    operators), so this drives the same step from its own ``foreachBatch``."""
    from streamscale.runtime.spark.driver.graph import JobGraph, run_graph_batch

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
    instances: int = 2,
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
    job = build_job(df, q, instances=instances, shards=shards, available_now=stop_after is None)
    target: Any = "none" if sink == "none" else _parquet_sink(parts)
    job = job.to(target, name="out")
    done = len(list((out / "checkpoint" / "spark" / "commits").glob("[0-9]*")))
    t0 = time.perf_counter()
    committed: tuple[Any, ...] = ()
    n_committed = 0
    if q in _STATELESS and done < batches:  # (stop_after: keyed queries only)
        writer = None if sink == "none" else _parquet_sink(parts)
        committed = _run_stateless(spark, df, job.topology(), q, writer, out, batches - done)
        n_committed = len(committed)
    elif done < batches:  # else the checkpoint already holds the whole input
        res = job.run(
            checkpoint=out / "checkpoint",
            out=out,
            max_batches=None if stop_after is None else stop_after,
            duration_s=24 * 3600.0,
            spark=spark,
            policy=policy,
            params=params,
            seed=seed,
        )
        committed, n_committed = res.records, res.batches
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
        "batches": n_committed,
        "rows_out": rows_out,
        "wall_s": wall,
        "committed": committed,
    }
