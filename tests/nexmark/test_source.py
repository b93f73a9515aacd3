"""The ``streamscale_nexmark`` source: rows equal the generator's, pacing, limits, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streamscale.cli.app import main
from streamscale.errors import StreamscaleError
from streamscale.nexmark.generator import (
    DEFAULT_BASE_TIME_MS,
    GeneratorConfig,
    event_times_ms,
    generate,
)
from streamscale.nexmark.source import NexmarkSpec, NexmarkStreamReader
from streamscale.runtime.spark.driver.watch import offered_for
from streamscale.runtime.spark.sources.sources import check_source_options

ROOT = Path(__file__).resolve().parents[2]


def _read(reader: NexmarkStreamReader, start: dict, end: dict) -> pd.DataFrame:
    parts = reader.partitions(start, end)
    frames = [b.to_pandas() for p in parts for b in reader.read(p)]
    return pd.concat(frames, ignore_index=True)


def _union(cfg: GeneratorConfig, lo: int, hi: int) -> pd.DataFrame:
    """The ``events`` stream by hand: generate's tables tagged and put in event order."""
    ev = generate(cfg, lo, hi)
    num = np.arange(lo, hi)
    rem = num % 50
    frames = []
    for code, (name, sel) in enumerate(
        [("person", rem < 1), ("auction", (rem >= 1) & (rem < 4)), ("bid", rem >= 4)]
    ):
        df = getattr(ev, name).copy()
        df.insert(0, "event_type", code)
        df["_n"] = num[sel]
        frames.append(df)
    out = pd.concat(frames, ignore_index=True).sort_values("_n", kind="stable")
    return out.drop(columns="_n").reset_index(drop=True)


def _nulls(df: pd.DataFrame) -> pd.DataFrame:
    """Missing values as ``None`` whatever their column's dtype (Arrow and pandas differ)."""
    return df.astype(object).where(df.notna(), None)


@pytest.mark.parametrize("table", ["bid", "auction", "person"])
def test_rows_of_a_range_are_generates_whatever_the_partitions(table: str) -> None:
    opts = {"table": table, "seed": "5", "rate": "1000"}
    start, end = {"seq": 130, "t0": 0.0}, {"seq": 1730, "t0": 0.0}
    want = getattr(generate(GeneratorConfig.constant(1000, seed=5), 130, 1730), table)
    for parts in ("1", "3"):
        reader = NexmarkStreamReader(NexmarkSpec.from_options({**opts, "partitions": parts}))
        assert len(reader.partitions(start, end)) == int(parts)
        pd.testing.assert_frame_equal(_read(reader, start, end), want)


def test_events_table_is_the_tagged_union_in_event_order() -> None:
    reader = NexmarkStreamReader(NexmarkSpec.from_options({"table": "events", "seed": "2"}))
    got = _read(reader, {"seq": 40, "t0": 0.0}, {"seq": 260, "t0": 0.0})
    want = _union(GeneratorConfig.constant(10_000, seed=2), 40, 260)
    assert list(got.columns) == list(want.columns)
    assert got["event_type"].tolist() == want["event_type"].tolist()
    pd.testing.assert_frame_equal(_nulls(got), _nulls(want), check_dtype=False)


def test_micros_gives_epoch_microseconds() -> None:
    spec = NexmarkSpec.from_options({"table": "auction", "micros": "true"})
    reader = NexmarkStreamReader(spec)
    got = _read(reader, {"seq": 0, "t0": 0.0}, {"seq": 500, "t0": 0.0})
    want = generate(spec.config, 0, 500).auction
    for c in ("dateTime", "expires"):
        assert got[c].dtype == np.int64
        assert got[c].tolist() == [int(t.timestamp() * 1_000_000) for t in want[c]]


def test_pacing_follows_the_event_times_of_the_schedule() -> None:
    spec = NexmarkSpec.from_options({"schedule": "2:1000,1:10,3:500", "total": "3000"})
    ms = event_times_ms(spec.config, np.arange(5000)) - DEFAULT_BASE_TIME_MS
    for e in (-1.0, 0.0, 0.0005, 0.001, 1.0, 1.9995, 2.0, 2.05, 2.1, 3.0, 3.7, 9.0):
        brute = min(int(np.sum(ms <= e * 1000 + 1e-6)), 3000)
        assert spec.available(e) == brute, e
    now = [1000.0]
    reader = NexmarkStreamReader(spec, clock=lambda: now[0])
    start = reader.initialOffset()
    assert start == {"seq": 0, "t0": 1000.0}
    now[0] = 1001.0
    assert reader.latestOffset(start, ReadAllAvailable()) == {"seq": 1001, "t0": 1000.0}
    assert reader.latestOffset(start, ReadMaxRows(300))["seq"] == 300
    # availableNow: nothing offered after the trigger's start is read
    reader.prepareForTriggerAvailableNow()
    now[0] = 1100.0
    assert reader.latestOffset(start, ReadAllAvailable())["seq"] == 1001


def test_the_watch_offers_the_sources_events() -> None:
    offered = offered_for("streamscale_nexmark", {"rate": "200", "table": "bid"})
    assert offered is not None
    assert offered.available(105.0, {"seq": 0, "t0": 100.0}) == 1001


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("table", "bids"),
        ("rate", "0"),
        ("rate", "fast"),
        ("schedule", "5:100,x"),
        ("schedule", "0:100"),
        ("seed", "-1"),
        ("partitions", "0"),
        ("max_rows_per_batch", "0"),
        ("micros", "maybe"),
    ],
)
def test_bad_option_is_one_line_naming_it(name: str, value: str) -> None:
    with pytest.raises(StreamscaleError, match=f"option '{name}'") as err:
        check_source_options("streamscale_nexmark", {name: value}, item="operator src")
    assert "\n" not in str(err.value)


