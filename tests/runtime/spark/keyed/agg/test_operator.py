"""A declarative aggregation over many groups, batches touching few of them: its state is
written incrementally (changelog versions a small fraction of the snapshot, measured on
disk), its output equals Spark SQL's own streaming aggregation batch for batch — across
shard moves, a restart, and a checkpoint whose shards hold the table as one blob."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from streamscale.runtime.spark.api import Stream, stream
from streamscale.runtime.spark.keyed.agg.buckets import LEGACY_KEY, PIECE, read_pieces, tables_of
from streamscale.runtime.spark.keyed.agg.kernels import to_ipc
from streamscale.runtime.spark.state.state import LocalStateBackend
from streamscale.runtime.spark.state.state_log import is_log
from tests.runtime.spark._policies import Flip
from tests.runtime.spark.keyed.test_agg import _rows, _run

SCHEMA = "k string, i long, x double, s string"
GROUPS, BATCHES = 24_000, 6


def _write(directory: Path) -> pd.DataFrame:
    """Batch 0 creates every group; each later one touches three of them and adds one."""
    rng = np.random.default_rng(11)
    directory.mkdir(parents=True)
    frames = []
    for b in range(BATCHES):
        if b == 0:
            k = [f"g{v:05d}" for v in range(GROUPS)]
        else:
            k = [f"g{v:05d}" for v in rng.integers(0, GROUPS, 3) for _ in range(2)] + [f"new{b}"]
        n = len(k)
        i = rng.integers(-40, 40, n).astype(float)
        i[rng.random(n) < 0.1] = np.nan
        pdf = pd.DataFrame({
            "k": k, "i": pd.array(i, dtype="Int64"),
            "x": rng.integers(-400, 400, n) / 4.0,  # quarters: sums exact in any order
            "s": [f"s{v}" for v in rng.integers(0, 50, n)],
        })  # fmt: skip
        pdf.to_parquet(directory / f"batch-{b:05d}.parquet", index=False)
        frames.append(pdf)
    return pd.concat(frames, ignore_index=True)


def _aggs() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.count("*"), F.sum("x"), F.min("s"), F.max("x"), F.avg("i")]


def _source(spark: Any, directory: Path) -> Any:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(directory))


@pytest.fixture(scope="module")
def data(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict]:
    """The input files, all their rows, and Spark SQL's update-mode output per batch."""
    root = tmp_path_factory.mktemp("aggstate")
    rows = _write(root / "in")
    want: dict[int, Any] = {}

    def collect(df: Any, batch_id: int) -> None:
        want[batch_id] = (df.columns, _rows(df.collect()))

    q = (
        _source(spark, root / "in").groupBy("k").agg(*_aggs())
        .writeStream.outputMode("update").foreachBatch(collect)
        .option("checkpointLocation", str(root / "ck-sql")).trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination()
    assert sorted(want) == list(range(BATCHES))
    return root / "in", rows, want


def _job(spark: Any, src: Path, got: dict[int, Any]) -> Stream:
    def collect(df: Any, batch_id: int) -> None:
        got[batch_id] = (df.columns, _rows(df.collect()))

    s = stream(_source(spark, src), name="aggstate")
    out = s.key_by("k", instances=2, shards=2).agg(*_aggs(), mode="update")
    return out.to(collect, name="collect")


def _shard_dirs(ck: Path) -> list[Path]:
    dirs = [p for p in (ck / "state" / "agg").iterdir() if p.name.isdigit()]
    assert len(dirs) == 4
    return dirs


def _final_state_equals_pandas(ck: Path, rows: pd.DataFrame) -> None:
    """Every group's stored count and sum, read back from disk, against pandas."""
    back = LocalStateBackend(ck / "state").load_all("agg")
    t = pa.concat_tables([x for st in back.values() for x in tables_of(read_pieces(st))])
    got = dict(zip(t.column("k").to_pylist(), t.column("__a0").to_pylist(), strict=True))
    sums = dict(zip(t.column("k").to_pylist(), t.column("__a1").to_pylist(), strict=True))
    ref = rows.groupby("k")["x"].agg(["size", "sum"])
    assert got == ref["size"].to_dict() and sums == ref["sum"].to_dict()


def _every_batch_equals(got: dict[int, Any], want: dict[int, Any]) -> None:
    """Every batch's output was seen once and equals Spark SQL's for the same batch.

    When the first run was stopped while Spark planned its next batch, Spark's file
    source had logged that batch's file but not the offsets, and after the restart its
    next batch reads two files (as for a query of Spark's own stopped there): one batch
    fewer; the batches before the merged one compare (first()/last() within a batch of
    two files follow row order), and the stored state is checked against pandas."""
    if len(got) == BATCHES - 1:
        merged = next((b for b in sorted(got) if got[b] != want.get(b)), len(got))
        for b in range(merged):
            assert got[b] == want[b], f"batch {b}"
        return
    assert sorted(got) == list(range(BATCHES))
    for b in range(BATCHES):
        assert got[b] == want[b], f"batch {b}"


@pytest.mark.spark
@pytest.mark.slow
def test_changelogs_are_a_small_fraction_of_the_snapshot_and_output_equals_spark_sql(
    spark: Any, data: tuple[Path, pd.DataFrame, dict], tmp_path: Path
) -> None:
    src, rows, want = data
    got: dict[int, Any] = {}
    job = _job(spark, src, got)
    ck = tmp_path / "ck"
    first = _run(spark, job, ck, policy=Flip(job.topology(), "agg", k=3), batches=3)
    rest = _run(spark, job, ck, policy=Flip(job.topology(), "agg", k=3))
    assert len({b.tasks["agg"] for b in (*first.records, *rest.records)}) == 2  # shards moved
    _every_batch_equals(got, want)
    logs = 0
    for d in _shard_dirs(ck):
        files = {int(p.stem): p for p in d.glob("*.pkl")}
        snap = pickle.loads(files[0].read_bytes())
        assert isinstance(snap, dict) and len(snap) >= 16  # many buckets, one snapshot
        assert all(k[0] == PIECE for k in snap)
        for v, p in files.items():
            if v == 0:
                continue
            assert is_log(pickle.loads(p.read_bytes())), f"{p} is not a changelog"
            assert p.stat().st_size < 0.2 * files[0].stat().st_size, (p, files[0])  # <= 4 of 32
            logs += 1
    assert logs >= len(got) - 1  # every later batch wrote changelogs (before and after the restart)
    _final_state_equals_pandas(ck, rows)


def _to_one_blob(ck: Path) -> None:
    """Rewrite every stored version of every shard as the layout before buckets did: one
    snapshot holding the whole table in one entry. Every version, not only the committed
    one: a batch that ran but whose Spark commit the stop cut off runs again on the
    version before it."""
    backend = LocalStateBackend(ck / "state")
    for d in _shard_dirs(ck):
        versions = sorted(int(p.stem) for p in d.glob("*.pkl"))
        full = {}
        for v in versions:
            st, at = backend.read("agg", int(d.name), v)
            assert at == v
            full[v] = pa.concat_tables(tables_of(read_pieces(st)))
        for v, table in full.items():
            (d / f"{v}.pkl").write_bytes(pickle.dumps({LEGACY_KEY: to_ipc(table)}))


@pytest.mark.spark
@pytest.mark.slow
def test_a_checkpoint_of_one_blob_shards_recovers_and_converts(
    spark: Any, data: tuple[Path, pd.DataFrame, dict], tmp_path: Path
) -> None:
    src, rows, want = data
    got: dict[int, Any] = {}
    job = _job(spark, src, got)
    ck = tmp_path / "ck"
    _run(spark, job, ck, batches=2)
    _to_one_blob(ck)
    _run(spark, job, ck)
    _every_batch_equals(got, want)
    converted = 0
    for d in _shard_dirs(ck):
        newest = max(int(p.stem) for p in d.glob("*.pkl"))
        st, _ = LocalStateBackend(ck / "state").read("agg", int(d.name), newest)
        if LEGACY_KEY not in st:
            assert all(k[0] == PIECE for k in st) and len(st) >= 16
            converted += 1
    assert converted >= 2  # the shards the later batches wrote
    _final_state_equals_pandas(ck, rows)
