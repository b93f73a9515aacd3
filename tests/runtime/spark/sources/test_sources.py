"""The workload generator: determinism, restartability, skew, shuffles, pacing, Spark read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.sources import (
    BLOCK,
    GeneratorSpec,
    GeneratorStreamReader,
    expected_cost_ms,
    generate,
)

OPTS = {"keys": "1000", "alpha": "0.5", "omega": "0", "rate": "1000", "seed": "3"}


def test_same_seed_same_rows_other_seed_other_rows() -> None:
    a = generate(OPTS, 0, 5000)
    b = generate(dict(OPTS), 0, 5000)
    pd.testing.assert_frame_equal(a, b)
    c = generate({**OPTS, "seed": "4"}, 0, 5000)
    assert (a["key"] != c["key"]).mean() > 0.9


def test_any_offset_range_equals_the_slice_of_the_whole() -> None:
    whole = generate(OPTS, 0, 3 * BLOCK + 17)
    # Ranges straddling block boundaries, as a restarted query or a partition would read them.
    for lo, hi in [
        (0, 1),
        (BLOCK - 5, BLOCK + 5),
        (100, 2 * BLOCK + 3),
        (3 * BLOCK, 3 * BLOCK + 17),
    ]:
        part = generate(OPTS, lo, hi)
        pd.testing.assert_frame_equal(part, whole.iloc[lo:hi].reset_index(drop=True))
    assert list(whole["seq"]) == list(range(3 * BLOCK + 17))
    assert len(generate(OPTS, 50, 50)) == 0


def test_schema_and_column_contents() -> None:
    df = generate({**OPTS, "payload_bytes": "64", "cost_ms": "2.0"}, 0, 20000)
    assert list(df.columns) == ["key", "value", "cost_ms", "payload", "event_time", "seq"]
    assert df["payload"].str.len().eq(64).all()
    assert df["key"].astype(int).between(0, 999).all()
    assert (df["cost_ms"] >= 0).all()
    # N(μ, 0.5μ) truncated at 0: mean ≈ 1.0043 μ, std ≈ 0.5 μ.
    assert df["cost_ms"].mean() == pytest.approx(expected_cost_ms(2.0), rel=0.02)
    assert df["cost_ms"].std() == pytest.approx(1.0, rel=0.05)
    assert ((df["value"] >= 0) & (df["value"] < 1)).all()


def test_zipf_skew_is_visible() -> None:
    n = 100_000
    flat = generate({**OPTS, "alpha": "0"}, 0, n)["key"].value_counts()
    skew = generate({**OPTS, "alpha": "1.0"}, 0, n)["key"].value_counts()
    # α = 1 over 1000 keys: the top key has 1/H_1000 ≈ 13 % of all tuples.
    h = (1.0 / np.arange(1, 1001)).sum()
    assert skew.iloc[0] / n == pytest.approx(1 / h, rel=0.05)
    assert skew.iloc[1] / n == pytest.approx(1 / (2 * h), rel=0.08)
    assert flat.iloc[0] / n < 0.003


def test_omega_permutes_key_frequencies_per_minute_of_event_time() -> None:
    # 1000 tuples/s, ω = 2: a new permutation every 30 s = every 30 000 tuples.
    opts = {**OPTS, "alpha": "1.0", "omega": "2"}
    df = generate(opts, 0, 90_000)
    epochs = [df.iloc[i * 30_000 : (i + 1) * 30_000]["key"] for i in range(3)]
    tops = [e.value_counts().index[:5].tolist() for e in epochs]
    assert tops[0] != tops[1] != tops[2]
    # Within an epoch the frequency profile is still Zipf: only the keys change.
    top_shares = [e.value_counts().iloc[0] / len(e) for e in epochs]
    assert max(top_shares) - min(top_shares) < 0.02
    still = generate({**opts, "omega": "0"}, 0, 90_000)
    halves = [still.iloc[:45_000]["key"], still.iloc[45_000:]["key"]]
    assert halves[0].value_counts().index[0] == halves[1].value_counts().index[0]


def test_schedule_changes_rate_and_event_times() -> None:
    spec = GeneratorSpec.from_options({"rate": "100", "schedule": "10:0,20:500"})
    assert spec.available(5) == 500
    assert spec.available(15) == 1000  # paused between 10 s and 20 s
    assert spec.available(22) == 2000
    t = spec.emit_times(np.array([0, 999, 1000, 1999]))
    assert t == pytest.approx([0.01, 10.0, 20.002, 22.0])
    df = generate({"rate": "100", "schedule": "10:0,20:500", "start_time": "1000"}, 990, 1010)
    gaps = df["event_time"].diff().dt.total_seconds().dropna()
    assert gaps.max() == pytest.approx(10.002)


def test_total_caps_the_stream() -> None:
    spec = GeneratorSpec.from_options({"rate": "1000", "total": "1500"})
    assert spec.available(1.0) == 1000
    assert spec.available(100.0) == 1500


def test_reader_paces_by_the_clock_and_honours_limits() -> None:
    now = [5000.0]
    reader = GeneratorStreamReader(GeneratorSpec.from_options(OPTS), clock=lambda: now[0])
    start = reader.initialOffset()
    assert start == {"seq": 0, "t0": 5000.0}
    now[0] = 5002.5
    assert reader.latestOffset(start, ReadAllAvailable()) == {"seq": 2500, "t0": 5000.0}
    assert reader.latestOffset(start, ReadMaxRows(300))["seq"] == 300
    assert reader.latestOffset({"seq": 2400, "t0": 5000.0}, ReadMinRows(500))["seq"] == 2400
    parts = reader.partitions(start, {"seq": 2500, "t0": 5000.0})
    assert [(p.start, p.end) for p in parts] == [(0, 1250), (1250, 2500)]
    got = pd.concat(
        [pa_batch.to_pandas() for p in parts for pa_batch in reader.read(p)], ignore_index=True
    )
    want = generate(OPTS, start, {"seq": 2500, "t0": 5000.0})
    pd.testing.assert_frame_equal(got.drop(columns="event_time"), want.drop(columns="event_time"))
    assert (got["event_time"] == want["event_time"]).all()
    assert want["event_time"].iloc[-1] == pd.Timestamp(5002.5, unit="s", tz="UTC")
    # availableNow: nothing emitted after the trigger's start is read.
    reader.prepareForTriggerAvailableNow()
    now[0] = 5010.0
    assert reader.latestOffset(start, ReadAllAvailable())["seq"] == 2500


@pytest.mark.parametrize(
    ("name", "value"), [("alpha", "-1"), ("keys", "0"), ("rate", "x"), ("schedule", "5")]
)
def test_bad_options_name_the_option(name: str, value: str) -> None:
    with pytest.raises(StreamscaleError, match=name):
        GeneratorSpec.from_options({name: value})


def test_options_round_trip() -> None:
    spec = GeneratorSpec.from_options({**OPTS, "schedule": "5:10,1:20", "total": "9"})
    assert GeneratorSpec.from_options(spec.to_options()) == spec


@pytest.mark.spark
def test_spark_reads_exactly_the_generated_tuples(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources.sources import register_sources

    register_sources(spark)
    opts = {**OPTS, "start_time": "0", "total": "3000", "partitions": "3"}
    seen: list[pd.DataFrame] = []

    def sink(batch_df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        seen.append(batch_df.toPandas())

    q = (
        spark.readStream.format("streamscale_generator")
        .options(**opts, max_rows_per_batch="1000")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    got = pd.concat(seen, ignore_index=True).sort_values("seq", ignore_index=True)
    assert len(seen) == 3
    want = generate(opts, 0, 3000)
    pd.testing.assert_frame_equal(
        got.drop(columns="event_time"), want.drop(columns="event_time"), check_dtype=False
    )
