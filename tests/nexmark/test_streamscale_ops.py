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


def test_q11_sessions_across_batches() -> None:
    state: dict = {}
    a = ops.q11_sessions(_bids([(1, 1, 1, 0), (1, 1, 1, 5000), (1, 2, 1, 7000)]), state)
    # 10 s after the last event still joins the session (Flink's windows intersect there)
    b = ops.q11_sessions(_bids([(1, 1, 1, 15_000), (1, 1, 1, 26_000)]), state)
    final = pd.concat([a, b]).drop_duplicates(["bidder", "starttime"], keep="last")
    got = sorted(map(tuple, final.to_numpy().tolist()))
    assert got == [
        (1, 1, 26_000_000, 36_000_000),
        (1, 3, 0, 25_000_000),
        (2, 1, 7_000_000, 17_000_000),
    ]


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
