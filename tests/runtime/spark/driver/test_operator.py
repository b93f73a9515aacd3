"""The elastic keyed operator end to end on Spark (local[2]) with a changing plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from streamscale.model import Edge, Operator, Topology
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.keyed.functions import counter
from streamscale.runtime.spark.routing.routing import PartitionMap
from streamscale.runtime.spark.state.state import LocalStateBackend
from tests.runtime.spark._policies import Flip
from tests.runtime.spark._seq_source import SeqSource, expected_rows

OPTS = {"keys": "40", "step": "250", "bad": "53", "partitions": "3"}
CTL = {"interval_s": 0.0, "stabilization_s": 0.0, "scale_down_delay_s": 0.0}


def _job() -> Job:
    return Job.simple(
        "count",
        counter,
        source_options=OPTS,
        source_format=SeqSource.name(),
        source_class=SeqSource,
        instances=2,
        shards=6,
        trigger_s=0,
        sink={"format": "jsonl", "path": "sink"},
    )


@pytest.mark.spark
def test_counts_match_pandas_and_tasks_get_exactly_their_shards(spark, tmp_path: Path) -> None:
    job = _job()
    flip = Flip(job.topology, "count", k=3)
    res = run_job(
        spark,
        job,
        policy=flip,
        duration_s=120,
        checkpoint=tmp_path / "ck",
        out=tmp_path / "out",
        params=CTL,
        max_batches=4,
    )
    assert len(res.records) >= 4
    states = LocalStateBackend(tmp_path / "ck" / "state").load_all("count")
    counts: dict[str, int] = {}
    last = -1
    for st in states.values():
        assert st["order_violations"] == 0
        for k, c in st["count"].items():
            assert k not in counts  # a key lives in exactly one shard
            counts[k] = c
        last = max([last, *st["last_seq"].values()])
    n = last + 1
    rows = expected_rows(OPTS, n)
    want = rows["key"].dropna().value_counts().to_dict()
    assert counts == want
    assert res.dead_letters == int(rows["key"].isna().sum()) > 0
    # Every task received exactly (a subset of) the shards its plan routes to it.
    maps = {len(PartitionMap.from_plan(p, job.topology, "count").units): p for p in flip.plans}
    seen_plans = set()
    for rec in res.records:
        units = rec.extra["units"]
        pmap = PartitionMap.from_plan(maps[len(units)], job.topology, "count")
        # Partitions are numbered by load each batch; the unit -> shards grouping is the plan's.
        assert sorted(units) == sorted(pmap.units)
        seen_plans.add(len(units))
        assert rec.tasks["count"] == len(units)
        for unit, task in rec.extra["per_task"].items():
            assert set(task["shards"]) <= set(pmap.shards_of(pmap.units.index(unit)))
    assert seen_plans == {2, 4}
    # Sinks and metrics are written, one JSONL line per batch.
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["batch_id"] for x in lines] == [r.batch_id for r in res.records]
    sink = tmp_path / "out" / "sink"  # one layout for every job: batch_id=<b>/part-<p>.json
    out_rows = sum(1 for f in sink.glob("batch_id=*/part-*.json") for _ in f.open())
    assert out_rows == sum(r.extra["out_rows"]["count"] for r in res.records)
    letter = json.loads(next((tmp_path / "out" / "dead_letters").glob("*.jsonl")).open().readline())
    assert letter["reason"] == "missing key 'key'"


def _chain_job(opts: dict[str, str]) -> Job:
    """source → pre (stateless) → count (keyed) → post (stateless) → parquet and jsonl sinks."""

    def pre(df: pd.DataFrame) -> pd.DataFrame:
        return df.drop(columns=["payload"]).assign(doubled=df["value"] * 2.0)

    def post(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(tag=df["key"] + "!")

    ops = [
        Operator("src", kind="source", params={**opts, "format": SeqSource.name(), "trigger_s": 0}),
        Operator("pre"),
        Operator("count", key="key", instances=2, shards=4),
        Operator("post"),
        Operator("out", kind="sink", params={"format": "parquet", "path": "pq"}),
        Operator("lines", kind="sink", params={"format": "jsonl", "path": "js"}),
    ]
    edges = [Edge("src", "pre"), Edge("pre", "count", grouping="key"), Edge("count", "post"),
             Edge("post", "out"), Edge("post", "lines")]  # fmt: skip
    topo = Topology.build("chain", ops, edges)
    return Job.build(topo, {"pre": pre, "count": counter, "post": post}, source_class=SeqSource)


def _counts(backend: Any) -> tuple[dict[str, int], int]:
    counts: dict[str, int] = {}
    last = -1
    for st in backend.load_all("count").values():
        assert st["order_violations"] == 0
        counts.update(st["count"])
        last = max([last, *st["last_seq"].values()])
    return counts, last + 1


@pytest.mark.spark
def test_stateless_operators_around_the_keyed_one_and_file_sinks(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.state.state import state_backend

    opts = {"keys": "30", "step": "200", "bad": "41", "partitions": "2"}
    url = f"file://{tmp_path / 'elsewhere'}?fsync=1"
    res = run_job(
        spark, _chain_job(opts), policy=Flip(_chain_job(opts).topology, "count", k=2),
        duration_s=300, checkpoint=tmp_path / "ck", out=tmp_path / "out", params=CTL,
        max_batches=3, state_url=url,
    )  # fmt: skip
    assert not (tmp_path / "ck" / "state").exists()  # nothing went to the default place
    counts, n = _counts(state_backend(url))
    rows = expected_rows(opts, n)
    assert counts == rows["key"].dropna().value_counts().to_dict()
    assert res.dead_letters == int(rows["key"].isna().sum()) > 0
    # Each batch's outputs went through `post`, once per sink, one file per unit partition.
    for sink, read in (("pq", pd.read_parquet), ("js", lambda p: pd.read_json(p, lines=True))):
        files = sorted((tmp_path / "out" / sink).glob("batch_id=*/part-*"))
        out = pd.concat([read(f) for f in files], ignore_index=True)
        assert len(out) == sum(r.extra["out_rows"]["count"] for r in res.records)
        assert (out["tag"] == out["key"] + "!").all()
        # the last count each key emitted is its committed count
        assert out.groupby("key")["count"].max().to_dict() == counts
    # Latencies are per tuple: every batch's tuples carry one each.
    assert all(r.latency_p50_ms == r.latency_p50_ms for r in res.records if r.rows)


@pytest.mark.spark
def test_linear_state_on_an_object_store(spark, tmp_path: Path, s3_endpoint: str) -> None:
    import os

    from streamscale.runtime.spark.state.state import state_backend

    env = spark.sparkContext.environment  # the Python workers' environment
    saved = dict(env)
    env.update({k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    url = f"s3://state/linear-{tmp_path.name}?endpoint={s3_endpoint}"
    try:
        run_job(spark, _job(), policy="static", duration_s=300, checkpoint=tmp_path / "ck",
                max_batches=2, state_url=url)  # fmt: skip
    finally:
        env.clear()
        env.update(saved)
    assert not (tmp_path / "ck" / "state").exists()
    counts, n = _counts(state_backend(url))
    assert n >= 250
    assert counts == expected_rows(OPTS, n)["key"].dropna().value_counts().to_dict()
