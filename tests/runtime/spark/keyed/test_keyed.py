"""The keyed stage on the DataFrame path: exact per-key state, order, routing, replay."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.runtime.spark.keyed.functions import calculator, counter
from streamscale.runtime.spark.keyed.keyed import (
    KeyedSpec,
    count_dead_letters,
    murmur3_long,
    partition_keys,
    run_keyed,
)
from streamscale.runtime.spark.routing.routing import PartitionMap, global_shards
from streamscale.runtime.spark.state.state import BatchVersion, LocalStateBackend

E, Z = 2, 4


def _pmap(parts: list[int]) -> PartitionMap:
    n = max(parts) + 1
    return PartitionMap("op", E, Z, tuple(f"u{p}" for p in range(n)), tuple(parts))


def _input(seed: int, n: int, start: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    keys = rng.choice([f"k{i}" for i in range(30)], n).astype(object)
    keys[rng.random(n) < 0.05] = None
    cost = np.where(rng.random(n) < 0.05, "x", "0").astype(object)
    return pd.DataFrame(
        {
            "key": keys,
            "value": rng.random(n),
            "cost_ms": cost,
            "seq": np.arange(start, start + n, dtype=np.int64),
            "event_time": pd.Timestamp("2026-01-01", tz="UTC"),
        }
    ).sample(frac=1.0, random_state=seed)  # arrival order is seq, not position


def _spec(backend: LocalStateBackend, fn: Any, schema: Any = None) -> KeyedSpec:
    return KeyedSpec(
        operator="op",
        key="key",
        instances=E,
        shards=Z,
        fn=fn,
        fn_params={},
        required=("cost_ms",),
        backend=backend,
        output_schema=schema,
    )


def _run(spark: Any, pdf: pd.DataFrame, spec: KeyedSpec, b: int, pmap: PartitionMap, dl: Path):
    df = spark.createDataFrame(
        pdf, "key string, value double, cost_ms string, seq long, event_time timestamp"
    ).repartition(3)
    return run_keyed(
        df,
        spec,
        BatchVersion(b, b - 1, pmap, f"a{b}-{random.random()}"),
        dead_letter_dir=str(dl),
    )


def _good(pdf: pd.DataFrame) -> pd.DataFrame:
    ok = pdf["key"].notna() & (pdf["cost_ms"] != "x")
    return pdf[ok].sort_values("seq")


@pytest.fixture(params=[None, 37], ids=["one-arrow-batch", "arrow-batches-of-37"])
def arrow_batch(spark, request):
    """Rows per Arrow batch: Spark's default, or small so each reduce task gets many
    chunks, dead letters among them."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    if request.param is not None:
        spark.conf.set(key, str(request.param))
    yield request.param
    spark.conf.set(key, before)


