"""``left.join(right, on=…, within=…, how=…)`` against Spark's own streaming stream-stream
join over the same files and batches, batch for batch (rows as multisets), while shards
move between 2 and 4 tasks at every boundary and across a restart from the checkpoint.

Both sides come from one file source (a ``side`` column). Spark pushes the side filter
below ``withWatermark``, so its sides get watermarks of their own and the query's is
their minimum; streamscale's is the source's. Every batch file therefore ends with one
row of each side at the batch's latest time: both rules give the same watermark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.api import stream
from tests.runtime.spark._policies import Flip
from tests.runtime.spark.keyed.test_agg import _rows, _run

SCHEMA = "side string, k string, t timestamp, v long"
BATCHES = 5
WITHIN = ("lt", "rt", "-3 seconds", "5 seconds")


def _write(directory: Path, seed: int = 7) -> None:
    """Batch ``b``: times in [20 b, 20 b + 25) s (ms), some rows 40 s late, some null
    keys, and one row of each side at 20 b + 25 s."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    for b in range(BATCHES):
        n = 50
        ms = 20_000 * b + rng.integers(0, 25_000, n)
        late = (rng.random(n) < 0.1) & (b > 0)
        ms[late] -= 40_000
        ms = np.concatenate([np.maximum(ms, 0), [20_000 * b + 25_000] * 2])
        pdf = pd.DataFrame(
            {
                "side": [*rng.choice(["L", "R"], n), "L", "R"],
                "k": [None if v == 5 else f"k{v}" for v in rng.integers(0, 6, n + 2)],
                "t": pd.to_datetime(ms.astype("int64"), unit="ms"),
                "v": np.arange(n + 2, dtype="int64") + 1000 * b,
            }
        )
        pdf.to_parquet(directory / f"batch-{b:05d}.parquet", index=False, coerce_timestamps="us")


def _source(spark: Any, src: Path) -> Any:
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    return df.withWatermark("t", "10 seconds")


def _left(pdf: pd.DataFrame) -> pd.DataFrame:
    out = pdf[pdf["side"] == "L"]
    return out.rename(columns={"t": "lt", "v": "lv"})[["k", "lt", "lv"]]


def _right(pdf: pd.DataFrame) -> pd.DataFrame:
    out = pdf[pdf["side"] == "R"]
    return out.rename(columns={"t": "rt", "v": "rv"})[["k", "rt", "rv"]]


_left.output_schema = "k string, lt timestamp, lv long"  # type: ignore[attr-defined]
_right.output_schema = "k string, rt timestamp, rv long"  # type: ignore[attr-defined]


