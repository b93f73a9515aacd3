"""The calculator under Spark's transformWithStateInPandas: same outputs as streamscale's
keyed operator and as pandas, and exact state across a restart-based rescale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.scenarios.harness import file_stream, write_batch, write_batches
from streamscale.scenarios.restart import rescale
from streamscale.scenarios.spark_log import ProgressLog
from streamscale.scenarios.tws import ROCKSDB_CONF, calculator_query

OPTS = {"keys": "40", "alpha": "1.0", "cost_ms": "0", "seed": "3"}


def reference(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Running count and sum per key in arrival order: one row per input row (pandas)."""
    df = pd.concat(frames, ignore_index=True).sort_values("seq", kind="stable")
    g = df.groupby("key", sort=False)
    return pd.DataFrame({"key": df["key"], "count": g.cumcount() + 1, "sum": g["value"].cumsum()})


def _rows(df: pd.DataFrame) -> list[tuple[str, int, float]]:
    return sorted(
        (str(k), int(c), round(float(s), 9))
        for k, c, s in zip(df["key"], df["count"], df["sum"], strict=True)
    )


@pytest.fixture()
def rocksdb(spark: Any) -> Any:
    before = {k: spark.conf.get(k, None) for k in ROCKSDB_CONF}
    for k, v in ROCKSDB_CONF.items():
        spark.conf.set(k, v)
    yield spark
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def _run_tws(spark: Any, src: Path, ck: Path, partitions: int, got: list[pd.DataFrame]) -> Any:
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    q = (
        calculator_query(file_stream(spark, src))
        .writeStream.outputMode("update")
        .foreachBatch(lambda df, b: got.append(df.toPandas()))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    return q


@pytest.mark.spark
def test_tws_calculator_equals_streamscale_and_pandas(rocksdb: Any, tmp_path: Path) -> None:
    from streamscale.runtime.spark.api import stream

    spark = rocksdb
    frames = write_batches(tmp_path / "in", OPTS, 300, 3)
    tws: list[pd.DataFrame] = []
    _run_tws(spark, tmp_path / "in", tmp_path / "ck-tws", 2, tws)
    elastic: list[pd.DataFrame] = []
    calc = (
        stream(file_stream(spark, tmp_path / "in"))
        .key_by("key", instances=2, shards=4)
        .process(calculator, name="calc")
    )
    calc.to(lambda df, b: elastic.append(df.toPandas()), name="collect")
    calc.run(checkpoint=tmp_path / "ck-el", max_batches=3, duration_s=300)
    want = _rows(reference(frames))
    assert len(want) == 900
    assert _rows(pd.concat(tws, ignore_index=True)) == want
    assert _rows(pd.concat(elastic, ignore_index=True)) == want


@pytest.mark.spark
def test_restart_rescale_keeps_the_state_exact(rocksdb: Any, tmp_path: Path) -> None:
    spark = rocksdb
    src, ck = tmp_path / "in", tmp_path / "ck"
    frames = write_batches(src, OPTS, 250, 2)
    got: list[pd.DataFrame] = []
    log = ProgressLog().attach(spark)
    try:
        q = _run_tws(spark, src, ck, 2, got)
        # two more batches arrive; the query is rescaled 2 -> 4 partitions before them
        more = write_batches(tmp_path / "more", OPTS, 250, 4)[2:]
        for b, f in enumerate(more, start=2):
            write_batch(f, src / f"batch-{b:05d}.parquet")

        def start(n: int) -> Any:
            return _run_tws(spark, src, ck, n, got)

        rec = rescale(q, start, 2, 4, 2, None, spark, str(ck))
        rec["query"].awaitTermination(300)
        events = log.settle()
    finally:
        log.detach()
    assert rec["applied"] == 4 and "refused" not in rec
    out = pd.concat(got, ignore_index=True)
    assert _rows(out) == _rows(reference(frames + more))  # every row's running figures
    last = out.sort_values("count").groupby("key").tail(1).set_index("key")
    total = pd.concat(frames + more).groupby("key")["value"].agg(["count", "sum"])
    assert (last["count"].sort_index() == total["count"].sort_index()).all()
    # the batches after the rescale ran on 4 state partitions
    runs = sorted({e.run_id for e in events}, key=lambda r: min(
        e.start_s for e in events if e.run_id == r))  # fmt: skip
    assert len(runs) == 2
