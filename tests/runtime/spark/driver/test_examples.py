"""The bundled Spark DAG examples (paper 004's Linear, Diamond and Star) against pandas.

Each example runs as written — its operators, functions, keys, edges and sinks — with
its generator swapped for the deterministic test source, so pandas can count the same
tuples: every keyed count equals the key's tuples times the branches that reach it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from streamscale.model import Operator, Topology
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.state.state import LocalStateBackend
from tests.runtime.spark._seq_source import SeqSource, expected_rows

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
OPTS = {"keys": "30", "step": "150", "partitions": "2", "total": "450"}  # three batches of 150

# example → (keyed operator, branches reaching it, parquet sink path)
CASES = {
    "spark-linear.yaml": ("write", 1, "linear"),
    "spark-diamond.yaml": ("write", 4, "diamond"),
    "spark-star.yaml": ("hub", 2, "star"),
}


def _on_test_source(path: Path) -> JobGraph:
    base = JobGraph.from_yaml(path).topology
    ops = [
        Operator(name=op.name, kind="source", params={**OPTS, "format": SeqSource.name()})
        if op.kind == "source"
        else op
        for op in base.operators
    ]
    topo = Topology.build(base.name, ops, list(base.edges))
    return JobGraph.build(topo, source_class=SeqSource)


@pytest.mark.spark
@pytest.mark.parametrize("example", sorted(CASES))
def test_example_dag_counts_equal_pandas(spark, tmp_path: Path, example: str) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    keyed, branches, sink = CASES[example]
    graph = _on_test_source(EXAMPLES / example)
    assert graph.keyed == (keyed,)
    ckpt = tmp_path / "ck"
    run_graph(
        spark, graph, duration_s=900, checkpoint=ckpt, out=tmp_path, max_batches=3, policy="static"
    )

    want = (expected_rows(OPTS, int(OPTS["total"]))["key"].value_counts() * branches).to_dict()
    state: dict[str, int] = {}
    for shard in LocalStateBackend(ckpt / "state").load_all(keyed).values():
        state.update(shard["count"])
    assert state == want
    rows = pd.read_parquet(tmp_path / sink)  # each batch: every touched key with its count
    assert rows.groupby("key")["count"].max().to_dict() == want
    if "tier" in rows.columns:
        assert (rows["tier"] == rows["count"] // 100).all()
