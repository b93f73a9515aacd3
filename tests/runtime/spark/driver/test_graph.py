"""DAG jobs on Spark: two keyed operators on different keys, fan-out and a union, against pandas."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.state.state import LocalStateBackend
from tests.runtime.spark._seq_source import SeqSource, expected_rows

F = "streamscale.runtime.spark.keyed.functions_dag"
OPTS = {"keys": "20", "step": "120", "partitions": "2", "total": "600"}


def dag_topology(opts: dict[str, str], sink_path: str = "ranked") -> Topology:
    """source → enrich ⇒ {rank (keyed by key), odd}; rank ∪ odd → totals (keyed by bucket)."""
    src = {**opts, "format": SeqSource.name(), "trigger_s": 0}
    return Topology.build(
        "dag",
        [
            Operator(name="source", kind="source", params=src),
            Operator(name="enrich", function=f"{F}:enrich", params={"buckets": 5}),
            Operator(name="rank", key="key", instances=2, shards=4, function=f"{F}:rank_in_key"),
            Operator(name="odd", function=f"{F}:odd_only"),
            Operator(
                name="totals", key="bucket", instances=2, shards=2, function=f"{F}:bucket_totals"
            ),
            Operator(name="ranked", kind="sink", params={"format": "parquet", "path": sink_path}),
            Operator(name="out", kind="sink", params={"format": "none"}),
        ],
        [
            Edge("source", "enrich"),
            Edge("enrich", "rank", grouping="key"),
            Edge("enrich", "odd"),
            Edge("rank", "ranked"),
            Edge("rank", "totals", grouping="key"),
            Edge("odd", "totals", grouping="key"),
            Edge("totals", "out"),
        ],
    )


def expected(opts: dict[str, str], n: int) -> tuple[pd.DataFrame, dict[int, tuple[int, int]]]:
    """pandas: every row's rank within its key, and per bucket (rows, sum of n)."""
    df = expected_rows(opts, n)
    df["bucket"] = df["seq"] % 5
    df["n"] = df.groupby("key").cumcount() + 1
    odd = df[df["seq"] % 2 == 1].assign(n=0)
    both = pd.concat([df, odd])
    g = both.groupby("bucket")["n"].agg(["size", "sum"])
    return df, {int(b): (int(r["size"]), int(r["sum"])) for b, r in g.iterrows()}


def check_against_pandas(ckpt: Path, out: Path, opts: dict[str, str]) -> int:
    """Sink rows and both operators' committed state equal pandas; returns tuples processed."""
    spark_rows = pd.read_parquet(out / "ranked")
    n = int(spark_rows["seq"].max()) + 1
    want_rows, want_buckets = expected(opts, n)
    got = spark_rows[["key", "seq", "n"]].sort_values("seq").reset_index(drop=True)
    want = want_rows[["key", "seq", "n"]].sort_values("seq").reset_index(drop=True)
    assert len(got) == len(want)  # nothing lost or duplicated
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    backend = LocalStateBackend(ckpt / "state")
    counts: dict[str, int] = {}
    for st in backend.load_all("rank").values():
        counts.update(st["count"])
    assert counts == want_rows["key"].value_counts().to_dict()
    buckets: dict[int, tuple[int, int]] = {}
    for st in backend.load_all("totals").values():
        for b, r in st["rows"].items():
            buckets[int(b)] = (r, st["n"][b])
    assert buckets == want_buckets
    return n


@pytest.mark.spark
def test_dag_with_two_keyed_operators_fan_out_and_union_matches_pandas(spark, tmp_path) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)
    assert graph.keyed == ("rank", "totals")
    ckpt = tmp_path / "ck"
    res = run_graph(
        spark, graph, duration_s=900, checkpoint=ckpt, out=tmp_path, max_batches=2, policy="static"
    )
    ids = [b.batch_id for b in res.records]  # a batch running at the limit completes too
    assert len(ids) >= 2 and ids == list(range(len(ids)))
    # every batch the run recorded is in Spark's commit log: the stop waited for it
    assert (ckpt / "spark" / "commits" / str(ids[-1])).exists()
    # A second run on the checkpoint continues after the first's last batch.
    res = run_graph(
        spark, graph, duration_s=900, checkpoint=ckpt, out=tmp_path, max_batches=2, policy="static"
    )
    assert len(res.records) >= 2 and res.records[0].batch_id == ids[-1] + 1
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * (res.records[-1].batch_id + 1)


