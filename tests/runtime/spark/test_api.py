"""The Python API builds the same graph as the topology and gives the same results."""

from __future__ import annotations

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.api import stream
from streamscale.runtime.spark.keyed import functions_dag as fd
from tests.runtime.spark._seq_source import SeqSource
from tests.runtime.spark.driver.test_graph import OPTS, check_against_pandas, dag_topology


def _build(df):
    s = stream(df, name="dag")
    e = s.map_batches(fd.enrich, name="enrich", buckets=5)
    ranked = e.key_by("key", instances=2, shards=4).process(fd.rank_in_key, name="rank")
    odd = e.map_batches(fd.odd_only, name="odd")
    ranked.to("parquet", path="ranked", name="ranked")
    totals = (
        ranked.union(odd)
        .key_by("bucket", instances=2, shards=2)
        .process(fd.bucket_totals, name="totals")
    )
    totals.to("none", name="out")
    return totals


@pytest.mark.spark
def test_api_dag_equals_yaml_graph_and_pandas(spark, tmp_path, monkeypatch) -> None:
    from streamscale.runtime.spark.driver import history

    # the driver keeps only the most recent batch records (a ring) and whole-run totals
    monkeypatch.setattr(history, "RECENT_BATCHES", 1)
    spark.dataSource.register(SeqSource)
    df = spark.readStream.format(SeqSource.name()).options(**OPTS).load()
    job = _build(df)
    topo, want = job.topology(), dag_topology(OPTS)
    assert sorted(o.name for o in topo.operators) == sorted(o.name for o in want.operators)
    assert {(e.src, e.dst) for e in topo.edges} == {(e.src, e.dst) for e in want.edges}
    for a in topo.operators:
        b = want.operator(a.name)
        assert (a.kind, a.key, a.instances, a.shards) == (b.kind, b.key, b.instances, b.shards)
    res = job.run(checkpoint=tmp_path / "ck", out=tmp_path, max_batches=2, duration_s=240)
    # a batch already running when the limit is reached completes and commits too
    n = res.batches
    assert n >= 2 and [b.batch_id for b in res.records] == [n - 1]
    assert check_against_pandas(tmp_path / "ck", tmp_path, OPTS) == 120 * n
    assert res.keyed_rows["rank"] == 120 * n  # totals over every batch, not the ring


@pytest.mark.spark
def test_stream_refuses_a_batch_dataframe(spark) -> None:
    with pytest.raises(StreamscaleError, match="streaming DataFrame"):
        stream(spark.range(3))


@pytest.mark.spark
def test_a_declared_source_is_checked_before_the_query(spark) -> None:
    from streamscale.nexmark.source import register

    register(spark)
    df = spark.readStream.format("streamscale_nexmark").option("rate", "50").load()
    s = stream(df, name="declared", source=("streamscale_nexmark", {"rate": "50"}))
    src = s.to("none", name="out").topology().operator("source")
    assert src.params["format"] == "streamscale_nexmark" and src.params["rate"] == "50"
    with pytest.raises(StreamscaleError, match="'ratee': unknown streamscale_nexmark option"):
        stream(df, name="x", source=("streamscale_nexmark", {"ratee": "50"}))
    with pytest.raises(StreamscaleError, match="source 'parquet': not a registered source"):
        stream(df, name="x", source=("parquet", {}))
    with pytest.raises(StreamscaleError, match="source must be"):
        stream(df, name="x", source="streamscale_nexmark")


_LINEAR_YAML = """
name: linear
operators:
  - {name: source, kind: source, params: {format: streamscale_test_seq}}
  - {name: count, key: key, instances: 2, shards: 4,
     function: "streamscale.runtime.spark.keyed.functions:counter"}
  - {name: sink, kind: sink, params: {format: jsonl, path: counts}}
edges:
  - {src: source, dst: count, grouping: key}
  - {src: count, dst: sink}
"""


@pytest.mark.spark
def test_a_linear_job_built_in_python_runs_fused_as_its_yaml_twin(spark, tmp_path) -> None:
    import re

    import pandas as pd

    from streamscale.control.policies import initial_plan
    from streamscale.runtime.spark.driver.graph import JobGraph, local_cluster
    from streamscale.runtime.spark.driver.job import fused_job
    from streamscale.runtime.spark.keyed.functions import counter
    from tests.runtime.spark._seq_source import expected_rows

    spark.dataSource.register(SeqSource)
    opts = {"keys": "20", "step": "150", "total": "450"}
    df = spark.readStream.format(SeqSource.name()).options(**opts).load()
    job = stream(df).key_by("key", instances=2, shards=4).process(counter, name="count")
    job.to("jsonl", path="counts", name="sink")
    built = JobGraph.build(job.topology(), job._b.functions)
    (tmp_path / "linear.yaml").write_text(_LINEAR_YAML)
    loaded = JobGraph.from_yaml(tmp_path / "linear.yaml")
    py, yml = fused_job(built), fused_job(loaded)
    assert py is not None and yml is not None
    assert (py.keyed, py.before, py.after, py.sinks) == (
        yml.keyed,
        yml.before,
        yml.after,
        yml.sinks,
    )
    assert py.functions["count"] is yml.functions["count"] is counter
    cluster = local_cluster(physical=2, instances=2)
    plans = [initial_plan("elastic", g.topology, cluster) for g in (built, loaded)]
    assert plans[0] == plans[1]
    # a declared output schema (Spark's stateful APIs) keeps the operator-by-operator path
    typed = (
        stream(df)
        .key_by("key")
        .applyInPandasWithState(
            _count_state, "key string, count long", "count long", "append", "NoTimeout"
        )
    )
    typed.to("none")
    assert fused_job(JobGraph.build(typed.topology(), typed._b.functions)) is None

    res = job.run(checkpoint=tmp_path / "ck", out=tmp_path, max_batches=3, duration_s=240)
    files = sorted((tmp_path / "counts").glob("batch_id=*/*.json"))
    # written by the keyed operator's reduce tasks (Spark's writer names its files
    # part-<n>-<uuid>-c000.json): the batch ran as one keyed stage with its sink in it
    assert files and all(re.fullmatch(r"part-\d{5}\.json", f.name) for f in files)
    sink = pd.concat(pd.read_json(f, lines=True, dtype={"key": str}) for f in files)
    assert res.sink_rows["sink"] == len(sink)
    n = res.keyed_rows["count"]
    want = expected_rows(opts, n)["key"].value_counts()
    assert sink.groupby("key")["count"].max().sort_index().to_dict() == (
        want.sort_index().to_dict()
    )


def _count_state(key, frames, state):
    import pandas as pd

    total = state.get[0] if state.exists else 0
    for pdf in frames:
        total += len(pdf)
    state.update((total,))
    yield pd.DataFrame({"key": [key[0]], "count": [total]})
