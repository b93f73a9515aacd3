"""The key-group problem (paper 003, §3): building, validation, reading a snapshot."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.errors import ModelError
from streamscale.model import (
    Cluster,
    Edge,
    Node,
    NodeStats,
    Operator,
    Placement,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    Topology,
    Traffic,
)
from streamscale.planning.balancing.keygroups import KeyGroupProblem


def test_mean_load_is_over_nodes_kept_and_capacity_weighted() -> None:
    p = KeyGroupProblem.build(
        ["a", "b", "c"], ["x", "y", "z"], [3, 3, 3], [0, 1, 2], removing=["z"], capacity=[1, 2, 9]
    )
    # weights normalised over N_keep: x 2/3, y 4/3; L̄ = 9 / 2 = 4.5
    assert p.mean_load == pytest.approx(4.5)
    assert p.capacity[:2].tolist() == pytest.approx([2 / 3, 4 / 3])
    assert p.node_loads().tolist() == [3, 3, 3]


@pytest.mark.parametrize(
    ("kwargs", "item"),
    [
        ({"removing": ["nope"]}, "node nope"),
        ({"removing": ["x", "y"]}, "nodes"),
        ({"assignment": [0, 5]}, "b"),
        ({"load": [1, -1]}, "b"),
        ({"traffic": [(0, 9, 1.0)]}, "traffic"),
    ],
)
def test_build_names_the_offending_item(kwargs: dict[str, object], item: str) -> None:
    args: dict[str, object] = {"load": [1, 1], "assignment": [0, 1]}
    args.update(kwargs)
    with pytest.raises(ModelError, match=item):
        KeyGroupProblem.build(["a", "b"], ["x", "y"], **args)  # type: ignore[arg-type]


def test_from_snapshot_reads_loads_costs_traffic_routing_and_marks() -> None:
    topo = Topology.build(
        "t",
        [
            Operator("s", kind="source", rate=1.0),
            Operator("a", key="k", instances=2, shards=2),
            Operator("b", key="k", instances=1, shards=2),
            Operator("out", kind="sink"),
        ],
        [Edge("s", "a", "key"), Edge("a", "b", "key"), Edge("b", "out")],
    )
    cluster = Cluster.build([Node("n1", cores=4), Node("n2", cores=8)])
    snap = Snapshot.build(
        shards=[ShardStats("a", 3, load=0.5, state_bytes=100, output_rate=7.0)],
        traffic=[Traffic("a", 3, "b", 1, 7.0)],
        nodes={"n2": NodeStats(marked_for_removal=True)},
    )
    plan = Plan(
        placement=Placement({"a[1]#0": "n2", "a[1]#1": "n1"}),
        routing=Routing({"a[1]": ("a[1]#1", "a[1]#0")}),
    )
    p = KeyGroupProblem.from_snapshot(snap, plan, topo, cluster)
    assert p.groups == ("a/0", "a/1", "a/2", "a/3", "b/0", "b/1")
    g = p.group_index["a/3"]
    assert p.load[g] == 0.5 and p.cost[g] == 100 and p.output_rate[g] == 7.0
    assert p.assignment[p.group_index["a/2"]] == 0 and p.assignment[g] == 1  # from routing
    assert p.removing.tolist() == [False, True]
    assert p.traffic.tolist() == [[g, p.group_index["b/1"], 7.0]]
    assert np.isclose(p.capacity[0], 1.0)  # weights normalised over N_keep
