from __future__ import annotations

from streamscale.model import Allocation, CoreMove, Placement, Plan, Routing


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
