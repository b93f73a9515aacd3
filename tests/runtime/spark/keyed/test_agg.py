"""``key_by(...).agg(...)`` against Spark SQL's own streaming aggregation, batch for batch.

The same Parquet files (one per batch) feed streamscale's declarative keyed operator
and Spark's ``groupBy(...).agg(...)`` streaming query; each batch's output rows must be
equal (update and complete mode), also while the plan moves shards between tasks at
every batch boundary and across a restart from the checkpoint.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.api import Stream, stream
from streamscale.runtime.spark.driver.dag import run_graph
from streamscale.runtime.spark.driver.graph import JobGraph
from tests.runtime.spark._policies import Flip

SCHEMA = "k string, k2 long, i long, x double, s string, b long, bn long"
CTL = {"interval_s": 0.0, "stabilization_s": 0.0, "scale_down_delay_s": 0.0}
BATCHES, ROWS = 4, 300


def _write(directory: Path, batches: int = BATCHES, rows: int = ROWS, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    for b in range(batches):
        k = rng.integers(0, 25, rows)
        i = rng.integers(-40, 40, rows).astype(float)
        i[rng.random(rows) < 0.1] = np.nan
        x = rng.integers(-400, 400, rows) / 4.0  # quarters: sums are exact in any order
        x[rng.random(rows) < 0.1] = np.nan
        pdf = pd.DataFrame(
            {
                "k": [None if v == 24 else f"k{v}" for v in k],
                "k2": (k % 3).astype("int64"),
                "i": pd.array(i, dtype="Int64"),
                "x": x,
                "s": [f"s{v}" for v in rng.integers(0, 50, rows)],
                "b": np.full(rows, b, dtype="int64"),
                "bn": pd.array(np.where(rng.random(rows) < 0.5, b, np.nan), dtype="Int64"),
            }
        )
        pdf.to_parquet(directory / f"batch-{b:05d}.parquet", index=False)


def _source(spark: Any, directory: Path) -> Any:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(directory))


def _aggs(*, reference: bool = False) -> list[Any]:
    """The aggregates; Spark's streaming aggregation refuses ``count(DISTINCT)``, so its
    reference counts the set instead (the same number)."""
    from pyspark.sql import functions as F

    distinct = F.size(F.collect_set("i")) if reference else F.count_distinct("i")
    # a sketch at rsd 0.01 counts below 400 distinct values exactly (DataSketches' coupon
    # mode): against the exact count; the KLL sketch keeps every value of these groups, so
    # its quantiles are exact, as Spark's own percentile_approx is at this accuracy
    approx = F.size(F.collect_set("i")) if reference else F.approx_count_distinct("i", 0.01)
    return [
        F.count("*"),
        F.count("i").alias("n_i"),
        F.sum("i"),
        F.sum("x"),
        F.min("s"),
        F.max("x"),
        F.avg("i"),
        F.mean("x").alias("mean_x"),
        F.first("b"),
        F.last("b"),
        F.first("bn", ignorenulls=True),
        F.last("bn", ignorenulls=True),
        distinct.alias("distinct_i"),
        F.collect_set("s"),
        F.collect_list("i"),
        approx.alias("approx_i"),
        F.percentile_approx("i", [0.1, 0.5, 0.9], 1000).alias("pq_i"),
        F.percentile_approx("x", 0.5, 1000).alias("median_x"),
    ]


def _norm(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(sorted(v, key=repr))  # collect_list's order within a batch is Spark's
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(_norm(v) for v in r) for r in rows), key=repr)


def _spark_sql(spark: Any, src: Path, ck: Path, keys: list[str], mode: str) -> dict[int, Any]:
    got: dict[int, Any] = {}

    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, _rows(df.collect()))

    agg = _source(spark, src).groupBy(*keys).agg(*_aggs(reference=True))
    q = (
        agg.writeStream.outputMode(mode)
        .foreachBatch(collect)
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return got


def _job(spark: Any, src: Path, keys: list[str], mode: str, got: dict[int, Any]) -> Stream:
    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, _rows(df.collect()))

    s = stream(_source(spark, src), name="aggjob")
    out = s.key_by(keys, instances=2, shards=4).agg(*_aggs(), mode=mode, max_collect=1000)
    return out.to(collect, name="collect")


def _run(spark: Any, job: Stream, ck: Path, *, policy: Any = "static", batches: int | None = None):
    graph = JobGraph.build(job.topology(), job._b.functions)
    return run_graph(
        spark, graph, duration_s=300, checkpoint=ck, source_df=job._b.source_df, policy=policy,
        params=CTL, max_batches=batches, available_now=True,
    )  # fmt: skip


@pytest.mark.spark
@pytest.mark.slow
def test_update_mode_equals_spark_sql_across_shard_moves_and_a_restart(spark, tmp_path) -> None:
    src = tmp_path / "in"
    _write(src)
    want = _spark_sql(spark, src, tmp_path / "ck-sql", ["k"], "update")
    assert sorted(want) == list(range(BATCHES))
    got: dict[int, Any] = {}
    job = _job(spark, src, ["k"], "update", got)
    flip = Flip(job.topology(), "agg", k=3)  # 2 <-> 4 tasks: shards move every batch
    first = _run(spark, job, tmp_path / "ck", policy=flip, batches=2)
    assert len(first.records) >= 2
    rest = _run(spark, job, tmp_path / "ck", policy=Flip(job.topology(), "agg", k=3))
    assert {b.tasks["agg"] for b in (*first.records, *rest.records)} == {2, 4}
    # rows per batch id (a batch Spark replays after the restart counts once)
    sizes = {x.batch_id: x.keyed_rows["agg"] for x in (*first.records, *rest.records)}
    assert sum(sizes.values()) == BATCHES * ROWS and sorted(got) == sorted(sizes)
    if set(sizes.values()) == {ROWS}:  # one file a batch, as Spark's run: equal batch by batch
        assert sorted(got) == list(range(BATCHES))
        for b in range(BATCHES):
            assert got[b] == want[b], f"batch {b}"
    else:
        # The first run was stopped while Spark planned its next batch: the file source
        # had logged that batch's file but not the offsets, so after the restart Spark's
        # next batch reads two files (its maxFilesPerTrigger counts new files only), as a
        # query of its own stopped at that moment would. The batches before the restart
        # compare; after it first()/last() within one batch of two files follow row order.
        assert sorted(sizes.values()) == [*[ROWS] * (BATCHES - 2), 2 * ROWS], sizes
        restart = min(b.batch_id for b in rest.records)
        for b in range(restart):
            assert got[b] == want[b], f"batch {b}"


@pytest.mark.spark
def test_complete_mode_with_two_keys_equals_spark_sql(spark, tmp_path) -> None:
    src = tmp_path / "in"
    _write(src, batches=3, rows=200, seed=5)
    want = _spark_sql(spark, src, tmp_path / "ck-sql", ["k", "k2"], "complete")
    got: dict[int, Any] = {}
    _run(spark, _job(spark, src, ["k", "k2"], "complete", got), tmp_path / "ck")
    assert sorted(got) == sorted(want) == [0, 1, 2]
    for b in range(3):
        assert got[b] == want[b], f"batch {b}"


@pytest.mark.spark
def test_unsupported_aggregates_are_refused_at_build_time(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    _write(src, batches=1, rows=10)
    keyed = stream(_source(spark, src)).key_by("k")
    with pytest.raises(StreamscaleError, match="aggregate 'stddev' is not supported"):
        keyed.agg(F.stddev("x"))
    with pytest.raises(StreamscaleError, match="collect_list needs a bound"):
        keyed.agg(F.collect_list("x"))
    with pytest.raises(StreamscaleError, match=r"aggregate '\+' is not supported"):
        keyed.agg(F.sum("x") + 1)
    with pytest.raises(StreamscaleError, match=r"percentages must be in \[0, 1\]"):
        keyed.agg(F.percentile_approx("x", [0.5, 1.5]))
    with pytest.raises(StreamscaleError, match=r"rsd must be in \(0, 1\)"):
        keyed.agg(F.approx_count_distinct("i", 2.0))
    with pytest.raises(StreamscaleError, match="not an aggregate function call"):
        keyed.agg(F.col("x"))
    with pytest.raises(StreamscaleError, match="cannot resolve"):
        keyed.agg(F.sum("nope"))
    with pytest.raises(StreamscaleError, match="no key column 'z'"):
        stream(_source(spark, src)).key_by(["k", "z"]).agg(F.count("*"))
    with pytest.raises(StreamscaleError, match="process\\(\\) takes one key column"):
        stream(_source(spark, src)).key_by(["k", "k2"]).process(lambda rows, state: None)
