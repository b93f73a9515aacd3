"""Shard traffic between keyed operators on the same key (pure; hand-checked)."""

from __future__ import annotations

import pytest

from streamscale.model import Edge, Operator, OperatorStats, ShardStats, Topology
from streamscale.runtime.spark.driver.graph_control import aligned_traffic, upstream_keyed


def _topology() -> Topology:
    return Topology.build(
        "t",
        [
            Operator(name="src", kind="source"),
            Operator(name="rank", key="key", instances=2, shards=2),
            Operator(name="tidy"),
            Operator(name="count", key="key", instances=2, shards=2),
            Operator(name="totals", key="bucket", instances=2, shards=2),
            Operator(name="out", kind="sink"),
        ],
        [
            Edge("src", "rank", grouping="key"),
            Edge("rank", "tidy"),
            Edge("tidy", "count", grouping="key"),
            Edge("rank", "totals", grouping="key"),
            Edge("count", "out"),
            Edge("totals", "out"),
        ],
    )


def test_the_upstream_keyed_operator_is_found_through_stateless_ones() -> None:
    t = _topology()
    assert upstream_keyed(t, "count") == "rank"
    assert upstream_keyed(t, "totals") == "rank"
    assert upstream_keyed(t, "rank") is None  # fed by the source


def test_same_key_edges_carry_the_downstream_shards_rates_and_other_keys_none() -> None:
    t = _topology()
    shards = [
        ShardStats("count", 0, rows=30),
        ShardStats("count", 1, rows=0),
        ShardStats("count", 2, rows=10),
        ShardStats("count", 3, rows=60),
        ShardStats("totals", 0, rows=50),
    ]
    ops = {"count": OperatorStats(input_rate=200.0), "totals": OperatorStats(input_rate=50.0)}
    got = {
        (x.src, x.src_shard, x.dst, x.dst_shard): x.rate for x in aligned_traffic(t, ops, shards)
    }
    # 200 t/s split 30:10:60 over shards 0, 2, 3; 'totals' is keyed on another field
    assert got == pytest.approx(
        {
            ("rank", 0, "count", 0): 60.0,
            ("rank", 2, "count", 2): 20.0,
            ("rank", 3, "count", 3): 120.0,
        }
    )