def test_graph_refuses_what_cannot_run_naming_the_operator() -> None:
    topo = dag_topology(OPTS)
    no_fn = Topology.build(
        "x",
        [
            Operator(name="source", kind="source"),
            Operator(name="m"),
            Operator(name="out", kind="sink"),
        ],
        [Edge("source", "m"), Edge("m", "out")],
    )
    with pytest.raises(StreamscaleError, match="no function given") as exc:
        JobGraph.build(no_fn)
    assert exc.value.item == "operator m"
    with pytest.raises(StreamscaleError) as exc:
        JobGraph.build(topo, {"odd": "nope.module:fn"})
    assert exc.value.item == "operator odd"


def _batches(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(x)["batch_id"] for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.spark
@pytest.mark.slow
def test_dag_after_sigkilled_driver_matches_pandas(spark, tmp_path) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph
    from tests.runtime.spark._dag_driver import OPTS as KOPTS

    ckpt, out = tmp_path / "ck", tmp_path / "out"
    driver = Path(__file__).parents[1] / "_dag_driver.py"
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(ckpt), str(out), "1000"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while len(_batches(out / "batches.jsonl")) < 2:
            assert proc.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "driver made no progress"
            time.sleep(0.1)
        time.sleep(0.5)  # most likely inside the next batch
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    first = _batches(out / "batches.jsonl")
    graph = JobGraph.build(dag_topology(KOPTS), source_class=SeqSource)
    res = run_graph(
        spark, graph, duration_s=240, checkpoint=ckpt, out=out, max_batches=2, policy="static"
    )
    assert res.records[0].batch_id in (first[-1] + 1, first[-1] + 2)
    n = check_against_pandas(ckpt, out, KOPTS)
    assert n == 100 * (res.records[-1].batch_id + 1)


def _plan_with(topology: Topology, units: dict[str, int]) -> Any:
    """Every keyed operator's executor 0 gets ``units[op]`` units; the others one each."""
    from streamscale.model import Allocation, Placement, Plan, Routing
    from tests.runtime.spark._policies import split_plan

    cores, nodes, tables = {}, {}, {}
    for op, k in units.items():
        p = split_plan(topology, op, k)
        cores.update(p.allocation.cores)
        nodes.update(p.placement.nodes)
        tables.update(p.routing.tables)
    return Plan(Allocation(cores), Placement(nodes), Routing(tables))


class _Script:
    """Plans per decision: each keyed operator resized on its own."""

    name = "script"

    def __init__(self, topology: Topology, steps: list[dict[str, int]]) -> None:
        self.plans = [_plan_with(topology, s) for s in steps]
        self.i = 0

    def decide(self, snapshot: Any, current: Any, now: float) -> Any:
        from streamscale.control.controller import Decision

        plan = self.plans[min(self.i, len(self.plans) - 1)]
        self.i += 1
        return Decision(plan, "step", {}, "none")

    def shard_bytes(self, instance: str, shard: int) -> int:
        return 0


@pytest.mark.spark
def test_each_keyed_operator_of_a_dag_is_resized_on_its_own_and_stays_exact(
    spark, tmp_path
) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    topo = dag_topology(OPTS)
    graph = JobGraph.build(topo, source_class=SeqSource)
    steps = [{"rank": 3, "totals": 1}, {"rank": 1, "totals": 2}, {"rank": 4, "totals": 2}]
    ckpt = tmp_path / "ck"
    res = run_graph(
        spark,
        graph,
        duration_s=600,
        checkpoint=ckpt,
        out=tmp_path,
        max_batches=4,
        policy=_Script(topo, steps),
        params={"interval_s": 0, "stabilization_s": 0, "scale_down_delay_s": 0},
    )
    n = len(res.records)  # a batch running at the limit completes too
    assert [b.batch_id for b in res.records] == list(range(n)) and n >= 4
    # units that ran tasks: batch 0 the initial plan (1 + 1 per operator), then each step
    # (executor 0 of an operator with k units + executor 1's one unit), when it has rows
    want = [{"rank": 2, "totals": 2}, {"rank": 4, "totals": 2}, {"rank": 2, "totals": 3}]
    for b, w in zip(res.records[:3], want, strict=True):
        for op, units in w.items():
            assert b.tasks.get(op, 0) <= units
    assert res.records[1].tasks["rank"] > res.records[2].tasks["rank"]
    assert res.records[2].tasks["totals"] > res.records[1].tasks["totals"]
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * n


@pytest.mark.spark
def test_dag_under_the_elastic_policy_decides_and_stays_exact(spark, tmp_path) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)
    ckpt = tmp_path / "ck"
    res = run_graph(
        spark,
        graph,
        duration_s=600,
        checkpoint=ckpt,
        out=tmp_path,
        max_batches=3,
        policy="elastic",
        params={"interval_s": 0, "stabilization_s": 0},
    )
    n = len(res.records)  # a batch running at the limit completes too
    assert n >= 3
    assert all("control_error" not in b.extra for b in res.records), res.records[-1].extra
    assert any(b.extra.get("decision") for b in res.records)
    # nothing was stored before the first batch, so nothing was read from the store
    assert res.records[0].extra["state_read_bytes"] == {"rank": 0, "totals": 0}
    assert all(
        set(b.cores) == {"rank", "totals"} and min(b.cores.values()) >= 2 for b in res.records
    )
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * n


