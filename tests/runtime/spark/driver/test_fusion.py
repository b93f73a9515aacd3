"""A chain of declarative aggregations on one key runs in its first operator's stage:
fused, its output equals the unfused run's, pandas' and Spark SQL's, batch for batch,
with fewer Spark jobs; what cannot fuse runs operator by operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.runtime.spark.api import Stream, stream
from streamscale.runtime.spark.driver.dag import run_graph
from streamscale.runtime.spark.driver.fusion import fused_chains
from streamscale.runtime.spark.driver.graph import JobGraph

pytestmark = pytest.mark.spark

SCHEMA = "key string, x double, i long, s string"
BATCHES = 3


def _write(directory: Path) -> list[pd.DataFrame]:
    rng = np.random.default_rng(5)
    directory.mkdir(parents=True)
    frames = []
    for b in range(BATCHES):
        n = 60
        x = rng.integers(-40, 40, n) / 4.0  # quarters: sums exact in any order
        x[rng.random(n) < 0.15] = np.nan
        i = pd.array(rng.integers(0, 9, n), dtype="Int64")
        i[rng.random(n) < 0.2] = pd.NA
        pdf = pd.DataFrame({"key": [f"k{v}" for v in rng.integers(0, 12 + 3 * b, n)], "x": x,
                            "i": i, "s": [f"s{v}" for v in rng.integers(0, 30, n)]})  # fmt: skip
        pdf.to_parquet(directory / f"batch-{b:05d}.parquet", index=False)
        frames.append(pdf)
    return frames


def _chain(F: Any) -> list[list[Any]]:
    """Three aggregations: what each operator computes over the previous one's output."""
    return [
        [F.count("*").alias("n"), F.sum("x").alias("sx"), F.max("x").alias("mx"),
         F.avg("i").alias("ai"), F.min("s").alias("ms")],
        [F.sum("n").alias("n"), F.max("sx").alias("sx"), F.min("mx").alias("mx"),
         F.avg("ai").alias("ai"), F.count("ms").alias("cm")],
        [F.sum("n").alias("n"), F.max("sx").alias("sx"), F.sum("cm").alias("cm"),
         F.max("ai").alias("ai"), F.count("*").alias("rows")],
    ]  # fmt: skip


def _job(spark: Any, src: Path, got: list[pd.DataFrame], length: int = 3) -> Stream:
    from pyspark.sql import functions as F

    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    s: Any = stream(df, name="chain", available_now=True)
    for n, aggs in enumerate(_chain(F)[:length], start=1):
        s = s.key_by("key", instances=2, shards=4).agg(*aggs, name=f"op{n}")

    def sink(out: Any, batch_id: int) -> None:
        got.append(out.toPandas().assign(batch=batch_id))

    # a none sink beside it counts the rows from the last operator's tasks (no Spark job)
    return s.to(sink, name="out").to("none", name="count")


def _run(spark: Any, job: Stream, ck: Path, *, fuse: bool) -> Any:
    graph = JobGraph.build(job.topology(), job._b.functions)
    return run_graph(spark, graph, duration_s=600, checkpoint=ck, source_df=job._b.source_df,
                     policy="static", available_now=True, fuse=fuse)  # fmt: skip


