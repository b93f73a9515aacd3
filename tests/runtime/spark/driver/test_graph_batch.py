"""A graph batch's figures against brute force, and each keyed operator's tasks folded onto
the cores ready to run them (Spark's own partition ids) with every row still exact."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.model import Cluster, Node
from streamscale.model.ids import operator_of
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.driver.graph_batch import batch_figures
from streamscale.runtime.spark.executors.resources import FixedResources
from streamscale.runtime.spark.keyed.keyed import BatchStats, TaskStats
from tests.runtime.spark._seq_source import SeqSource
from tests.runtime.spark.driver.test_graph import OPTS, check_against_pandas, dag_topology


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
    cores_per_executor: int = 1

    def ready_cores(self) -> int:
        return self.ready

    def ready_executors(self) -> list[str]:
        return [f"ready-{i}" for i in range(self.ready)]


@pytest.mark.spark
@pytest.mark.parametrize("ready", [1, None])
def test_each_keyed_operator_runs_on_the_ready_cores_and_stays_exact(
    spark: Any, tmp_path: Path, ready: int | None
) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)
    model = Cluster.build([Node("local", cores=4)])
    resources = None if ready is None else _Ready(model, 2, ready=ready)
    ckpt = tmp_path / "ck"
    res = run_graph(
        spark, graph, duration_s=600, checkpoint=ckpt, out=tmp_path, max_batches=2,
        policy="static", cluster=model, resources=resources,
    )  # fmt: skip
    assert res.batches >= 2
    for b in res.records:
        assert b.extra["ready_cores"] == ready
        # Spark's own partition ids (TaskContext) of each keyed operator's reduce tasks
        parts: dict[str, set[int]] = {}
        for unit, task in b.extra["per_task"].items():
            parts.setdefault(operator_of(unit), set()).add(task["partition"])
        for op in graph.keyed:
            if b.keyed_rows.get(op):
                # the default plan: each keyed operator's two executors, one unit each
                assert parts[op] == ({0} if ready == 1 else {0, 1}), (b.batch_id, parts)
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * res.batches
