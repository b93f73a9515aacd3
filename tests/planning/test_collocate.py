"""Traffic-aware routing (balancer ``collocate``) on hand-checked pools."""

from __future__ import annotations

import itertools

from streamscale.planning.balancing.collocate import route_pool

NODE = {"u0": "n0", "u1": "n0", "u2": "n1", "u3": "n1"}


def test_shards_follow_their_partner_within_theta() -> None:
    # four equal shards; partners of 0, 1 on n1 and of 2, 3 on n0; nothing routed yet
    res = route_pool(
        [1.0] * 4,
        ["u0", "u2"],
        NODE,
        preferred=["n1", "n1", "n0", "n0"],
        current=[None] * 4,
        theta=1.0,
    )
    assert res.units == ("u2", "u2", "u0", "u0")
    assert res.delta == 1.0 and res.moves == 0


def test_balance_wins_over_preference() -> None:
    # every partner on n1, but θ = 1 allows only two of four shards on its one unit
    res = route_pool(
        [1.0] * 4, ["u0", "u2"], NODE, preferred=["n1"] * 4, current=[None] * 4, theta=1.0
    )
    assert sorted(res.units) == ["u0", "u0", "u2", "u2"]
    assert res.delta == 1.0


def test_shards_stay_where_they_are_when_nothing_calls_them_away() -> None:
    current = ["u1", "u0", "u1", "u0"]
    res = route_pool(
        [0.5, 0.4, 0.3, 0.2], ["u0", "u1"], NODE, preferred=[None] * 4, current=current, theta=1.5
    )
    assert list(res.units) == current and res.moves == 0


def test_most_partners_local_matches_brute_force_on_small_pools() -> None:
    # unit loads within θ·mean; count shards on their partner's node; compare to every routing
    loads = [3.0, 2.0, 2.0, 1.0, 1.0, 1.0]
    units = ["u0", "u1", "u2", "u3"]
    pref = ["n1", "n1", "n0", "n0", "n1", None]
    theta = 1.5
    res = route_pool(loads, units, NODE, preferred=pref, current=[None] * 6, theta=theta)
    cap = theta * sum(loads) / len(units)

    def score(route: tuple[str, ...]) -> int:
        return sum(p is not None and NODE[u] == p for u, p in zip(route, pref, strict=True))

    best = 0
    for route in itertools.product(units, repeat=len(loads)):
        per = dict.fromkeys(units, 0.0)
        for u, x in zip(route, loads, strict=True):
            per[u] += x
        if max(per.values()) <= cap + 1e-9:
            best = max(best, score(route))
    per = dict.fromkeys(units, 0.0)
    for u, x in zip(res.units, loads, strict=True):
        per[u] += x
    assert max(per.values()) <= cap + 1e-9
    assert score(res.units) == best == 5
