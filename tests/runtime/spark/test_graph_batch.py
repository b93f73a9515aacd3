"""A graph batch's figures against brute force, and each keyed operator's tasks folded onto
the cores ready to run them (Spark's own partition ids) with every row still exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.model import Cluster, Node
from streamscale.model.ids import operator_of
from streamscale.runtime.spark.graph import JobGraph
from streamscale.runtime.spark.graph_batch import batch_figures
from streamscale.runtime.spark.keyed import BatchStats, TaskStats
from streamscale.runtime.spark.resources import FixedResources
from tests.runtime.spark._seq_source import SeqSource
from tests.runtime.spark.test_graph import OPTS, check_against_pandas, dag_topology


def _task(unit: str, busy: float, cpu: float, lat: list[float]) -> TaskStats:
    return TaskStats(
        partition=0, unit=unit, host="h", busy_s=busy, rows=len(lat), out_rows=0, shards={},
        latencies_ms=np.asarray(lat, dtype=np.float32), cpu_s=cpu,
    )  # fmt: skip


_lat = st.lists(st.floats(0, 1e4, allow_nan=False, width=32), max_size=20)
_tasks = st.lists(st.tuples(st.floats(0, 50), st.floats(0, 50), _lat), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(a=_tasks, b=_tasks)
def test_batch_figures_are_the_brute_force_ones(a: list[Any], b: list[Any]) -> None:
    observed = {
        op: BatchStats(0, 1.0, tuple(_task(f"{op}[{i}]#0", *t) for i, t in enumerate(ts)), 0, 1)
        for op, ts in (("x", a), ("y", b))
    }
    got, lat = batch_figures(observed)
    every = [v for ts in (a, b) for _, _, lats in ts for v in np.float32(lats)]
    assert sorted(lat.tolist()) == pytest.approx(sorted(float(v) for v in every))
    if every:
        assert got["latency_p50_ms"] == pytest.approx(float(np.percentile(every, 50)))
        assert got["latency_p99_ms"] == pytest.approx(float(np.percentile(every, 99)))
    else:
        assert np.isnan(got["latency_p50_ms"]) and np.isnan(got["latency_p99_ms"])
    assert got["busy_s"] == pytest.approx(sum(t[0] for ts in (a, b) for t in ts))
    assert got["cpu_s"] == pytest.approx(sum(t[1] for ts in (a, b) for t in ts))
    deltas = {}
    for op, ts in (("x", a), ("y", b)):
        loads = [t[0] for t in ts]
        mean = sum(loads) / len(loads)
        deltas[op] = max(loads) / mean if mean > 0 else 1.0
    assert got["deltas"] == pytest.approx(deltas)
    assert got["delta"] == pytest.approx(max(deltas.values()))


@dataclass
class _Ready(FixedResources):
    """A fixed cluster of which only ``ready`` cores run tasks (the others still start)."""

    ready: int = 1

    def ready_cores(self) -> int:
        return self.ready


@pytest.mark.spark
@pytest.mark.parametrize("ready", [1, None])
def test_each_keyed_operator_runs_on_the_ready_cores_and_stays_exact(
    spark: Any, tmp_path: Path, ready: int | None
) -> None:
    from streamscale.runtime.spark.dag import run_graph

    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)
    model = Cluster.build([Node("local", cores=4)])
    resources = None if ready is None else _Ready(model, 2, ready=ready)
    ckpt = tmp_path / "ck"
    res = run_graph(
        spark, graph, duration_s=600, checkpoint=ckpt, out=tmp_path, max_batches=2,
        policy="static", cluster=model, resources=resources,
    )  # fmt: skip
    assert res.count >= 2
    for b in res.batches:
        assert b.extra["ready_cores"] == ready
        # Spark's own partition ids (TaskContext) of each keyed operator's reduce tasks
        parts: dict[str, set[int]] = {}
        for unit, task in b.extra["per_task"].items():
            parts.setdefault(operator_of(unit), set()).add(task["partition"])
        for op in graph.keyed:
            if b.keyed_rows.get(op):
                # the default plan: each keyed operator's two executors, one unit each
                assert parts[op] == ({0} if ready == 1 else {0, 1}), (b.batch_id, parts)
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * res.count


_GRAPH_JOB = r"""
import json, sys
from pathlib import Path
from streamscale.runtime.spark.dag import run_graph
from streamscale.runtime.spark.functions import calculator
from streamscale.runtime.spark.graph import JobGraph
from streamscale.runtime.spark.job import Job
from streamscale.runtime.spark.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.session import build_session
from streamscale.runtime.spark.state import LocalStateBackend
from streamscale.scenarios.spark_log import ProgressLog