@pytest.mark.spark
def test_dag_state_lives_where_state_url_says(spark, tmp_path) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.state.state import state_backend

    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)
    url = f"file://{tmp_path / 'elsewhere'}?fsync=1"
    res = run_graph(
        spark, graph, duration_s=600, checkpoint=tmp_path / "ck", out=tmp_path,
        max_batches=2, state_url=url, policy="static",
    )  # fmt: skip
    n = 120 * len(res.records)
    assert not (tmp_path / "ck" / "state").exists()  # nothing went to the default place
    counts: dict[str, int] = {}
    for st in state_backend(url).load_all("rank").values():
        counts.update(st["count"])
    assert counts == expected(OPTS, n)[0]["key"].value_counts().to_dict()


@pytest.mark.spark
def test_each_sink_is_one_spark_action_counting_what_it_wrote(spark, tmp_path) -> None:
    """A file sink counts its rows by observing its own write (one Spark job: the
    operators before it run once) and ``none`` counts through one job too; the counts
    and the files equal pandas."""
    from pyspark.sql import types as T

    from streamscale.runtime.spark.driver.graph import run_graph_batch

    pdf = pd.DataFrame({"key": [f"k{i % 7}" for i in range(500)], "seq": range(500)})
    want = pdf[pdf["seq"] % 2 == 1]
    for fmt, path in (("parquet", "odd"), ("none", None)):
        params = {"format": fmt, **({"path": path} if path else {})}
        topo = Topology.build(
            f"sink-{fmt}",
            [
                Operator(name="source", kind="source", params={"format": SeqSource.name()}),
                Operator(name="enrich", function=f"{F}:enrich", params={"buckets": 5}),
                Operator(name="odd", function=f"{F}:odd_only"),
                Operator(name="out", kind="sink", params=params),
            ],
            [Edge("source", "enrich"), Edge("enrich", "odd"), Edge("odd", "out")],
        )
        graph = JobGraph.build(topo, source_class=SeqSource)
        cols = "key string, seq bigint, bucket bigint"
        schemas = {"enrich": T._parse_datatype_string(cols),
                   "odd": T._parse_datatype_string(f"{cols}, n bigint")}  # fmt: skip
        batch = spark.createDataFrame(pdf)  # a local relation: no job of its own
        sc = spark.sparkContext
        group = f"sink-test-{fmt}"
        sc.setJobGroup(group, group)
        try:
            sinks = run_graph_batch(
                batch, graph, batch_id=3, run_keyed_op=lambda *_: None, out_dir=tmp_path,
                schemas=schemas,
            )  # fmt: skip
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert sinks["out"].rows == len(want)
        assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1
        if path:
            got = pd.read_parquet(tmp_path / path / "batch_id=3")
            assert sorted(got["seq"]) == sorted(want["seq"])


def test_the_local_cluster_has_two_slots_a_core_and_one_a_keyed_instance() -> None:
    from streamscale.runtime.spark.driver.graph import local_cluster

    def slots(physical: int, instances: int) -> int:
        return local_cluster(physical=physical, instances=instances).total_cores

    assert slots(2, 1) == 4  # local[2]
    assert slots(1, 1) == 4  # at least two cores' worth
    assert slots(2, 6) == 12  # every keyed instance holds a core
    assert [n.name for n in local_cluster(physical=4, instances=1).nodes] == ["local"]