def test_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(StreamscaleError, match=r"'keys'.*known: table, seed, rate"):
        check_source_options("streamscale_nexmark", {"keys": "10"}, item="operator src")


def _batches(spark, opts: dict, ckpt: Path) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    seen: list[pd.DataFrame] = []

    def sink(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        seen.append(df.toPandas())

    q = (
        spark.readStream.format("streamscale_nexmark")
        .options(**opts)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180)
    assert q.exception() is None
    offsets = sorted((ckpt / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    ends = [json.loads(f.read_text().splitlines()[2])["seq"] for f in offsets]
    return pd.concat(seen, ignore_index=True), list(zip([0, *ends[:-1]], ends, strict=True))


@pytest.mark.spark
def test_spark_reads_every_bid_once_in_bounded_batches(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources.sources import register_sources

    register_sources(spark)
    opts = {"table": "bid", "seed": "4", "rate": "500", "start_time": "0", "total": "1800",
            "partitions": "3", "max_rows_per_batch": "1000"}  # fmt: skip
    got, ranges = _batches(spark, opts, tmp_path / "ckpt")
    # availableNow from a start long past: every event, in batches of at most 1000 events
    assert ranges == [(0, 1000), (1000, 1800)]
    want = generate(GeneratorConfig.constant(500, seed=4), 0, 1800).bid
    tz = spark.conf.get("spark.sql.session.timeZone")
    got["dateTime"] = pd.to_datetime(got["dateTime"]).dt.tz_localize(tz).dt.tz_convert("UTC")
    got = got.sort_values(["dateTime", "auction", "bidder", "price"], ignore_index=True)
    want = want.sort_values(["dateTime", "auction", "bidder", "price"], ignore_index=True)
    assert len(got) == len(want) == 1656
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


@pytest.mark.spark
def test_spark_events_union_equals_generates_tables(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources.sources import register_sources

    register_sources(spark)
    opts = {"table": "events", "seed": "9", "start_time": "0", "total": "400", "micros": "true"}
    got, ranges = _batches(spark, opts, tmp_path / "ckpt")
    assert ranges == [(0, 400)]
    want = _union(GeneratorConfig.constant(10_000, seed=9), 0, 400)
    for c in ("dateTime", "expires"):
        want[c] = [None if pd.isna(t) else int(t.timestamp() * 1_000_000) for t in want[c]]
    got = got.sort_values(["dateTime", "event_type", "id", "auction", "bidder", "price"])
    want = want.sort_values(["dateTime", "event_type", "id", "auction", "bidder", "price"])
    pd.testing.assert_frame_equal(
        _nulls(got.reset_index(drop=True)), _nulls(want.reset_index(drop=True)), check_dtype=False
    )


def _hot_items(bids: pd.DataFrame) -> pd.DataFrame:
    """Q5 by hand: per 10 s window (every 2 s), the auctions with the most bids."""
    t = bids["dateTime"].to_numpy(dtype="datetime64[ms]").astype(np.int64)
    rows = [(w, a) for ti, a in zip(t, bids["auction"], strict=True)
            for w in range(ti // 2000 * 2000 - 8000, ti + 1, 2000)]  # fmt: skip
    counts = pd.DataFrame(rows, columns=["wstart", "auction"]).value_counts().rename("num")
    counts = counts.reset_index()
    top = counts.groupby("wstart")["num"].transform("max")
    return counts[counts["num"] == top].sort_values(["wstart", "auction"], ignore_index=True)


@pytest.mark.spark
def test_streamscale_run_of_the_q5_example(spark, tmp_path: Path, capsys) -> None:
    text = (ROOT / "examples" / "nexmark-q5.yaml").read_text()
    job = tmp_path / "q5.yaml"
    job.write_text(text.replace("rate: 10000,", "rate: 2000, max_rows_per_batch: 3000,"))
    out = tmp_path / "out"
    args = ["--json", "run", str(job), "--policy", "static", "--master", "local[2]"]
    assert main([*args, "--duration", "150", "--max-batches", "3", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["batches"] >= 3 and summary["rows"] > 0
    # the last emission of each window equals Q5 over every bid the batches read
    ckpt = out / "checkpoint" / "spark"
    # the newest batch run (its commit may be unwritten when the run stops right after it)
    metrics = (out / "metrics.jsonl").read_text().splitlines()
    last = max(json.loads(line)["batch_id"] for line in metrics)
    end = json.loads((ckpt / "offsets" / str(last)).read_text().splitlines()[2])["seq"]
    assert 0 < end <= 3 * 3000
    emitted = []
    for f in (out / "q5").glob("batch_id=*/part-*.parquet"):  # every job's sink layout
        batch = int(f.parent.name.split("=")[1])
        emitted.append(pq.read_table(f).to_pandas().assign(batch=batch))
    got = pd.concat(emitted, ignore_index=True)
    got = got[got["batch"] == got.groupby("wstart")["batch"].transform("max")]
    got = got.drop(columns="batch").sort_values(["wstart", "auction"], ignore_index=True)
    want = _hot_items(generate(GeneratorConfig.constant(2000, seed=0), 0, end).bid)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
