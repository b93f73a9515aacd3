"""Run one stateful function under Spark's own operator and under streamscale, batch for batch.

Both read the same files (one per batch, ``maxFilesPerTrigger=1``, distinct
modification times so both see them in the same order) with the same
``withWatermark`` and ``trigger(availableNow=True)``; every output row is kept
with the batch that produced it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SCHEMA = "k string, ts long, v long"

Rows = dict[int, list[tuple[Any, ...]]]


def write_batches(root: Path, batches: Sequence[Sequence[tuple[str, int, int]]]) -> Path:
    """One JSON file per batch of ``(key, event second, value)`` rows."""
    src = root / "in"
    src.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        p = src / f"{i:04d}.json"
        p.write_text("".join(json.dumps({"k": k, "ts": t, "v": v}) + "\n" for k, t, v in rows))
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    return src


def source(spark: Any, src: Path, delay: str | None = "5 seconds") -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .withColumn("et", F.timestamp_seconds("ts"))
    )
    return df if delay is None else df.withWatermark("et", delay)


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _collect(got: Rows, cols: Sequence[str], upto: int | None = None) -> Callable[[Any, int], None]:
    def sink(df: Any, batch_id: int) -> None:
        if upto is not None and batch_id >= upto:
            return
        rows = [tuple(_plain(r[c]) for c in cols) for r in df.collect()]
        if rows:
            got.setdefault(batch_id, []).extend(rows)

    return sink


def run_spark(
    spark: Any, df: Any, grouped: Callable[[Any], Any], cols: Sequence[str], ck: Path
) -> Rows:
    """``grouped(df)`` (a Spark stateful query) on RocksDB, availableNow; rows per batch."""
    return run_spark_many(spark, [(df, grouped, cols, ck, None)])[0]


def run_spark_many(
    spark: Any,
    queries: Sequence[tuple[Any, Callable[[Any], Any], Sequence[str], Path, int | None]],
    timeout_s: float = 300.0,
) -> list[Rows]:
    """Spark stateful queries on RocksDB, one after the other; rows per batch of each.

    Each is ``(df, grouped, cols, checkpoint, batches)``: ``batches`` ``None`` runs
    ``availableNow`` to its end; a number runs back-to-back batches (processing time:
    Spark runs a batch at every trigger) and keeps batches ``0 .. batches - 1``. (Two
    ``transformWithState`` queries starting together fail: the second one's set-up
    worker does not connect back to the driver in time.)
    """
    import time

    outs: list[Rows] = []
    old = spark.conf.get(PROVIDER)
    spark.conf.set(PROVIDER, ROCKSDB)
    try:
        for df, grouped, cols, ck, batches in queries:
            got: Rows = {}
            w = grouped(df).writeStream.foreachBatch(_collect(got, cols, batches))
            w = w.option("checkpointLocation", str(ck))
            if batches is None:
                q = w.trigger(availableNow=True).start()
                q.awaitTermination(timeout_s)
            else:
                q = w.trigger(processingTime="0 seconds").start()
                deadline = time.monotonic() + timeout_s
                while _committed(ck) < batches - 1 and q.isActive:
                    assert time.monotonic() < deadline, "Spark made no progress"
                    time.sleep(0.05)
                alive = q.isActive
                q.stop()
                if alive and _committed(ck) >= batches - 1:
                    # The stop can interrupt the batch after the kept ones, which Spark
                    # then reports as the query's exception ("Exception thrown in
                    # awaitResult"); every kept batch committed before it.
                    outs.append({b: sorted(r) for b, r in got.items()})
                    continue
            assert q.exception() is None, q.exception()
            outs.append({b: sorted(r) for b, r in got.items()})
    finally:
        spark.conf.set(PROVIDER, old)
    return outs


def _committed(ck: Path) -> int:
    done = (
        [int(p.name) for p in (ck / "commits").glob("[0-9]*")] if (ck / "commits").exists() else []
    )
    return max(done, default=-1)


def run_streamscale(
    df: Any,
    query: Callable[[Any], Any],
    cols: Sequence[str],
    ck: Path,
    *,
    instances: int = 2,
    shards: int = 4,
) -> tuple[Rows, Any]:
    """``query(stream(df).key_by("k"))`` in streamscale, available_now; rows per batch."""
    got, res = run_streamscale_many(df, [(query, cols)], ck, instances=instances, shards=shards)
    return got[0], res


def run_streamscale_many(
    df: Any,
    queries: Sequence[tuple[Callable[[Any], Any], Sequence[str]]],
    ck: Path,
    *,
    instances: int = 2,
    shards: int = 4,
    batches: int | None = None,
    steps: Sequence[int] = (),
) -> tuple[list[Rows], Any]:
    """Several keyed operators on ``df`` in one streamscale run; rows per batch of each.

    Each query is the expression Spark's side applies to ``df.groupBy("k")``, applied
    here to ``streamscale.stream(df).key_by("k")``. ``batches`` ``None``:
    ``available_now``; else that many batches back to back. ``steps``: the units of each
    operator's instance 0 from batch 1 on, one entry a batch (shards move between tasks
    at every boundary), from a scripted policy.
    """
    import streamscale
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.driver.graph import JobGraph

    outs: list[Rows] = []
    s = streamscale.stream(df, available_now=batches is None)
    names = []
    for i, (query, cols) in enumerate(queries):
        got: Rows = {}
        out = query(s.key_by("k", instances=instances, shards=shards))
        out.to(_collect(got, cols, batches), name=f"sink{i}")
        names.append(out._from[0])
        outs.append(got)
    topo = s.topology()
    policy: Any = "static"
    if steps:
        policy = Steps(topo, names, list(steps))
    res = run_graph(
        df.sparkSession,
        JobGraph.build(topo, s._b.functions),
        duration_s=300,
        checkpoint=ck,
        max_batches=batches,
        source_df=df,
        policy=policy,
        params={"interval_s": 0, "stabilization_s": 0, "scale_down_delay_s": 0},
        available_now=batches is None,
    )
    return [{b: sorted(r) for b, r in got.items()} for got in outs], res


class Steps:
    """A scripted policy: every keyed operator's instance 0 gets ``units[i]`` units at
    decision ``i`` (the last one kept)."""

    name = "steps"

    def __init__(self, topology: Any, operators: Sequence[str], units: list[int]) -> None:
        from streamscale.model import Allocation, Placement, Plan, Routing
        from tests.runtime.spark._policies import split_plan

        self.plans = []
        for k in units:
            cores: dict[str, int] = {}
            nodes: dict[str, str] = {}
            tables: dict[str, tuple[str, ...]] = {}
            for op in operators:
                p = split_plan(topology, op, k)
                cores.update(p.allocation.cores)
                nodes.update(p.placement.nodes)
                tables.update(p.routing.tables)
            self.plans.append(Plan(Allocation(cores), Placement(nodes), Routing(tables)))
        self.i = 0

    def decide(self, snapshot: Any, current: Any, now: float) -> Any:
        from streamscale.control.controller import Decision

        plan = self.plans[min(self.i, len(self.plans) - 1)]
        self.i += 1
        return Decision(plan, "step", {}, "none")

    def shard_bytes(self, instance: str, shard: int) -> int:
        return 0