@pytest.mark.spark
def test_calculator_state_outputs_and_dead_letters_match_pandas(
    spark, arrow_batch, tmp_path: Path
) -> None:
    from pyspark.sql import types as T

    backend = LocalStateBackend(tmp_path / "state")
    schema = T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("count", T.LongType()),
            T.StructField("sum", T.DoubleType()),
        ]
    )
    spec = _spec(backend, calculator, schema)
    b0, b1 = _input(1, 600, 0), _input(2, 500, 600)
    out0, st0 = _run(spark, b0, spec, 0, _pmap([0, 0, 1, 1, 2, 2, 0, 1]), tmp_path / "dl")
    backend.commit("op", 0)
    moved = _pmap([1, 0, 0, 1, 1, 0, 0, 1])
    _run(spark, b1, spec, 1, moved, tmp_path / "dl")  # a failed attempt: not committed
    out1, st1 = _run(spark, b1, spec, 1, moved, tmp_path / "dl")  # replay of batch 1
    backend.commit("op", 1)
    good = _good(pd.concat([b0, b1]))
    want = good.groupby("key")["value"].agg(["count", "sum"])
    got: dict[str, list[float]] = {}
    for state in backend.load_all("op").values():
        for k, v in state.items():
            assert k not in got
            got[k] = v
    assert set(got) == set(want.index)
    for k, (c, s) in got.items():
        assert c == want.loc[k, "count"] and s == pytest.approx(want.loc[k, "sum"])
    # Outputs: per key, running counts 1..n in seq order, and the running sums.
    out = pd.concat([out0.toPandas(), out1.toPandas()])
    assert len(out) == len(good) == st0.rows + st1.rows
    exp = good.assign(
        count=good.groupby("key").cumcount() + 1, sum=good.groupby("key")["value"].cumsum()
    )
    pd.testing.assert_frame_equal(
        out.sort_values(["key", "count"]).reset_index(drop=True),
        exp[["key", "count", "sum"]].sort_values(["key", "count"]).reset_index(drop=True),
        check_dtype=False,
    )
    # Each task got exactly the shards its unit serves.
    for st, pm, pdf in ((st0, _pmap([0, 0, 1, 1, 2, 2, 0, 1]), b0), (st1, moved, b1)):
        g = _good(pdf)
        shards = global_shards(g["key"].tolist(), E, Z)
        for t in st.tasks:
            assert (
                set(t.shards) <= set(pm.shards_of(t.partition)) and t.unit == pm.units[t.partition]
            )
            assert t.rows == int(np.isin(shards, list(pm.shards_of(t.partition))).sum())
            assert t.executor and len(t.latencies_ms) == t.rows
    # Dead letters: one per malformed tuple, written once per batch despite the replay.
    bad1 = len(b1) - len(_good(b1))
    assert st1.dead_letters == bad1 == count_dead_letters(str(tmp_path / "dl"), 1, "op")
    assert count_dead_letters(str(tmp_path / "dl")) == len(b0) + len(b1) - len(good)
    line = json.loads(next((tmp_path / "dl").glob("batch-0-op-*.jsonl")).open().readline())
    assert line["reason"] in ("missing key 'key'", "unparsable field 'cost_ms'")


@pytest.mark.spark
def test_counter_keeps_per_key_order_with_derived_output_schema(spark, tmp_path: Path) -> None:
    backend = LocalStateBackend(tmp_path / "state")
    spec = _spec(backend, counter)
    pdf = _input(3, 800, 0)
    out, _ = _run(spark, pdf, spec, 0, _pmap([0, 1, 2, 3, 0, 1, 2, 3]), tmp_path / "dl")
    res = out.toPandas()
    backend.commit("op", 0)
    states = backend.load_all("op")
    assert states and all(s["order_violations"] == 0 for s in states.values())
    want = _good(pdf)["key"].value_counts()
    assert dict(zip(res["key"], res["count"], strict=True)) == want.to_dict()
    assert sorted(out.columns) == ["count", "key"]


@pytest.mark.spark
def test_partition_keys_land_in_their_partition_and_hash_agrees(spark) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(5)
    vals = [rng.randrange(-(2**63), 2**63) for _ in range(200)] + list(range(50))
    df = spark.createDataFrame([(v,) for v in vals], "v long")
    got = [r[0] for r in df.select(F.hash("v")).collect()]
    assert got == [murmur3_long(v) for v in vals]
    for n in (1, 2, 3, 5, 8, 13):
        keys = partition_keys(n)
        rows = (
            spark.createDataFrame([(k, p) for p, k in enumerate(keys)], "k long, p int")
            .repartition(n, "k")
            .select("p", F.spark_partition_id().alias("pid"))
            .collect()
        )
        assert sorted((r.p, r.pid) for r in rows) == [(p, p) for p in range(n)]


def _echo(rows: pd.DataFrame, state: dict) -> pd.DataFrame:
    """Each routed row back, with the dtype its ``cost_ms`` reached the function with."""
    return rows[["key", "cost_ms"]].assign(dtype=str(rows["cost_ms"].dtype))


