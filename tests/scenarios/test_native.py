"""The Spark-native baseline: per-key state through Spark's state store, same semantics."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.runtime.spark.sources.sources import generate
from streamscale.scenarios.native import NATIVE_POLICY, group_function, run_native


class _State:
    """The part of Spark's GroupState the wrapper uses."""

    def __init__(self, blob: bytes | None = None) -> None:
        self.blob = blob

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple[bytes]:
        assert self.blob is not None
        return (self.blob,)

    def update(self, value: tuple[bytes]) -> None:
        self.blob = value[0]


def _rows(seqs: list[int], values: list[float], cost: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": ["a"] * len(seqs),
            "value": values,
            "cost_ms": [cost] * len(seqs),
            "seq": seqs,
            "__ets": [0.0] * len(seqs),
        }
    )


def test_group_function_keeps_state_across_batches_in_arrival_order() -> None:
    seen: list[list[int]] = []

    def fn(rows: pd.DataFrame, state: dict[str, Any]) -> pd.DataFrame:
        seen.append(rows["seq"].tolist())
        return calculator(rows, state)

    run = group_function(fn, {}, ("cost_ms",))
    st = _State()
    # Spark hands a group's rows in no particular order; the wrapper restores seq order.
    (out,) = list(run(("a",), iter([_rows([5, 3], [2.0, 1.0])]), st))
    assert seen == [[3, 5]]
    assert out["rows"].tolist() == [2] and out["out_rows"].tolist() == [2]
    assert pickle.loads(st.blob) == {"a": [2, 3.0]}
    (out,) = list(run(("a",), iter([_rows([7], [4.0]), _rows([6], [0.5])]), st))
    assert seen[-1] == [6, 7]
    assert pickle.loads(st.blob) == {"a": [4, 7.5]}
    assert out["state"].tolist() == ['{"a": [4, 7.5]}']
    assert len(out["latency_ms"].iloc[0]) == 2


def test_group_function_dead_letters_non_numeric_required_fields() -> None:
    run = group_function(calculator, {}, ("cost_ms",))
    rows = _rows([1, 2, 3], [1.0, 2.0, 3.0])
    rows["cost_ms"] = [0.0, np.nan, 0.0]
    st = _State()
    (out,) = list(run(("a",), iter([rows]), st))
    assert out["dead"].tolist() == [1] and out["rows"].tolist() == [2]
    assert pickle.loads(st.blob) == {"a": [2, 4.0]}


@pytest.mark.spark
def test_native_counts_equal_pandas_over_the_same_tuples(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.driver.job import Job

    opts = {
        "keys": "50",
        "alpha": "1.0",
        "cost_ms": "0.0",
        "rate": "1000",
        "start_time": "0",
        "total": "800",
        "max_rows_per_batch": "400",
        "seed": "11",
    }
    job = Job.simple("calc", calculator, source_options=opts, instances=2, shards=4, trigger_s=0)
    final: dict[str, Any] = {}
    records = []
    res = run_native(
        spark,
        job,
        duration_s=120,
        checkpoint=tmp_path / "ckpt",
        out=tmp_path / "out",
        max_batches=2,
        on_state=final.update,
        on_batch=records.append,
    )
    want = generate(opts, 0, 800).groupby("key")["value"].agg(["count", "sum"])
    got = {k: v[k] for k, v in final.items()}
    assert set(got) == set(want.index)
    for k, (count, total) in got.items():
        assert count == want.loc[k, "count"]
        assert total == pytest.approx(want.loc[k, "sum"])
    assert [r.rows for r in res.records] == [400, 400]
    assert all(r.policy == NATIVE_POLICY and sum(r.tasks.values()) == 2 for r in res.records)
    assert res.throughput > 0 and res.dead_letters == 0
    assert len((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()) == 2


def _running_totals(
    key: tuple[Any, ...], frames: Any, state: Any
) -> Any:  # written for applyInPandasWithState, unchanged below
    n, total = state.get if state.exists else (0, 0.0)
    for f in frames:
        n += len(f)
        total += float(f["value"].sum())
    state.update((n, total))
    yield pd.DataFrame({"key": [key[0]], "n": [n], "total": [total]})


@pytest.mark.spark
def test_apply_in_pandas_with_state_function_same_under_streamscale_and_spark(
    spark, tmp_path: Path
) -> None:
    from streamscale.runtime.spark.keyed.keyed import KeyedSpec, run_keyed
    from streamscale.runtime.spark.routing.routing import PartitionMap
    from streamscale.runtime.spark.sources.sources import register_sources
    from streamscale.runtime.spark.state.state import BatchVersion, LocalStateBackend
    from streamscale.scenarios.native import from_group_state

    opts = {
        "keys": "40",
        "alpha": "1.0",
        "cost_ms": "0",
        "rate": "1e6",
        "start_time": "0",
        "total": "600",
        "max_rows_per_batch": "300",
        "seed": "5",
    }
    out_schema, state_schema = "key string, n long, total double", "n long, total double"
    # Spark: the function as written, on Spark's state store.
    register_sources(spark)
    seen: list[pd.DataFrame] = []
    query = (
        spark.readStream.format("streamscale_generator")
        .options(**opts)
        .load()
        .groupBy("key")
        .applyInPandasWithState(_running_totals, out_schema, state_schema, "update", "NoTimeout")
        .writeStream.outputMode("update")
        .foreachBatch(lambda df, _: seen.append(df.toPandas()))
        .option("checkpointLocation", str(tmp_path / "spark"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    # streamscale: the same function as a keyed operator, state moved between two plans.
    backend = LocalStateBackend(tmp_path / "state")
    spec = KeyedSpec("op", "key", 2, 4, from_group_state(_running_totals, "key"), {}, (), backend)
    ours: list[pd.DataFrame] = []
    for b, parts in enumerate(([0, 0, 1, 1, 0, 0, 1, 1], [1, 0, 1, 0, 2, 2, 0, 1])):
        pmap = PartitionMap("op", 2, 4, tuple(f"u{p}" for p in range(max(parts) + 1)), tuple(parts))
        df = spark.createDataFrame(generate(opts, 300 * b, 300 * (b + 1)))
        out, _ = run_keyed(
            df,
            spec,
            BatchVersion(b, b - 1, pmap),
            dead_letter_dir=str(tmp_path / "dl"),
        )
        ours.append(out.toPandas())
        backend.commit("op", b)

    def last(frames: list[pd.DataFrame]) -> dict[str, tuple[int, float]]:
        df = pd.concat(frames).sort_values("n")
        return {
            k: (int(r.n), round(float(r.total), 9)) for k, r in df.groupby("key").last().iterrows()
        }

    spark_final, ours_final = last(seen), last(ours)
    want = generate(opts, 0, 600).groupby("key")["value"].agg(["count", "sum"])
    assert len(seen) >= 2 and spark_final == ours_final
    assert ours_final == {
        k: (int(r["count"]), round(float(r["sum"]), 9)) for k, r in want.iterrows()
    }
    stored = {k: v for st in backend.load_all("op").values() for k, v in st.items()}
    assert {k: (n, round(t, 9)) for k, (n, t) in stored.items()} == ours_final
