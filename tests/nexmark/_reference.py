"""Every query in pandas, straight from the published SQL: the independent reference."""

from __future__ import annotations

import numpy as np
import pandas as pd

from streamscale.nexmark.generator import Events
from streamscale.nexmark.results import canonical

GAP_MS, TUMBLE_MS, HOP_MS, SLIDE_MS = 10_000, 10_000, 10_000, 2_000


def _ms(s: pd.Series) -> np.ndarray:
    return s.astype("datetime64[us, UTC]").astype(np.int64).to_numpy() // 1000


def _us(ms: np.ndarray) -> np.ndarray:
    return np.asarray(ms, dtype=np.int64) * 1000


def _winners(ev: Events) -> pd.DataFrame:
    """Bids within their auction's life, joined with the auction (Q4, Q6)."""
    a = ev.auction.rename(columns={"dateTime": "a_time"})
    m = a.merge(ev.bid, left_on="id", right_on="auction")
    return m[(m["dateTime"] >= m["a_time"]) & (m["dateTime"] <= m["expires"])]


def reference(q: str, ev: Events) -> pd.DataFrame:
    bid, person, auction = ev.bid, ev.person, ev.auction
    if q == "q0":
        out = bid[["auction", "bidder", "price", "dateTime", "extra"]]
    elif q == "q1":
        out = bid.assign(price=0.908 * bid["price"].astype(float))
    elif q == "q2":
        out = bid[bid["auction"] % 123 == 0]
    elif q == "q3":
        a = auction[auction["category"] == 10][["id", "seller"]]
        p = person[person["state"].isin(["OR", "ID", "CA"])]
        out = a.merge(p.rename(columns={"id": "pid"}), left_on="seller", right_on="pid")
    elif q == "q4":
        m = _winners(ev).groupby(["id", "category"])["price"].max().reset_index()
        out = m.groupby("category")["price"].mean().reset_index()
        out = out.rename(columns={"category": "id", "price": "final"})
    elif q == "q5":
        t = _ms(bid["dateTime"])
        first = (t // SLIDE_MS) * SLIDE_MS
        k = HOP_MS // SLIDE_MS
        starts = np.concatenate([first - i * SLIDE_MS for i in range(k)])
        w = pd.DataFrame({"start": starts, "auction": np.tile(bid["auction"].to_numpy(), k)})
        c = w.groupby(["start", "auction"]).size().rename("num").reset_index()
        c["maxn"] = c.groupby("start")["num"].transform("max")
        out = c[c["num"] >= c["maxn"]]
    elif q == "q6":
        m = _winners(ev).sort_values(["price", "dateTime"], ascending=[False, True])
        w = m.drop_duplicates("id").sort_values(["seller", "dateTime", "id"])
        w["avg_price"] = w.groupby("seller")["price"].rolling(11, min_periods=1).mean().to_numpy()
        out = w.groupby("seller").tail(1)
    elif q == "q7":
        t = _ms(bid["dateTime"])
        end = (t // TUMBLE_MS) * TUMBLE_MS + TUMBLE_MS
        mx = pd.DataFrame({"end": end, "maxprice": bid["price"]}).groupby("end").max()
        m = bid.assign(t=t).merge(mx.reset_index(), left_on="price", right_on="maxprice")
        out = m[(m["t"] >= m["end"] - TUMBLE_MS) & (m["t"] <= m["end"])]
    elif q == "q8":
        p = person.assign(stime=(_ms(person["dateTime"]) // TUMBLE_MS) * TUMBLE_MS)
        a = auction.assign(stime=(_ms(auction["dateTime"]) // TUMBLE_MS) * TUMBLE_MS)
        p = p[["id", "name", "stime"]].drop_duplicates()
        a = a[["seller", "stime"]].drop_duplicates()
        out = p.merge(a, left_on=["id", "stime"], right_on=["seller", "stime"])
        out = out.assign(stime=_us(out["stime"]))
    elif q == "q11":
        b = bid.assign(t=_ms(bid["dateTime"])).sort_values(["bidder", "t"], kind="stable")
        new = (b["bidder"].diff() != 0) | (b["t"].diff() > GAP_MS)
        b["session"] = new.cumsum()
        g = b.groupby("session").agg(bidder=("bidder", "first"), bid_count=("t", "size"),
                                     starttime=("t", "min"), last=("t", "max"))  # fmt: skip
        out = g.assign(starttime=_us(g["starttime"]), endtime=_us(g["last"] + GAP_MS))
    else:
        raise ValueError(q)
    return canonical(q, out.reset_index(drop=True))
