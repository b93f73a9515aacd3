"""The keyed functions of the streamscale engine on hand-checked batches (no Spark)."""

from __future__ import annotations

import pandas as pd

from streamscale.nexmark import streamscale_ops as ops


def _bids(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """(auction, bidder, price, t ms) -> bid rows with times in µs."""
    return pd.DataFrame(
        {
            "auction": [r[0] for r in rows],
            "bidder": [r[1] for r in rows],
            "price": [r[2] for r in rows],
            "dateTime": [r[3] * 1000 for r in rows],
            "extra": ["x"] * len(rows),
        }
    )


def _last_per(frames: list[pd.DataFrame | None], key: str) -> pd.DataFrame:
    """The rows of each key's last emission (the ``replace`` final result)."""
    seen: dict[int, pd.DataFrame] = {}
    for f in frames:
        if f is not None:
            for k, g in f.groupby(key):
                seen[int(k)] = g
    return pd.concat(seen.values(), ignore_index=True)


def test_q7_bid_on_a_window_edge_matches_both_windows() -> None:
    # window (0, 10 s]: max 5 from the bid at 1 s; the bid at exactly 10 s (window
    # [10 s, 20 s)) also lies BETWEEN 0 AND 10 s and has price 5: it joins both windows
    state: dict = {}
    b1 = ops.q7_highest(ops.q7_windows(_bids([(1, 7, 5, 1000), (2, 7, 3, 2000)])), state)
    b2 = ops.q7_highest(ops.q7_windows(_bids([(3, 8, 5, 10_000)])), state)
    got = _last_per([b1, b2], "wend").sort_values(["wend", "dateTime"])
    assert got[["wend", "auction", "dateTime"]].values.tolist() == [
        [10_000, 1, 1_000_000],
        [10_000, 3, 10_000_000],
        [20_000, 3, 10_000_000],
    ]


def test_q7_combiner_drops_only_bids_that_cannot_win() -> None:
    w = ops.q7_windows(_bids([(1, 1, 9, 100), (2, 1, 4, 200), (3, 1, 9, 300), (4, 1, 2, 10_000)]))
    # window 10 s keeps its two 9s; the edge bid (price 2 < 9 of window 10 s) is dropped
    # there but kept as the only member of window 20 s
    assert sorted(zip(w["wend"], w["auction"], w["member"], strict=True)) == [
        (10_000, 1, True), (10_000, 3, True), (20_000, 4, True)
    ]  # fmt: skip


def test_q5_counts_add_up_over_chunks_and_ties_all_win() -> None:
    state: dict = {}
    # auction 1 twice at 1 s, auction 2 twice at 1.5 s and 3 s: window [-8 s, 2 s) holds
    # 1, 1, 2 and [0, 10 s) holds all four: 1 and 2 tie with 2 bids each
    ops.q5_hot_items(ops.q5_windows(_bids([(1, 1, 1, 1000), (2, 1, 1, 1500)])), state)
    out = ops.q5_hot_items(ops.q5_windows(_bids([(1, 1, 1, 1000), (2, 1, 1, 3000)])), state)
    top = out[out["wstart"] == 0].sort_values("auction")
    assert top[["auction", "num"]].values.tolist() == [[1, 2], [2, 2]]
    early = out[out["wstart"] == -8000]
    assert early[["auction", "num"]].values.tolist() == [[1, 2]]


def _counts(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    """(window start ms, auction, count) -> stage 1's update rows (timestamps)."""
    return pd.DataFrame(
        {
            "wstart": pd.to_datetime([r[0] for r in rows], unit="ms", utc=True),
            "auction": [r[1] for r in rows],
            "num": [r[2] for r in rows],
        }
    )


def test_q5_top_keeps_ties_and_lets_a_grown_count_overtake() -> None:
    state: dict = {}
    a = ops.q5_top(_counts([(0, 1, 2), (0, 2, 2), (0, 3, 1), (2000, 4, 1)]), state)
    assert a is not None
    assert sorted(map(tuple, a.to_numpy().tolist())) == [
        (0, 1, 2), (0, 2, 2), (2_000_000, 4, 1)
    ]  # fmt: skip
    # auction 3 grows past the tie: the window's emission holds it alone; window 2 s is
    # untouched and not emitted
    b = ops.q5_top(_counts([(0, 3, 3)]), state)
    assert b is not None and b.to_numpy().tolist() == [[0, 3, 3]]
    # auction 1 catches up with 3 (its new count comes in a later batch): both are top
    c = ops.q5_top(_counts([(0, 1, 3)]), state)
    assert c is not None and sorted(c["auction"].tolist()) == [1, 3]


def _q4_rows(auctions: list[tuple[int, int, int, int]], bids: list[tuple[int, int, int]]):
    """auctions (id, start ms, expires ms, category), bids (auction, price, t ms)."""
    a = pd.DataFrame({"event_type": 1, "key": [r[0] for r in auctions],
                      "t": [r[1] * 1000 for r in auctions],
                      "expires": [r[2] * 1000 for r in auctions],
                      "category": [r[3] for r in auctions], "price": 0})  # fmt: skip
    b = pd.DataFrame({"event_type": 2, "key": [r[0] for r in bids], "price": [r[1] for r in bids],
                      "t": [r[2] * 1000 for r in bids], "expires": 0, "category": 0})  # fmt: skip
    return pd.concat([a, b], ignore_index=True)


def test_q4_deltas_sum_to_the_average_of_the_maxima() -> None:
    state: dict = {}
    # auction 1 (category 7): bids 5, then 9; auction 2 (category 7): 4, a bid after its
    # expiry (100) is not counted; auction 3's bid comes before the auction itself
    b1 = ops.q4_max_delta(_q4_rows([(1, 0, 50, 7), (2, 0, 20, 7)],
                                   [(1, 5, 10), (2, 4, 10), (3, 8, 30)]), state)  # fmt: skip
    b2 = ops.q4_max_delta(_q4_rows([(3, 0, 60, 8)], [(1, 9, 40), (2, 100, 30)]), state)
    deltas = pd.concat([b1, b2], ignore_index=True)
    sums = deltas.groupby("category")[["dsum", "dcount"]].sum()
    avg = ops.q4_average(sums.rename(columns={"dsum": "total", "dcount": "auctions"}).reset_index())
    assert avg.values.tolist() == [[7, (9 + 4) / 2], [8, 8.0]]


def test_q8_keeps_groups_with_a_person_and_an_auction() -> None:
    groups = pd.DataFrame({
        "stime": pd.to_datetime([0, 10_000, 10_000], unit="ms", utc=True),
        "key": [1, 1, 2], "p": [1, 1, None], "a": [1, None, 1], "name": ["ann", "ann", None],
    })  # fmt: skip
    out = ops.q8_new_sellers(groups)
    assert out.values.tolist() == [[1, "ann", 0]]
