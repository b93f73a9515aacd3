from __future__ import annotations

import numpy as np

from streamscale.model import Allocation, CoreMove, Placement, Plan, Routing
from tests.planning import _reference as ref


def _plan(nodes: dict[str, str], table: tuple[str, ...], k: int) -> Plan:
    return Plan(Allocation({"e": k}), Placement(nodes), Routing({"e": table}))


def test_diff_counts_only_remote_bytes() -> None:
    old = _plan({"e#0": "n1", "e#1": "n1"}, ("e#0", "e#0", "e#1", "e#1"), 2)
    new = _plan({"e#0": "n1", "e#1": "n1", "e#2": "n2"}, ("e#0", "e#1", "e#1", "e#2"), 3)
    d = old.diff(new, shard_bytes=lambda inst, s: 100 * (s + 1))
    assert [(m.shard, m.src, m.dst, m.remote) for m in d.shard_moves] == [
        (1, "e#0", "e#1", False),
        (3, "e#1", "e#2", True),
    ]
    assert d.migration_bytes == 400
    assert d.core_moves == (CoreMove("e", "n2", 1),)
    assert old.diff(old).empty


def test_core_moves_match_a_scan_per_instance() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        plans = []
        for _ in range(2):
            nodes = {
                f"e{j}#{t}": f"n{int(rng.integers(0, 5))}"
                for j in range(int(rng.integers(0, 6)))
                for t in range(int(rng.integers(0, 5)))
            }
            nodes["loose"] = "n0"  # not a unit: its own instance
            cores = {f"e{j}": 1 for j in range(int(rng.integers(0, 7)))} | {"loose": 1}
            plans.append(Plan(Allocation(cores), Placement(nodes), Routing({})))
        old, new = plans
        assert old.diff(new).core_moves == ref.core_moves(old, new)
