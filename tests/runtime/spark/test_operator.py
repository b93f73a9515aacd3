"""The elastic keyed operator end to end on Spark (local[2]) with a changing plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.runtime.spark.functions import counter
from streamscale.runtime.spark.job import Job
from streamscale.runtime.spark.routing import PartitionMap
from streamscale.runtime.spark.runner import run_job
from streamscale.runtime.spark.state import LocalStateBackend
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
        assert rec.tasks == len(units)
        for unit, task in rec.extra["per_task"].items():
            assert set(task["shards"]) <= set(pmap.shards_of(pmap.units.index(unit)))
    assert seen_plans == {2, 4}
    # Sinks and metrics are written, one JSONL line per batch.
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["batch_id"] for x in lines] == [r.batch_id for r in res.records]
    out_rows = sum(1 for f in (tmp_path / "out" / "sink").glob("*.jsonl") for _ in f.open())
    assert out_rows == sum(r.extra["out_rows"] for r in res.records)
    letter = json.loads(next((tmp_path / "out" / "dead_letters").glob("*.jsonl")).open().readline())
    assert letter["reason"] == "missing key 'key'"


def test_malformed_tuples_become_dead_letters_with_their_reason() -> None:
    import pyarrow as pa

    from streamscale.runtime.spark.keyed_map import route_batch

    # Arrow columns are typed: the text column carries "inf" where a pandas frame held np.inf.
    rb = pa.RecordBatch.from_pydict(
        {"key": ["a", None, "", "b", "c"], "cost_ms": ["1", "2", "3", "x", "inf"]}
    )
    pmap = PartitionMap("op", 1, 1, ("op[0]#0",), (0,))
    routed, letters = route_batch(
        rb, key="key", required=("cost_ms",), executors=1, shards=1, pmap=pmap,
        batch_id=3, index=0, offset=0, numeric=("cost_ms",),
    )  # fmt: skip
    assert routed is not None
    good = routed.to_pandas()
    assert good["key"].tolist() == ["a"] and good["cost_ms"].tolist() == [1.0]
    assert [x["reason"] for x in letters] == [
        "missing key 'key'",
        "missing key 'key'",
        "unparsable field 'cost_ms'",
        "unparsable field 'cost_ms'",
    ]
    assert letters[2]["tuple"] == {"key": "b", "cost_ms": "x"} and letters[0]["batch"] == 3