def _spark_join(spark: Any, src: Path, ck: Path, how: str) -> dict[int, Any]:
    from pyspark.sql import functions as F

    df = _source(spark, src)
    left = df.where("side = 'L'").select("k", F.col("t").alias("lt"), F.col("v").alias("lv"))
    right = df.where("side = 'R'").select(
        F.col("k").alias("rk"), F.col("t").alias("rt"), F.col("v").alias("rv")
    )
    cond = (
        (left.k == right.rk)
        & (right.rt >= left.lt - F.expr("INTERVAL 3 SECONDS"))
        & (right.rt <= left.lt + F.expr("INTERVAL 5 SECONDS"))
    )
    spark_how = {"left": "left_outer", "right": "right_outer", "full": "full_outer"}.get(how, how)
    joined = left.join(right, cond, spark_how)
    key = {"right": F.col("rk"), "full": F.coalesce(F.col("k"), F.col("rk"))}.get(how, F.col("k"))
    cols = ["lt", "lv"] if how == "left_semi" else ["lt", "lv", "rt", "rv"]
    out = joined.select(key.alias("k"), *cols)
    got: dict[int, Any] = {}

    def collect(batch: Any, batch_id: int) -> None:
        got[batch_id] = (batch.columns, _rows(batch.collect()))

    q = (
        out.writeStream.outputMode("append").foreachBatch(collect)
        .option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination()
    return got


def _ours(spark: Any, src: Path, how: str, got: dict[int, Any]) -> Any:
    def collect(batch: Any, batch_id: int) -> None:
        got[batch_id] = (batch.columns, _rows(batch.collect()))

    s = stream(_source(spark, src), name="joinjob")
    left, right = s.map_batches(_left, name="left"), s.map_batches(_right, name="right")
    out = left.join(right, on="k", within=WITHIN, how=how, instances=2, shards=4, name="join")
    return out.to(collect, name="collect")


def _nonempty(got: dict[int, Any]) -> dict[int, Any]:
    return {b: v for b, v in got.items() if v[1]}


def _differences(got: dict[int, Any], want: dict[int, Any]) -> dict[int, Any]:
    """Per batch where the two differ: the columns and the rows only in each (multisets)."""
    from collections import Counter

    out = {}
    for b in sorted(set(got) | set(want)):
        g, w = got.get(b, ([], [])), want.get(b, ([], []))
        if g == w:
            continue
        ours, theirs = Counter(g[1]), Counter(w[1])
        out[b] = {"columns": (g[0], w[0]), "only_ours": sorted(ours - theirs, key=repr),
                  "only_spark": sorted(theirs - ours, key=repr)}  # fmt: skip
    return out


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("how", ["inner", "left"])
def test_join_equals_spark_across_shard_moves_and_a_restart(spark, tmp_path, how) -> None:
    src = tmp_path / "in"
    _write(src)
    want = _spark_join(spark, src, tmp_path / "ck-sql", how)
    got: dict[int, Any] = {}
    job = _ours(spark, src, how, got)
    first = _run(spark, job, tmp_path / "ck", policy=Flip(job.topology(), "join", k=3), batches=3)
    rest = _run(spark, job, tmp_path / "ck", policy=Flip(job.topology(), "join", k=3))
    assert {b.tasks["join"] for b in (*first.records, *rest.records)} == {2, 4}
    assert sum(len(v[1]) for v in want.values()) > 20
    if how == "left":  # some left rows came out unmatched, after the watermark passed
        assert any(r[3] is None for v in want.values() for r in v[1])
    if len(got) < len(want):
        # The first run was stopped while Spark planned its next batch: its file source had
        # logged that batch's file but not the offsets, so after the restart Spark's next
        # batch reads two files (as a query of its own stopped there would). A join's
        # output follows the batches' watermarks, so only the batches before the restart
        # compare; the later ones hold one file more each.
        restart = min(b.batch_id for b in rest.records)
        got = {b: v for b, v in got.items() if b < restart}
        want = {b: v for b, v in want.items() if b < restart}
    assert _nonempty(got) == _nonempty(want), _differences(_nonempty(got), _nonempty(want))
    late = sum(b.extra.get("late_rows", {}).get("join", 0) for b in (*first.records, *rest.records))
    assert late > 0  # late rows were dropped, as by Spark


@pytest.mark.spark
# (the hypothesis test of tests/runtime/spark/keyed/agg/test_join.py checks all five kinds
# against a brute-force reference too)
@pytest.mark.parametrize("how", ["right", "full", "left_semi"])
def test_other_join_kinds_equal_spark(spark, tmp_path, how) -> None:
    src = tmp_path / "in"
    _write(src, seed=11)
    want = _spark_join(spark, src, tmp_path / "ck-sql", how)
    got: dict[int, Any] = {}
    _run(spark, _ours(spark, src, how, got), tmp_path / "ck")
    assert _nonempty(got) == _nonempty(want), _differences(_nonempty(got), _nonempty(want))
    assert sum(len(v[1]) for v in want.values()) > 10
    if how == "right":  # some right rows came out unmatched, after the watermark passed
        assert any(r[1] is None for v in want.values() for r in v[1])


@pytest.mark.spark
def test_what_spark_refuses_is_refused_before_the_query(spark, tmp_path) -> None:
    src = tmp_path / "in"
    _write(src)
    plain = spark.readStream.schema(SCHEMA).parquet(str(src))
    s = stream(plain, name="nowm")
    left, right = s.map_batches(_left, name="left"), s.map_batches(_right, name="right")
    with pytest.raises(StreamscaleError, match="left stream-stream join needs withWatermark"):
        left.join(right, on="k", within=WITHIN, how="left")
    w = stream(_source(spark, src), name="wm")
    wl, wr = w.map_batches(_left, name="left"), w.map_batches(_right, name="right")
    with pytest.raises(StreamscaleError, match="full stream-stream join needs"):
        wl.join(wr, on="k", how="full")
    with pytest.raises(StreamscaleError, match="two distinct streams"):
        wl.join(wl, on="k")
    with pytest.raises(StreamscaleError, match="no time column 'zz' on the right side"):
        wl.join(wr, on="k", within=("lt", "zz", 0, 5))
    with pytest.raises(StreamscaleError, match="is above upper"):
        wl.join(wr, on="k", within=("lt", "rt", 5, 0))
    with pytest.raises(StreamscaleError, match="how='cross'"):
        wl.join(wr, on="k", how="cross")


@pytest.mark.spark
def test_a_side_is_cut_from_its_lineage_only_below_a_keyed_operator(spark, tmp_path) -> None:
    # Two maps of the source join as they are; a side holding a keyed operator's output
    # is cut from its lineage (a cache miss on it would run the keyed stage again).
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    _write(src)
    w = stream(_source(spark, src), name="cut")
    wl, wr = w.map_batches(_left, name="left"), w.map_batches(_right, name="right")
    wl.join(wr, on="k", within=WITHIN, name="plain")
    top = wl.key_by("k").agg(F.max("lv").alias("lv"))
    top.join(wr, on="k", name="below_agg")
    fns = wl._b.functions
    assert not fns["plain"].cut_lineage
    assert fns["below_agg"].cut_lineage


def test_bounds_are_signed_seconds_or_interval_strings() -> None:
    from streamscale.runtime.spark.keyed.agg.join_spec import signed_interval_us

    assert signed_interval_us(-2.5, item="j") == -2_500_000
    assert signed_interval_us("-3 seconds", item="j") == -3_000_000
    assert signed_interval_us("1 minute 2 seconds", item="j") == 62_000_000
    assert signed_interval_us("0", item="j") == 0
    with pytest.raises(StreamscaleError, match="is not seconds"):
        signed_interval_us(True, item="j")
    with pytest.raises(StreamscaleError, match="interval 'soon'"):
        signed_interval_us("soon", item="j")