master, work, opts = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
spark = build_session(master, app_name="streamscale-graph-watch-test",
                      conf=executor_conf(1, 4, pin=False, separate_hosts=False, quick_start=True))
res = ExecutorResources(spark.sparkContext, cores_per_executor=1, max_executors=4,
                        initial_executors=1, pin=False, warm_new=False)
res.settle(120)
log = ProgressLog().attach(spark)
job = Job.simple("calc", calculator, source_options=opts, instances=2, shards=8, trigger_s=1.0,
                 params={"cost_kind": "wall"})
graph = JobGraph.build(job.topology, job.functions)
(work / "out").mkdir(parents=True, exist_ok=True)

def line(b):
    with open(work / "out" / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"batch": b.batch_id, **b.extra}, default=str) + "\n")

out = run_graph(spark, graph, policy="elastic", duration_s=float(sys.argv[4]),
                checkpoint=work / "ckpt", resources=res, out=work / "out", on_batch=line,
                params={"latency_target_ms": 1000.0, "catch_up_s": 3.0, "startup_s": 3.0})
spans = [(b.end_s, b.start_seq, b.end_seq) for b in log.seq_spans()]
state = {}
for shard_state in LocalStateBackend(work / "ckpt" / "state").load_all("calc").values():
    state.update(shard_state)
mid = [b.extra.get("mid_batch_requests") for b in out.batches]
print("RESULT " + json.dumps({"mid_batch": res.mid_batch, "spans": spans, "mid": mid,
                              "rows": sum(b.rows for b in out.batches),
                              "state": {k: list(v) for k, v in state.items()}}))
spark.stop()
"""


@pytest.fixture(scope="module")
def loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from streamscale.runtime.spark.cluster import cluster_down, cluster_up, java_available

    if not java_available():
        pytest.skip("Java is not available")
    d = tmp_path_factory.mktemp("cluster")
    info = cluster_up(1, 4, memory="4g", directory=d)
    try:
        yield info.master_url
    finally:
        cluster_down(d)


@pytest.mark.spark
@pytest.mark.slow
def test_a_graph_surge_gets_executors_while_a_batch_runs_and_state_stays_exact(
    loopback: str, tmp_path: Path
) -> None:
    """The watch runs once per job in the graph driver: a surge gets executors requested
    while a batch runs (Spark's own batch end times), every sample replays to the same
    answer, and every committed tuple is in the state exactly once (pandas)."""
    from streamscale.cli.replay import watch_inputs
    from streamscale.control.stimulus import replay_watch
    from streamscale.runtime.spark.sources import generate

    opts = {"keys": "40", "alpha": "1.0", "cost_ms": "20", "seed": "5",
            "schedule": "0:10,45:400", "total": "5000"}  # fmt: skip
    script = tmp_path / "job.py"
    script.write_text(_GRAPH_JOB)
    proc = subprocess.run(
        [sys.executable, str(script), loopback, str(tmp_path), json.dumps(opts), "90"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT ") :])
    assert any(got["mid"]) and got["mid_batch"], (got["mid"], got["spans"])
    first_surge_end = min(end for end, _, hi in got["spans"] if hi > 450)
    assert got["mid_batch"][0][0] < first_surge_end, (got["mid_batch"], got["spans"])
    replayed = replay_watch(watch_inputs(tmp_path / "out" / "metrics.jsonl"))
    assert [r for r in replayed if r.run is not None] and all(r.match for r in replayed)
    rows = got["rows"]
    assert rows >= max(hi for _, _, hi in got["spans"]) > 450
    want = generate(opts, 0, rows).groupby("key")["value"].agg(["count", "sum"])
    state = got["state"]
    assert set(state) == set(want.index)
    for key, (count, total) in state.items():
        assert count == want.loc[key, "count"]
        assert total == pytest.approx(want.loc[key, "sum"])
