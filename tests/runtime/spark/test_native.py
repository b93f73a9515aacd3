"""The Spark-native baseline: per-key state through Spark's state store, same semantics."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from streamscale.runtime.spark.functions import calculator
from streamscale.runtime.spark.native import NATIVE_POLICY, group_function, run_native
from streamscale.runtime.spark.sources import generate


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
    from streamscale.runtime.spark.job import Job

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
    assert all(r.policy == NATIVE_POLICY and r.tasks == 2 for r in res.records)
    assert res.throughput > 0 and res.dead_letters == 0
    assert len((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()) == 2
