"""Static two-tier hashing and the plan → partition map (paper 000, §3)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Edge, Operator, Placement, Plan, Routing, Topology
from streamscale.runtime.spark.routing.hashing import murmur3_bytes, xxhash64_bytes
from streamscale.runtime.spark.routing.routing import (
    PartitionMap,
    global_shard_column,
    global_shards,
    instance_of,
    shard_of,
)


def _topo(instances: int = 2, shards: int = 4) -> Topology:
    return Topology.build(
        "t",
        [
            Operator("src", kind="source"),
            Operator("op", key="key", instances=instances, shards=shards),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "op", grouping="key"), Edge("op", "out")],
    )


def test_hashes_are_stable_across_processes() -> None:
    keys = [f"key-{i}" for i in range(50)]
    here = [(instance_of(k, 7), shard_of(k, 64)) for k in keys]
    code = (
        "from streamscale.runtime.spark.routing.routing import instance_of, shard_of\n"
        f"print([(instance_of(k, 7), shard_of(k, 64)) for k in {keys!r}])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == str(here)


def test_shard_hash_is_independent_of_executor_hash() -> None:
    keys = [f"k{i}" for i in range(20000)]
    g = global_shards(keys, 4, 64)
    assert set(g.tolist()) == set(range(256))  # every executor uses every one of its shards
    per_exec = [int(((g // 64) == e).sum()) for e in range(4)]
    assert min(per_exec) > 0.2 * len(keys)
    assert g.tolist() == [instance_of(k, 4) * 64 + shard_of(k, 64) for k in keys]


def _odd_keys() -> list[str]:
    """Unicode, empty-ish, long, and every length around the hashes' 4-, 8- and 32-byte
    blocks (trailing bytes above 0x7f included: Spark sign-extends them)."""
    rng = random.Random(3)
    alphabet = "abXZ09 -_\tàéü\u00ff\u0080日本語🙂\u0000"
    keys = ["", " ", "  ", "\u0000", "é", "日", "🙂", "x" * 10_000]
    for _ in range(2200):
        n = rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 11, 16, 31, 32, 33, 35, 64, 65, 100, 257])
        keys.append("".join(rng.choice(alphabet) for _ in range(n)))
    return keys


@pytest.mark.spark
def test_python_hashes_are_sparks_on_strings_and_integers(spark) -> None:
    from pyspark.sql import functions as F

    keys = _odd_keys()
    df = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "i long, k string")
    rows = (
        df.select(
            "i",
            F.hash("k").alias("h"),
            F.xxhash64("k").alias("x"),
            global_shard_column(F.col("k"), 8, 64).alias("g"),
            global_shard_column(F.col("k"), 3, 10).alias("g3"),
        )
        .orderBy("i")
        .collect()
    )
    data = [k.encode() for k in keys]
    assert [r.h for r in rows] == murmur3_bytes(data).tolist()
    assert [r.x for r in rows] == xxhash64_bytes(data).tolist()
    assert [r.g for r in rows] == global_shards(keys, 8, 64).tolist()
    assert [r.g3 for r in rows] == global_shards(keys, 3, 10).tolist()
    ints = [
        0,
        1,
        -1,
        2**31,
        -(2**63),
        2**63 - 1,
        *random.Random(4).sample(range(-(10**15), 10**15), 2000),
    ]
    dfi = spark.createDataFrame([(i, v) for i, v in enumerate(ints)], "i long, k long")
    got = dfi.select("i", global_shard_column(F.col("k"), 5, 16).alias("g")).orderBy("i")
    assert [r.g for r in got.collect()] == global_shards(ints, 5, 16).tolist()


def test_global_shards_of_ten_thousand_keys_is_fast() -> None:
    keys = [f"user-{i}" for i in range(10_000)]
    t0 = time.perf_counter()
    g = global_shards(keys, 32, 256)
    assert time.perf_counter() - t0 < 1.0
    assert g.min() >= 0 and g.max() < 32 * 256
    assert g[:50].tolist() == [instance_of(k, 32) * 256 + shard_of(k, 256) for k in keys[:50]]


def test_partition_map_follows_the_routing_tables() -> None:
    topo = _topo()
    plan = Plan(
        Allocation({"op[0]": 2, "op[1]": 1}),
        Placement({"op[0]#0": "n", "op[0]#1": "n", "op[1]#0": "n"}),
        Routing(
            {
                "op[0]": ("op[0]#0", "op[0]#1", "op[0]#1", "op[0]#0"),
                "op[1]": ("op[1]#0",) * 4,
            }
        ),
    )
    pm = PartitionMap.from_plan(plan, topo, "op")
    assert pm.units == ("op[0]#0", "op[0]#1", "op[1]#0")
    assert pm.shard_partition == (0, 1, 1, 0, 2, 2, 2, 2)
    assert pm.shards_of(1) == (1, 2)


def test_by_load_numbers_the_heaviest_unit_first_and_keeps_the_grouping() -> None:
    topo = _topo()
    plan = Plan(
        Allocation({"op[0]": 2, "op[1]": 1}),
        Placement({"op[0]#0": "n", "op[0]#1": "n", "op[1]#0": "n"}),
        Routing(
            {
                "op[0]": ("op[0]#0", "op[0]#1", "op[0]#1", "op[0]#0"),
                "op[1]": ("op[1]#0",) * 4,
            }
        ),
    )
    pm = PartitionMap.from_plan(plan, topo, "op")
    # unit loads: op[0]#0 = 0.1 + 0.2, op[0]#1 = 0.5 + 0.5, op[1]#0 = 0.4
    ordered = pm.by_load({0: 0.1, 3: 0.2, 1: 0.5, 2: 0.5, 4: 0.4})
    assert ordered.units == ("op[0]#1", "op[1]#0", "op[0]#0")
    assert ordered.shard_partition == (2, 0, 0, 2, 1, 1, 1, 1)
    for p in range(ordered.partitions):
        unit = ordered.units[p]
        assert ordered.shards_of(p) == pm.shards_of(pm.units.index(unit))
    assert pm.by_load({}) == pm  # no loads yet: plan order


def test_resource_centric_tables_may_name_any_unit() -> None:
    topo = _topo()
    plan = Plan(routing=Routing({"op[0]": ("op#1",) * 4, "op[1]": ("op#0", "op#1") * 2}))
    pm = PartitionMap.from_plan(plan, topo, "op")
    assert pm.units == ("op#1", "op#0")
    assert pm.shards_of(1) == (4, 6)


@pytest.mark.parametrize(
    ("tables", "msg"),
    [
        ({"op[0]": ("u",) * 4}, "op[1]"),
        ({"op[0]": ("u",) * 3, "op[1]": ("u",) * 4}, "3 entries"),
        ({"op[0]": ("u", "", "u", "u"), "op[1]": ("u",) * 4}, "names no unit"),
    ],
)
def test_incomplete_plans_are_rejected(tables: dict, msg: str) -> None:
    with pytest.raises(StreamscaleError, match=re.escape(msg)):
        PartitionMap.from_plan(Plan(routing=Routing(tables)), _topo(), "op")


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.integers(0, 9), min_size=1, max_size=40),
    loads=st.lists(st.floats(0.0, 10.0), min_size=40, max_size=40),
    n=st.integers(1, 12),
)
def test_folding_spreads_folded_units_within_the_ready_cores(
    parts: list[int], loads: list[float], n: int
) -> None:
    from streamscale.runtime.spark.routing.routing import PartitionMap

    used = sorted(set(parts))
    dense = [used.index(p) for p in parts]
    m = PartitionMap("op", 1, len(parts), tuple(f"u{p}" for p in used), tuple(dense))
    shard_load = dict(enumerate(loads[: len(parts)]))
    f = m.folded(n, shard_load)
    assert f.partitions == min(n, m.partitions)
    assert all(0 <= q < f.partitions for q in f.shard_partition)
    # the documented weights: the load plus the mean shard's; all ones if none
    mean = sum(shard_load.values()) / len(parts)
    w = {g: x + mean if mean > 0 else 1.0 for g, x in shard_load.items()}
    unit_load = {m.units[p]: sum(w[g] for g in m.shards_of(p)) for p in range(m.partitions)}
    heaviest = sorted(unit_load, key=lambda u: (-unit_load[u], m.units.index(u)))[: f.partitions]
    # the heaviest units keep a partition of their own name, with all their shards
    assert set(f.units) == set(heaviest)
    for q, unit in enumerate(f.units):
        assert all(f.shard_partition[g] == q for g in m.shards_of(m.units.index(unit)))
    # list scheduling's bound: no partition above the larger of its kept unit's load and
    # the mean plus the heaviest moved shard
    total = sum(unit_load.values())
    moved = [g for g in range(len(parts)) if m.units[dense[g]] not in f.units]
    top = max((w[g] for g in moved), default=0.0)
    for q in range(f.partitions):
        got = sum(w[g] for g in range(len(parts)) if f.shard_partition[g] == q)
        assert got <= max(unit_load[f.units[q]], total / f.partitions + top) + 1e-6 * (1 + total)


def test_folding_eight_equal_units_onto_six_cores_splits_two_units() -> None:
    from streamscale.runtime.spark.routing.routing import PartitionMap

    # eight units of four equal shards: whole units would put 8 on two cores, split ≤ 6
    m = PartitionMap("op", 8, 4, tuple(f"u{e}" for e in range(8)), tuple(g // 4 for g in range(32)))
    f = m.folded(6, {g: 1.0 for g in range(32)})
    per = [f.shard_partition.count(q) for q in range(6)]
    assert sorted(per) == [5, 5, 5, 5, 6, 6]
    assert f.units == tuple(f"u{e}" for e in range(6))


def test_folding_spreads_the_shards_a_small_batch_left_idle() -> None:
    from streamscale.runtime.spark.routing.routing import PartitionMap

    # 8 units of 32 shards onto 4 cores, one tuple seen in 40 of the 256 shards: the
    # four folded units' 128 shards go about 32 to each core (not all to the idlest)
    m = PartitionMap(
        "op", 8, 32, tuple(f"u{e}" for e in range(8)), tuple(g // 32 for g in range(256))
    )
    f = m.folded(4, {g: 1.0 for g in range(0, 256, 7)[:40]})
    per = [f.shard_partition.count(q) for q in range(4)]
    assert max(per) - min(per) <= 8
