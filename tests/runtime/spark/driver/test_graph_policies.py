"""Every placement family drives a DAG on Spark end to end, and the results stay exact.

``albic``, ``td``, ``tl``, ``gma`` and ``model-driven`` plan the two keyed operators of
the test DAG on a four-node model (two cores each) after every batch; whatever they
decide — units, routing, nodes — the sink rows and both operators' committed state
must equal pandas over the same tuples. (Pinning to real executors is tested on a
loopback cluster in ``test_placement.py``; here the nodes are a model over ``local[2]``.)
"""

from __future__ import annotations

import pytest

from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.executors.resources import FixedResources, capacity_cluster
from tests.runtime.spark._seq_source import SeqSource
from tests.runtime.spark.driver.test_graph import OPTS, check_against_pandas, dag_topology

FAMILIES = ("albic", "td", "tl", "gma", "model-driven")


@pytest.mark.spark
@pytest.mark.parametrize("policy", FAMILIES)
def test_each_family_plans_a_dag_on_spark_and_stays_exact(spark, tmp_path, policy: str) -> None:
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
        policy=policy,
        params={"interval_s": 0, "stabilization_s": 0},
        resources=FixedResources(capacity_cluster(4, 2), physical_cores=2),
        seed=3,
    )
    n = len(res.records)
    assert n >= 3
    assert all("control_error" not in b.extra for b in res.records), [
        b.extra.get("control_error") for b in res.records
    ]
    assert any(b.extra.get("decision") for b in res.records)
    assert check_against_pandas(ckpt, tmp_path, OPTS) == 120 * n
