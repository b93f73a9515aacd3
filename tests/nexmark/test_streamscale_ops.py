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


def _q7_rows(rows: list[tuple[int, int, int, bool]]) -> pd.DataFrame:
    """(auction, price, window end s, member) -> Q7's source rows (a bid on a window's
    end: not a member, null mprice)."""
    return pd.DataFrame(
        {
            "auction": [r[0] for r in rows],
            "bidder": 1,
            "price": [r[1] for r in rows],
            "dateTime": pd.to_datetime([1_000] * len(rows), unit="ms"),
            "extra": "x",
            "wend": pd.to_datetime([r[2] * 1000 for r in rows], unit="ms"),
            "mprice": [r[1] if r[3] else None for r in rows],
        }
    )


def test_q7_candidates_keep_only_bids_that_can_still_win() -> None:
    # window 10 s: members 9, 4, 9 and an edge bid 8 (below 9: dropped) and 12 (kept: it
    # only joins, its price does not count); window 20 s: an edge bid alone (no member
    # here: kept) and a member 2 (the chunk's highest there)
    rows = _q7_rows([(1, 9, 10, True), (2, 4, 10, True), (3, 9, 10, True), (4, 8, 10, False),
                     (5, 12, 10, False), (6, 1, 30, False), (7, 2, 20, True)])  # fmt: skip
    out = ops.q7_candidates(rows)
    assert out["auction"].tolist() == [1, 3, 5, 6, 7]
    assert out["mprice"].tolist() == [9, 9, pd.NA, pd.NA, 2]
    assert list(out.columns) == list(rows.columns)
    assert (out["dateTime"] == rows["dateTime"].iloc[0]).all()  # times pass unchanged


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