@pytest.mark.spark
def test_malformed_tuples_become_dead_letters_with_their_reason(spark, tmp_path: Path) -> None:
    df = spark.createDataFrame(
        [("a", "1"), (None, "2"), ("", "3"), ("b", "x"), ("c", "inf"), ("d", " 2.5 ")],
        "key string, cost_ms string",
    ).repartition(2)
    spec = KeyedSpec("op", "key", 1, 1, _echo, {}, ("cost_ms",), LocalStateBackend(tmp_path))
    pmap = PartitionMap("op", 1, 1, ("op[0]#0",), (0,))
    out, st = run_keyed(
        df, spec, BatchVersion(3, 2, pmap, "a"), dead_letter_dir=str(tmp_path / "dl"),
    )  # fmt: skip
    good = out.toPandas().sort_values("key")
    assert good["key"].tolist() == ["a", "d"] and good["cost_ms"].tolist() == [1.0, 2.5]
    assert set(good["dtype"]) == {"float64"}  # text parsed before the keyed function
    files = list((tmp_path / "dl").glob("batch-3-op-part-*.jsonl"))
    letters = [json.loads(x) for f in files for x in f.read_text().splitlines()]
    assert st.dead_letters == len(letters) == 4 and {x["batch"] for x in letters} == {3}
    by_key = {x["tuple"]["key"]: x for x in letters}
    assert by_key[None]["reason"] == by_key[""]["reason"] == "missing key 'key'"
    assert by_key["b"]["reason"] == by_key["c"]["reason"] == "unparsable field 'cost_ms'"
    assert by_key["b"]["tuple"] == {"key": "b", "cost_ms": "x"}  # as it arrived


@pytest.mark.spark
def test_spark_dead_letter_rules_agree_with_the_pandas_reading(spark) -> None:
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.keyed.keyed_map import DEAD, dead_letter_reasons, route

    rng = np.random.default_rng(7)
    n = 400
    pdf = pd.DataFrame(
        {
            "key": rng.choice(["a", "b", "", None], n),
            "f": rng.choice([1.5, np.nan, np.inf, -np.inf, 0.0], n),
            "i": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
            "t": rng.choice(["1", "x", "", "-2e3", "nan", None, "Infinity"], n),
        }
    )
    df = spark.createDataFrame(pdf.astype(object).where(pdf.notna(), None),
                               "key string, f double, i long, t string")  # fmt: skip
    df = df.withColumn("row", F.monotonically_increasing_id())
    pmap = PartitionMap("op", 2, 2, ("u0", "u1"), (0, 1, 1, 0))
    for key, req in (("key", ("f", "i", "t")), ("key", ("t", "gone", "f")), ("nokey", ("f",))):
        routed, _ = route(df, key=key, required=req, instances=2, shards=2, pmap=pmap)
        got = routed.orderBy("row").select(DEAD).toPandas()[DEAD].tolist()
        want = dead_letter_reasons(pdf, key, req).tolist()
        assert got == [w if isinstance(w, str) else None for w in want], (key, req)


@pytest.mark.spark
def test_every_row_of_a_large_layout_reaches_its_shards_partition(spark) -> None:
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.keyed.keyed_map import route

    e, z, n = 32, 256, 7
    parts = tuple(int(p) for p in np.random.default_rng(2).integers(0, n, e * z))
    pmap = PartitionMap("op", e, z, tuple(f"u{p}" for p in range(n)), parts)
    keys = [f"key-{i}" for i in range(3000)]
    df = spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "key string, seq long")
    routed, _ = route(df, key="key", required=(), instances=e, shards=z, pmap=pmap)
    rows = (
        routed.repartition(n, "__ss_pk")
        .select(
            "seq",
            F.col("__ss_shard").alias("g"),
            F.col("__ss_part").alias("p"),
            F.spark_partition_id().alias("pid"),
        )
        .orderBy("seq")
        .collect()
    )
    want = global_shards(keys, e, z)
    assert [r.g for r in rows] == want.tolist()
    assert [r.p for r in rows] == [parts[g] for g in want]
    assert all(r.pid == r.p for r in rows)