def _pandas_update(rows: pd.DataFrame, specs: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """An update-mode aggregation by ``key`` over ``rows`` (with ``batch``): per batch, the
    groups of its keys over every row so far."""
    out = []
    for b in sorted(rows["batch"].unique()):
        seen = rows[rows["batch"] <= b]
        keys = rows.loc[rows["batch"] == b, "key"].unique()
        hist = seen[seen["key"].isin(keys)]
        agg = {}
        for name, (fn, col) in specs.items():
            g = hist.groupby("key")[col if col != "*" else "key"]
            if fn == "sum":
                agg[name] = g.sum(min_count=1)
            elif fn == "size":
                agg[name] = g.size()
            else:
                agg[name] = getattr(g, fn)()
        out.append(pd.DataFrame(agg).reset_index().assign(batch=b))
    return pd.concat(out, ignore_index=True)


def _pandas_chain(frames: list[pd.DataFrame]) -> pd.DataFrame:
    rows = pd.concat([f.assign(batch=b) for b, f in enumerate(frames)], ignore_index=True)
    rows["i"] = rows["i"].astype("float64")
    one = _pandas_update(rows, {"n": ("size", "*"), "sx": ("sum", "x"), "mx": ("max", "x"),
                                "ai": ("mean", "i"), "ms": ("min", "s")})  # fmt: skip
    two = _pandas_update(one, {"n": ("sum", "n"), "sx": ("max", "sx"), "mx": ("min", "mx"),
                               "ai": ("mean", "ai"), "cm": ("count", "ms")})  # fmt: skip
    return _pandas_update(two, {"n": ("sum", "n"), "sx": ("max", "sx"), "cm": ("sum", "cm"),
                                "ai": ("max", "ai"), "rows": ("size", "*")})  # fmt: skip


def _spark_chain(spark: Any, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The same chain in Spark SQL batch queries: each operator's output at batch ``b`` is
    its aggregates over every input row up to ``b`` of the keys ``b`` holds."""
    from pyspark.sql import functions as F

    rows = pd.concat([f.assign(batch=b) for b, f in enumerate(frames)], ignore_index=True)
    df = spark.createDataFrame(rows, f"{SCHEMA}, batch long")
    for aggs in _chain(F):
        keys = df.select("batch", "key").distinct().alias("b")
        hist = keys.join(df.alias("r"), (F.col("r.key") == F.col("b.key"))
                         & (F.col("r.batch") <= F.col("b.batch")))  # fmt: skip
        df = hist.groupBy(F.col("b.batch").alias("batch"), F.col("b.key").alias("key")).agg(*aggs)
    return df.toPandas()


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["batch", "key", "n", "sx", "cm", "ai", "rows"]
    out = df[cols].sort_values(["batch", "key"]).reset_index(drop=True)
    return out.astype({"batch": "int64", "n": "int64", "cm": "int64", "rows": "int64"})


def _jobs(spark: Any) -> int:
    """Spark jobs the application submitted so far (its scheduler's next job id)."""
    got = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()
    return int(got if isinstance(got, int) else got.get())


def test_a_fused_chain_equals_pandas_spark_and_the_unfused_run(spark: Any, tmp_path: Path) -> None:
    frames = _write(tmp_path / "in")
    got: dict[bool, pd.DataFrame] = {}
    jobs: dict[bool, int] = {}
    counts: dict[bool, int] = {}
    for fuse in (True, False):
        seen: list[pd.DataFrame] = []
        job = _job(spark, tmp_path / "in", seen)
        before = _jobs(spark)
        res = _run(spark, job, tmp_path / f"ck-{fuse}", fuse=fuse)
        jobs[fuse] = _jobs(spark) - before
        assert res.batches == BATCHES
        counts[fuse] = res.sink_rows["count"]
        got[fuse] = _tidy(pd.concat(seen, ignore_index=True))
        last = res.records[-1]
        assert set(last.keyed_rows) == {"op1", "op2", "op3"}  # every operator observed
        assert all(last.tasks[op] >= 1 for op in ("op1", "op2", "op3"))
    pd.testing.assert_frame_equal(got[True], got[False])
    assert jobs[True] < jobs[False]  # fewer Spark jobs, by Spark's own status tracker
    want = _tidy(_pandas_chain(frames))
    pd.testing.assert_frame_equal(got[True], want, check_dtype=False)
    assert counts == {True: len(want), False: len(want)}
    pd.testing.assert_frame_equal(got[True], _tidy(_spark_chain(spark, frames)), check_dtype=False)


def test_what_does_not_fuse(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(tmp_path))

    def leader(**kw: Any) -> Any:
        return stream(df).key_by("key", **kw).agg(F.count("*").alias("n"), name="one")

    def chains(s: Any, **kw: Any) -> dict[str, tuple[str, ...]]:
        s = s.to("none", name="out")
        return fused_chains(JobGraph.build(s.topology(), s._b.functions), **kw)

    same = leader().key_by("key").agg(F.sum("n").alias("n"), name="same")
    assert chains(same) == {"one": ("same",)}
    same = leader().key_by("key").agg(F.sum("n").alias("n"), name="same")
    assert chains(same, enabled=False) == {}
    other = leader().key_by("n").agg(F.count("*").alias("c"), name="other")
    assert chains(other) == {}  # another key: a shuffle between them
    tapped = leader()
    tapped.to("none", name="tap")  # the leader's output goes elsewhere too
    assert chains(tapped.key_by("key").agg(F.sum("n").alias("n"), name="b")) == {}
    wide = leader().key_by("key", shards=8).agg(F.sum("n").alias("n"), name="b")
    assert chains(wide) == {}  # other shards: another state layout
    windowed = leader().key_by("key").window("t", "10 seconds")
    assert chains(windowed.agg(F.sum("n").alias("n"), name="b")) == {}  # a window


def test_a_follower_whose_aggregate_is_an_expression_runs_on_its_own(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    frames = _write(tmp_path / "in")
    seen: list[pd.DataFrame] = []
    df = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
    )
    s = stream(df, available_now=True).key_by("key").agg(F.count("*").alias("n"), name="one")
    s = s.key_by("key").agg(F.sum(F.col("n") * 2).alias("n2"), name="two")
    job = s.to(lambda out, b: seen.append(out.toPandas().assign(batch=b)), name="out")
    res = _run(spark, job, tmp_path / "ck", fuse=True)
    assert res.batches == BATCHES
    rows = pd.concat([f.assign(batch=b) for b, f in enumerate(frames)], ignore_index=True)
    one = _pandas_update(rows, {"n": ("size", "*")})
    want = _pandas_update(one.assign(n=one["n"] * 2), {"n2": ("sum", "n")})
    got = pd.concat(seen, ignore_index=True).sort_values(["batch", "key"]).reset_index(drop=True)
    want = want.sort_values(["batch", "key"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[["batch", "key", "n2"]], want[["batch", "key", "n2"]],
                                  check_dtype=False)  # fmt: skip


def _query_batches(spark_dir: Path) -> dict[str, int]:
    """The query's batch each input file went into: the file source's log gives a file's
    log offset, the query's offsets log each batch's end offset. (A log offset is not a
    batch: a driver killed after the source logged its next file and before the query
    logged the batch's offsets restarts with that file and the next in one batch.)"""
    import json

    ends: dict[int, int] = {}
    for f in (spark_dir / "offsets").iterdir():
        if f.name.isdigit():  # not checksums, temporary files
            ends[int(f.name)] = json.loads(f.read_text().splitlines()[-1])["logOffset"]
    out: dict[str, int] = {}
    for f in (spark_dir / "sources" / "0").iterdir():
        if not f.name.isdigit():
            continue
        for line in f.read_text().splitlines()[1:]:
            offset = int(json.loads(line)["batchId"])
            out[Path(json.loads(line)["path"]).name] = min(
                b for b, end in ends.items() if end >= offset
            )
    return out


def test_a_fused_chain_killed_mid_run_resumes_with_exact_state(tmp_path: Path) -> None:
    """SIGKILL the driver after two committed batches; the rerun on its checkpoint ends
    with every key's last output equal to pandas' chain over all the input (a batch's
    state applied twice, or lost, would show in the counts)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    driver = Path(__file__).parents[1] / "_fused_driver.py"
    rng = np.random.default_rng(9)
    src = tmp_path / "in"
    src.mkdir()
    frames = []
    for b in range(8):
        pdf = pd.DataFrame({"key": [f"k{v}" for v in rng.integers(0, 15, 40)],
                            "x": rng.integers(-40, 40, 40) / 4.0})  # fmt: skip
        pdf.to_parquet(src / f"batch-{b:05d}.parquet", index=False)
        frames.append(pdf)
    ckpt, out = tmp_path / "ck", tmp_path / "out"
    args = [sys.executable, str(driver), str(src), str(ckpt), str(out)]
    proc = subprocess.Popen(args, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    metrics = out / "metrics.jsonl"
    try:
        deadline = time.monotonic() + 900  # a loaded host starts Spark slowly
        while not metrics.exists() or len(metrics.read_text().splitlines()) < 2:
            assert proc.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "driver made no progress"
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before it was killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    killed_after = [json.loads(x)["batch_id"] for x in metrics.read_text().splitlines()]
    assert len(killed_after) < 8
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    parts = sorted((out / "parts").glob("batch_id=*"), key=lambda p: int(p.name.split("=")[1]))
    emitted = pd.concat([pd.read_parquet(p).assign(batch=int(p.name.split("=")[1]))
                         for p in parts], ignore_index=True)  # fmt: skip
    last = emitted.sort_values("batch").groupby("key").last()
    batch_of = _query_batches(ckpt / "spark")
    rows = pd.concat([f.assign(batch=batch_of[f"batch-{b:05d}.parquet"])
                      for b, f in enumerate(frames)], ignore_index=True)  # fmt: skip
    a = _pandas_update(rows, {"n": ("size", "*"), "sx": ("sum", "x")})
    b = _pandas_update(a, {"n": ("sum", "n"), "sx": ("max", "sx")})
    c = _pandas_update(b, {"n": ("sum", "n"), "sx": ("min", "sx")})
    want = c.sort_values("batch").groupby("key").last()
    assert last.index.tolist() == want.index.tolist()
    assert last["n"].tolist() == want["n"].tolist()
    assert np.allclose(last["sx"].to_numpy(float), want["sx"].to_numpy(float))
    # and every batch's output, the replayed batch's too, row for row
    both = emitted.merge(c, on=["batch", "key"], how="outer", suffixes=("", "_want"))
    assert len(both) == len(emitted) == len(c)
    assert (both["n"] == both["n_want"]).all()
    assert np.allclose(both["sx"].to_numpy(float), both["sx_want"].to_numpy(float))
