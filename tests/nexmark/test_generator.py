"""The Nexmark generator: proportions, ids, time along a schedule, determinism, splits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from streamscale.errors import StreamscaleError
from streamscale.nexmark.generator import (
    AUCTION_COLUMNS,
    BID_COLUMNS,
    PERSON_COLUMNS,
    GeneratorConfig,
    event_times_ms,
    generate,
    parse_schedule,
    split_ranges,
)

CFG = GeneratorConfig.constant(1000, seed=7)


def test_columns_and_proportions() -> None:
    ev = generate(CFG, 0, 5000)
    assert tuple(ev.person.columns) == PERSON_COLUMNS
    assert tuple(ev.auction.columns) == AUCTION_COLUMNS
    assert tuple(ev.bid.columns) == BID_COLUMNS
    assert (len(ev.person), len(ev.auction), len(ev.bid)) == (100, 300, 4600)
    assert str(ev.bid["dateTime"].dtype) == "datetime64[us, UTC]"


def test_ids_follow_the_published_formulas() -> None:
    ev = generate(CFG, 0, 100)
    # events 0 and 50 are persons 1000 and 1001; 1-3 and 51-53 auctions 1000..1005
    assert ev.person["id"].tolist() == [1000, 1001]
    assert ev.auction["id"].tolist() == [1000, 1001, 1002, 1003, 1004, 1005]
    # a bid's auction is never beyond the last auction + the lead of 10, its bidder
    # never beyond the last person + 10
    big = generate(CFG, 0, 20_000)
    n = np.arange(20_000)
    bid_n = n[n % 50 >= 4]
    last_auction = (bid_n // 50) * 3 + 2 + 1000
    last_person = bid_n // 50 + 1000
    assert (big.bid["auction"].to_numpy() <= last_auction + 10).all()
    assert (big.bid["bidder"].to_numpy() <= last_person + 10).all()
    assert (big.auction["expires"] > big.auction["dateTime"]).all()
    assert big.auction["category"].between(10, 14).all()
    assert (big.auction["reserve"] >= big.auction["initialBid"]).all()


def test_hot_auctions_and_bidders() -> None:
    bid = generate(CFG, 0, 50_000).bid
    # hot auction: the first of the last batch of 100 (ids 1000, 1100, ...): about half
    hot_a = ((bid["auction"] - 1000) % 100 == 0).mean()
    assert 0.45 < hot_a < 0.58
    # hot bidder: the second person of the last batch of 100: about 3/4
    hot_b = ((bid["bidder"] - 1000) % 100 == 1).mean()
    assert 0.70 < hot_b < 0.80
    # prices: round(10^(6u) * 100), so the median is near 10^3 * 100
    assert 50_000 < bid["price"].median() < 200_000
    assert bid["price"].min() >= 100


def test_time_along_a_schedule() -> None:
    cfg = GeneratorConfig(schedule=((2.0, 100.0), (1.0, 1000.0)), base_time_ms=0)
    t = event_times_ms(cfg, np.array([0, 1, 199, 200, 201, 1199, 1200, 1201]))
    # 100/s for 2 s (events 0..199, 10 ms apart), then 1000/s (1 ms apart), holding after
    assert t.tolist() == [0, 10, 1990, 2000, 2001, 2999, 3000, 3001]
    # a constant rate: baseTime + floor(n * 10^6 / rate) us in ms (timestampForEvent)
    c = GeneratorConfig.constant(3.0, base_time_ms=5)
    assert event_times_ms(c, np.array([0, 1, 2, 3])).tolist() == [5, 338, 671, 1005]


def test_deterministic_per_seed_and_split_union_equals_whole() -> None:
    whole = generate(CFG, 0, 3000)
    again = generate(CFG, 0, 3000)
    other = generate(GeneratorConfig.constant(1000, seed=8), 0, 3000)
    pd.testing.assert_frame_equal(whole.bid, again.bid)
    assert not whole.bid["price"].equals(other.bid["price"])
    ranges = split_ranges(3000, 4)
    assert ranges == [(0, 750), (750, 1500), (1500, 2250), (2250, 3000)]
    parts = [generate(CFG, lo, hi) for lo, hi in ranges]
    for table in ("person", "auction", "bid"):
        got = pd.concat([getattr(p, table) for p in parts], ignore_index=True)
        pd.testing.assert_frame_equal(got, getattr(whole, table))
    # disjoint slices: no event twice
    assert sum(len(p.bid) for p in parts) == len(whole.bid)


def test_bad_configs_and_schedules() -> None:
    with pytest.raises(StreamscaleError):
        GeneratorConfig(schedule=((1.0, 0.0),))
    with pytest.raises(StreamscaleError):
        parse_schedule("10-200")
    assert parse_schedule("30:1000,60:4000") == ((30.0, 1000.0), (60.0, 4000.0))
    with pytest.raises(StreamscaleError):
        split_ranges(10, 0)
