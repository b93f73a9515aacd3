"""A fused follower's per-row partials, merged, are its aggregates of the rows (pandas),
and two partition maps fuse only where they group the shards alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from streamscale.runtime.spark.keyed.agg.accumulators import AggCall, finish, slots_of
from streamscale.runtime.spark.keyed.agg.chain import Recipe, partition_remap, row_partials
from streamscale.runtime.spark.keyed.agg.kernels import merge
from streamscale.runtime.spark.routing.routing import PartitionMap


def test_row_partials_merged_are_the_groups_aggregates() -> None:
    rng = np.random.default_rng(3)
    n = 400
    key = rng.choice(["a", "b", "c", "d"], n)
    x = rng.integers(-20, 20, n).astype(float) / 4
    x[rng.random(n) < 0.2] = np.nan
    i = pd.array(rng.integers(0, 9, n), dtype="Int64")
    i[rng.random(n) < 0.3] = pd.NA
    rows = pa.RecordBatch.from_pandas(pd.DataFrame({"key": key, "x": x, "i": i}),
                                      preserve_index=False)  # fmt: skip
    x_arr = pa.array(x, from_pandas=True)
    rows = rows.set_column(1, "x", x_arr)
    calls = (AggCall("count", "n", 0), AggCall("sum", "sx", 1), AggCall("max", "mx", 2),
             AggCall("avg", "ai", 3), AggCall("count", "ci", 4), AggCall("min", "mi", 5))  # fmt: skip
    recipe = Recipe(("key",), (
        ("__a0", "ones", None, pa.int64()), ("__a1", "value", "x", pa.float64()),
        ("__a2", "value", "x", pa.float64()), ("__a3_s", "double", "i", pa.float64()),
        ("__a3_c", "valid", "i", pa.int64()), ("__a4", "valid", "i", pa.int64()),
        ("__a5", "value", "i", pa.int64()),
    ))  # fmt: skip
    shard = np.array([ord(k) % 3 for k in key])
    part = row_partials(recipe, rows, shard, shard_col="__g", n_rows="__n")
    assert part.column("__n").to_pylist() == [1] * n
    slots = tuple(s for c in calls for s in slots_of(c))
    merged = merge([part], ["__g", "key"], slots).sort_by("key")
    got = pd.DataFrame({k: v.to_pylist() for k, v in finish(merged, calls).items()})
    got.insert(0, "key", merged.column("key").to_pylist())
    pdf = rows.to_pandas()
    want = pdf.groupby("key").agg(
        n=("key", "size"), sx=("x", lambda s: s.sum(min_count=1)), mx=("x", "max"),
        ai=("i", "mean"), ci=("i", "count"), mi=("i", "min"),
    ).reset_index()  # fmt: skip
    pd.testing.assert_frame_equal(got.astype(float, errors="ignore").drop(columns="key"),
                                  want.astype(float, errors="ignore").drop(columns="key"),
                                  check_dtype=False)  # fmt: skip
    assert got["key"].tolist() == want["key"].tolist()


def _pmap(op: str, parts: list[int], executors: int = 2, shards: int = 2) -> PartitionMap:
    units = tuple(f"{op}[{p}]#0" for p in range(max(parts) + 1))
    return PartitionMap(op, executors, shards, units, tuple(parts))


def test_partition_maps_fuse_where_they_group_the_shards_alike() -> None:
    a = _pmap("a", [0, 0, 1, 1])
    assert partition_remap(a, _pmap("b", [0, 0, 1, 1])) == (0, 1)
    assert partition_remap(a, _pmap("b", [1, 1, 0, 0])) == (1, 0)  # numbered apart, alike
    assert partition_remap(a, _pmap("b", [0, 1, 0, 1])) is None  # grouped apart
    assert partition_remap(a, _pmap("b", [0, 0, 0, 0])) is None  # fewer partitions
    assert partition_remap(a, _pmap("b", [0, 0, 1, 1, 1, 1], executors=3)) is None
