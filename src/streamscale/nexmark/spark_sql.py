"""Nexmark Q0-Q8 and Q11 on Spark's own engine (the ``spark-sql`` engine).

Each query is the Nexmark suite for Flink SQL's (``nexmark-flink/src/main/resources/
queries/q*.sql``) in Spark SQL, with the short windows (Q5 hop 2 s / 10 s, Q7 and Q8
tumbling 10 s, Q11 session gap 10 s). Spark's ``window`` and ``session_window`` are
aligned to the epoch, as Flink's ``HOP``/``TUMBLE``/``SESSION`` are; a session ends at
its last event plus the gap in both. Prices converted or averaged are doubles.

How Spark runs each query over the same files (``DIR/<table>.parquet``):

=====  ==================================  ==============================================
query  Spark                               why
=====  ==================================  ==============================================
q0     Structured Streaming, append        a projection
q1     Structured Streaming, append        a projection
q2     Structured Streaming, append        a filter
q3     Structured Streaming, append        stream-stream inner join (unbounded state)
q4     Spark SQL batch                     a join, then two aggregations in a chain
q5     Spark SQL batch                     windowed counts joined with their own maxima
q6     Spark SQL batch                     a row-based OVER window: no streaming form
q7     Spark SQL batch                     windowed maxima joined back with the stream
q8     Spark SQL batch                     a join of two windowed aggregations
q11    Structured Streaming, complete      ``session_window`` (4 s watermark)
=====  ==================================  ==============================================

A streaming query reads the tables as file streams (``maxFilesPerTrigger`` files per
table and batch) with ``trigger(availableNow=True)``, so it runs to the end of the
input in several batches. Structured Streaming does not close an event-time window
at the end of the input (the watermark only moves with data) and refuses update mode
for session windows, so Q11 runs in complete mode and its final result is its last
batch's; append queries keep every row. Flink's declared but incidental details are not copied: Q6's
``seller VARCHAR``/``avg_price BIGINT`` (here the seller's id and a double), and Q7's
``SELECT B.auction, B.price, B.bidder`` into ``(auction, bidder, price)`` by position
(here the columns by name). Q6's ties: a winning bid is the highest price, then the
earliest; a seller's auctions are ordered by their winning bid's time, then auction id.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd

from streamscale.nexmark.files import SPARK_SCHEMAS, TABLES, read_meta
from streamscale.nexmark.results import TIME_COLUMNS, check_query, finalize

__all__ = ["MODES", "SQL", "build", "run_spark_sql", "tables"]

#: How Spark runs the query (see the module docstring).
MODES: dict[str, str] = {
    "q0": "append",
    "q1": "append",
    "q2": "append",
    "q3": "append",
    "q4": "batch",
    "q5": "batch",
    "q6": "batch",
    "q7": "batch",
    "q8": "batch",
    "q11": "complete",
}

_USES: dict[str, tuple[str, ...]] = {
    "q3": ("auction", "person"),
    "q4": ("auction", "bid"),
    "q6": ("auction", "bid"),
    "q8": ("person", "auction"),
}

SQL: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM bid",
    "q1": """SELECT auction, bidder, 0.908D * CAST(price AS DOUBLE) AS price, dateTime, extra
             FROM bid""",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id
             FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
             WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "q4": """SELECT Q.category AS id, AVG(Q.final) AS final
             FROM (SELECT MAX(B.price) AS final, A.category
                   FROM auction A, bid B
                   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
                   GROUP BY A.id, A.category) Q
             GROUP BY Q.category""",
    "q5": """WITH C AS (SELECT auction, count(*) AS num, window.start AS starttime,
                               window.end AS endtime
                        FROM bid GROUP BY auction, window(dateTime, '10 seconds', '2 seconds'))
             SELECT C.auction, C.num
             FROM C JOIN (SELECT max(num) AS maxn, starttime, endtime FROM C
                          GROUP BY starttime, endtime) M
             ON C.starttime = M.starttime AND C.endtime = M.endtime AND C.num >= M.maxn""",
    "q6": """SELECT seller, avg_price FROM (
               SELECT seller,
                      AVG(price) OVER (PARTITION BY seller ORDER BY dateTime, id
                                       ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_price,
                      ROW_NUMBER() OVER (PARTITION BY seller
                                         ORDER BY dateTime DESC, id DESC) AS latest
               FROM (SELECT A.id, A.seller, B.price, B.dateTime,
                            ROW_NUMBER() OVER (PARTITION BY A.id, A.seller
                                               ORDER BY B.price DESC, B.dateTime ASC) AS rownum
                     FROM auction AS A, bid AS B
                     WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
               WHERE rownum <= 1)
             WHERE latest = 1""",
    "q7": """SELECT B.auction, B.bidder, B.price, B.dateTime, B.extra
             FROM bid B
             JOIN (SELECT MAX(price) AS maxprice, window.end AS dateTime
                   FROM bid GROUP BY window(dateTime, '10 seconds')) B1
             ON B.price = B1.maxprice
             WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL 10 SECONDS AND B1.dateTime""",
    "q8": """SELECT P.id, P.name, P.starttime AS stime
             FROM (SELECT id, name, window.start AS starttime, window.end AS endtime
                   FROM person GROUP BY id, name, window(dateTime, '10 seconds')) P
             JOIN (SELECT seller, window.start AS starttime, window.end AS endtime
                   FROM auction GROUP BY seller, window(dateTime, '10 seconds')) A
             ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
    "q11": """SELECT bidder, count(*) AS bid_count, session_window.start AS starttime,
                     session_window.end AS endtime
              FROM bid GROUP BY bidder, session_window(dateTime, '10 seconds')""",
}


def tables(
    spark: Any, events_dir: Path, *, streaming: bool, files_per_trigger: int = 1
) -> dict[str, Any]:
    """The three tables as DataFrames (file streams when ``streaming``), with the
    published 4 s watermark on ``dateTime`` for streams."""
    out = {}
    for t in TABLES:
        path = str(Path(events_dir) / f"{t}.parquet")
        if streaming:
            df = (
                spark.readStream.schema(SPARK_SCHEMAS[t])
                .option("maxFilesPerTrigger", files_per_trigger)
                .parquet(path)
                .withWatermark("dateTime", "4 seconds")
            )
        else:
            df = spark.read.schema(SPARK_SCHEMAS[t]).parquet(path)
        out[t] = df
    return out


def build(spark: Any, q: str, frames: dict[str, Any]) -> Any:
    """Query ``q`` over ``frames`` (table name → DataFrame), time columns as epoch µs."""
    from pyspark.sql import functions as F

    q = check_query(q)
    for name in _USES.get(q, ("bid",)):
        frames[name].createOrReplaceTempView(name)
    df = spark.sql(SQL[q])
    for c in TIME_COLUMNS.get(q, ()):
        df = df.withColumn(c, F.unix_micros(F.col(c)))
    return df


def run_spark_sql(
    spark: Any,
    q: str,
    events_dir: Path,
    out: Path,
    *,
    files_per_trigger: int = 1,
    sink: str = "parquet",
) -> dict[str, Any]:
    """Run ``q`` over ``events_dir`` to the end of the input; the final result goes to
    ``out/result.parquet`` (``sink="noop"``: rows counted, nothing written).

    Returns the mode, batches, input rows, output rows and wall seconds of the run.
    """
    q = check_query(q)
    read_meta(events_dir)
    mode = MODES[q]
    out = Path(out)
    parts = out / "parts"
    shutil.rmtree(parts, ignore_errors=True)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    rows_out = [0]
    batches = [0]
    t0 = time.perf_counter()
    if mode == "batch":
        df = build(spark, q, tables(spark, events_dir, streaming=False))
        if sink == "noop":
            df.write.format("noop").mode("overwrite").save()
        else:
            df.write.mode("overwrite").parquet(str(parts / "batch_id=0"))
        batches[0] = 1
    else:
        df = build(
            spark,
            q,
            tables(spark, events_dir, streaming=True, files_per_trigger=files_per_trigger),
        )

        def each(batch_df: Any, batch_id: int) -> None:
            batches[0] += 1
            if sink == "noop":
                batch_df.write.format("noop").mode("overwrite").save()
            else:
                batch_df.write.mode("overwrite").parquet(str(parts / f"batch_id={batch_id}"))

        query = (
            df.writeStream.outputMode(mode)
            .foreachBatch(each)
            .option("checkpointLocation", str((out / "checkpoint").resolve()))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(f"spark-sql {q} failed: {exc}")
    wall = time.perf_counter() - t0
    result: pd.DataFrame | None = None
    if sink != "noop":
        if mode == "complete":  # every batch holds the whole result: the last one is final
            last = max((int(p.name.split("=")[1]) for p in parts.glob("batch_id=*")), default=-1)
            for p in parts.glob("batch_id=*"):
                if int(p.name.split("=")[1]) != last:
                    shutil.rmtree(p)
        result = finalize(q, parts, out)
        rows_out[0] = len(result)
    return {
        "query": q,
        "engine": "spark-sql",
        "mode": "streaming " + mode if mode != "batch" else "batch",
        "batches": batches[0],
        "rows_out": rows_out[0] if result is not None else None,
        "wall_s": wall,
    }
