"""The operators of Nexmark Q0-Q8 and Q11 on streamscale: stateless and keyed functions.

Stateless operators are ``fn(pandas.DataFrame) -> pandas.DataFrame`` (``map_batches``);
keyed operators are ``fn(rows, state) -> pandas.DataFrame``: one shard's rows of a
batch (any number of keys) and that shard's state dict, which streamscale versions,
moves and recovers with the shard (:mod:`streamscale.runtime.spark.keyed`). Each
works on the whole shard at once (numpy, pandas) and touches Python objects only per
key, window or session, never per row where it can be avoided.

Times are epoch microseconds in and out (``t`` columns); window arithmetic is in ms,
aligned to the epoch. Without a watermark reaching the keyed function, a window or
session is never closed: each batch emits the current value of every window it
touched and the last emission per window is the final one (``results.finalize``).
Where a watermark will plug in is marked ``WATERMARK`` (closing and evicting windows
below it, emitting each once).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "GAP_MS",
    "HOP_MS",
    "SLIDE_MS",
    "TUMBLE_MS",
    "q0_project",
    "q1_euro",
    "q2_select",
    "q3_join",
    "q4_category_avg",
    "q4_max_per_auction",
    "q5_hot_items",
    "q5_windows",
    "q6_avg_per_seller",
    "q6_winning_bid",
    "q7_highest",
    "q7_windows",
    "q8_new_sellers",
    "q11_sessions",
]

GAP_MS, TUMBLE_MS, HOP_MS, SLIDE_MS = 10_000, 10_000, 10_000, 2_000
_I64 = np.int64


def _col(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].to_numpy(dtype=_I64)


# ---------------------------------------------------------------- Q0-Q2: stateless


def q0_project(df: pd.DataFrame) -> pd.DataFrame:
    """Q0, pass-through: the bid's published columns."""
    return df[["auction", "bidder", "price", "dateTime", "extra"]]


def q1_euro(df: pd.DataFrame) -> pd.DataFrame:
    """Q1, currency conversion: ``price`` times 0.908 as a double."""
    out = df[["auction", "bidder", "price", "dateTime", "extra"]].copy()
    out["price"] = 0.908 * df["price"].to_numpy(dtype=np.float64)
    return out


def q2_select(df: pd.DataFrame) -> pd.DataFrame:
    """Q2, selection: bids on auctions whose id is a multiple of 123."""
    keep = df["auction"].to_numpy(dtype=_I64) % 123 == 0
    return df.loc[keep, ["auction", "price"]].reset_index(drop=True)


# ---------------------------------------------------------------- Q3: join


def q3_join(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q3, local item suggestion: persons in OR, ID or CA joined with their auctions of
    category 10, keyed by person id (= seller). A person's id is unique (Nexmark's
    primary key), so an auction waits only until its seller arrives."""
    persons: dict[int, tuple[str, str, str] | None] = state.setdefault("p", {})
    waiting: dict[int, list[int]] = state.setdefault("a", {})
    kind = _col(rows, "event_type")
    out: list[tuple[str, str, str, int]] = []
    p = rows[kind == 0]
    for pid, name, city, st in zip(
        _col(p, "key").tolist(), p["name"], p["city"], p["state"], strict=True
    ):
        ok = st in ("OR", "ID", "CA")
        persons[pid] = (name, city, st) if ok else None
        for aid in waiting.pop(pid, []):
            if ok:
                out.append((name, city, st, aid))
    a = rows[(kind == 1)]
    a = a[a["category"].to_numpy(dtype=np.float64) == 10]
    for seller, aid in zip(_col(a, "key").tolist(), _col(a, "aid").tolist(), strict=True):
        if seller in persons:
            hit = persons[seller]
            if hit is not None:
                out.append((*hit, aid))
        else:
            waiting.setdefault(seller, []).append(aid)
    if not out:
        return None
    return pd.DataFrame(out, columns=["name", "city", "state", "id"])


# ---------------------------------------------------------------- Q4, Q6: winning bids


def _auction_bids(rows: pd.DataFrame, state: dict[Any, Any], extra: str) -> tuple[
    dict[int, tuple[int, int, int]], np.ndarray, np.ndarray, np.ndarray
]:  # fmt: skip
    """Register the batch's auctions (id -> (start ms, expires ms, ``extra``)) and
    return the auction table and the bids (auction, price, t ms) now joinable with it,
    pending ones included; bids of auctions not seen yet wait in the state."""
    auctions: dict[int, tuple[int, int, int]] = state.setdefault("auc", {})
    pending: dict[int, list[tuple[int, int]]] = state.setdefault("pend", {})
    kind = _col(rows, "event_type")
    a = rows[kind == 1]
    for k, t, e, x in zip(
        _col(a, "key").tolist(), (_col(a, "t") // 1000).tolist(),
        (_col(a, "expires") // 1000).tolist(), _col(a, extra).tolist(), strict=True,
    ):  # fmt: skip
        auctions[k] = (t, e, x)
    b = rows[kind == 2]
    ids, price, t = _col(b, "key"), _col(b, "price"), _col(b, "t") // 1000
    known = np.fromiter((k in auctions for k in ids.tolist()), dtype=bool, count=len(ids))
    for k, p, tt in zip(ids[~known].tolist(), price[~known].tolist(), t[~known].tolist(),
                        strict=True):  # fmt: skip
        pending.setdefault(k, []).append((p, tt))
    ids, price, t = ids[known], price[known], t[known]
    back = [k for k in list(pending) if k in auctions]
    if back:
        old = [(k, p, tt) for k in back for p, tt in pending.pop(k)]
        ids = np.concatenate([ids, np.array([o[0] for o in old], dtype=_I64)])
        price = np.concatenate([price, np.array([o[1] for o in old], dtype=_I64)])
        t = np.concatenate([t, np.array([o[2] for o in old], dtype=_I64)])
    if len(ids):
        uniq, inv = np.unique(ids, return_inverse=True)
        info = np.array([auctions[k][:2] for k in uniq.tolist()], dtype=_I64).reshape(-1, 2)
        valid = (t >= info[inv, 0]) & (t <= info[inv, 1])
        ids, price, t = ids[valid], price[valid], t[valid]
    return auctions, ids, price, t


def q4_max_per_auction(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q4 stage 1, keyed by auction id: the highest bid within the auction's life
    (``B.dateTime BETWEEN A.dateTime AND A.expires``); emits each auction whose
    maximum rose, with its category."""
    auctions, ids, price, _ = _auction_bids(rows, state, "category")
    best: dict[int, int] = state.setdefault("max", {})
    if not len(ids):
        return None
    g = pd.Series(price).groupby(ids).max()
    changed = []
    for k, p in zip(g.index.tolist(), g.tolist(), strict=True):
        if p > best.get(k, -1):
            best[k] = p
            changed.append((auctions[k][2], k, p))
    if not changed:
        return None
    return pd.DataFrame(changed, columns=["category", "auction", "final"])


def q4_category_avg(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Q4 stage 2, keyed by category: the average of its auctions' highest bids
    (an auction's newer maximum replaces its older one)."""
    best: dict[int, int] = state.setdefault("max", {})
    sums: dict[int, list[int]] = state.setdefault("sum", {})
    for c, a, p in zip(_col(rows, "category").tolist(), _col(rows, "auction").tolist(),
                       _col(rows, "final").tolist(), strict=True):  # fmt: skip
        s = sums.setdefault(c, [0, 0])
        old = best.get(a)
        s[0] += p - (old or 0)
        s[1] += old is None
        best[a] = p
    cats = sorted(set(_col(rows, "category").tolist()))
    return pd.DataFrame({"id": cats, "final": [sums[c][0] / sums[c][1] for c in cats]})


def q6_winning_bid(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q6 stage 1, keyed by auction id: the winning bid (highest price, then earliest)
    within the auction's life; emits each auction whose winner changed, with its seller."""
    auctions, ids, price, t = _auction_bids(rows, state, "seller")
    win: dict[int, tuple[int, int]] = state.setdefault("win", {})
    if not len(ids):
        return None
    order = np.lexsort((t, -price, ids))  # per auction: highest price, then earliest
    ids, price, t = ids[order], price[order], t[order]
    first = np.concatenate([[True], ids[1:] != ids[:-1]])
    changed = []
    for k, p, tt in zip(ids[first].tolist(), price[first].tolist(), t[first].tolist(),
                        strict=True):  # fmt: skip
        old = win.get(k)
        if old is None or p > old[0] or (p == old[0] and tt < old[1]):
            win[k] = (p, tt)
            changed.append((auctions[k][2], k, p, tt))
    if not changed:
        return None
    return pd.DataFrame(changed, columns=["seller", "auction", "price", "t"])


def q6_avg_per_seller(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Q6 stage 2, keyed by seller: the average winning price of the seller's last 11
    auctions (``ROWS BETWEEN 10 PRECEDING AND CURRENT ROW``), ordered by the winning
    bid's time then auction id; emits each seller touched."""
    wins: dict[int, dict[int, tuple[int, int]]] = state.setdefault("w", {})
    for s, a, p, t in zip(_col(rows, "seller").tolist(), _col(rows, "auction").tolist(),
                          _col(rows, "price").tolist(), _col(rows, "t").tolist(),
                          strict=True):  # fmt: skip
        wins.setdefault(s, {})[a] = (t, p)
    sellers = sorted(set(_col(rows, "seller").tolist()))
    avgs = []
    for s in sellers:
        last = sorted((t, a, p) for a, (t, p) in wins[s].items())[-11:]
        avgs.append(sum(p for _, _, p in last) / len(last))
    return pd.DataFrame({"seller": sellers, "avg_price": avgs})


# ---------------------------------------------------------------- Q5, Q7: windows


def q5_windows(df: pd.DataFrame) -> pd.DataFrame:
    """Q5's hop windows (10 s every 2 s): bids per (window start, auction) in this
    chunk of the batch, each bid counted once per window holding it (a combiner: the
    keyed stage adds these partial counts, so far fewer rows cross the shuffle)."""
    t = df["dateTime"].to_numpy(dtype=_I64) // 1000
    first = (t // SLIDE_MS) * SLIDE_MS
    k = HOP_MS // SLIDE_MS
    w = pd.DataFrame(
        {
            "wstart": np.concatenate([first - i * SLIDE_MS for i in range(k)]),
            "auction": np.tile(df["auction"].to_numpy(dtype=_I64), k),
        }
    )
    return w.groupby(["wstart", "auction"], sort=False).size().rename("n").reset_index()


def q5_hot_items(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q5, hot items, keyed by window start: bids per auction in the window and the
    auctions with the most; emits all of a touched window's hottest auctions.

    WATERMARK: a window whose end is below it is final: emit once and drop it."""
    windows: dict[int, dict[int, int]] = state.setdefault("w", {})
    g = rows.groupby(["wstart", "auction"], sort=False)["n"].sum()
    for (w, a), n in zip(g.index.tolist(), g.tolist(), strict=True):
        counts = windows.setdefault(w, {})
        counts[a] = counts.get(a, 0) + n
    out = []
    for w in sorted({w for w, _ in g.index.tolist()}):
        counts = windows[w]
        top = max(counts.values())
        out += [(w, a, n) for a, n in counts.items() if n == top]
    if not out:
        return None
    return pd.DataFrame(out, columns=["wstart", "auction", "num"])


def q7_windows(df: pd.DataFrame) -> pd.DataFrame:
    """Q7's tumbling windows (10 s): each bid with the end of its window (a member:
    its price counts for the maximum) and, when it lies exactly on a window's end, with
    that window too (``B.dateTime BETWEEN end - 10 s AND end`` holds there as well).

    A combiner: a bid priced below the highest member of its window in this chunk can
    never equal the window's maximum, so only the chunk's candidates cross the shuffle."""
    t = df["dateTime"].to_numpy(dtype=_I64) // 1000
    own = df.assign(wend=(t // TUMBLE_MS) * TUMBLE_MS + TUMBLE_MS, member=True)
    on_edge = t % TUMBLE_MS == 0
    edge = df[on_edge].assign(wend=t[on_edge], member=False)
    cols = ["wend", "member", "auction", "bidder", "price", "dateTime", "extra"]
    both = pd.concat([own[cols], edge[cols]], ignore_index=True)
    top = own.groupby("wend")["price"].max()
    local = both["wend"].map(top).fillna(-1).to_numpy(dtype=np.float64)
    price = both["price"].to_numpy(dtype=np.float64)
    keep = np.where(both["member"].to_numpy(dtype=bool), price == local, price >= local)
    return both[keep].reset_index(drop=True)


def q7_highest(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q7, highest bid, keyed by window end: the window's maximum price and the bids at
    that price; keeps only the bids that can still match; emits a touched window's bids.

    WATERMARK: a window whose end is below it is final: emit once and drop it."""
    windows: dict[int, tuple[int, pd.DataFrame]] = state.setdefault("w", {})
    out = []
    cols = ["auction", "bidder", "price", "dateTime", "extra"]
    for w, grp in rows.groupby("wend", sort=True):
        top, kept = windows.get(int(w), (-1, None))
        members = grp[grp["member"].to_numpy(dtype=bool)]
        if len(members):
            top = max(top, int(members["price"].max()))
        both = grp if kept is None else pd.concat([kept, grp], ignore_index=True)
        price = both["price"].to_numpy(dtype=_I64)
        keep = (price == top) | (~both["member"].to_numpy(dtype=bool) & (price > top))
        kept = both[keep].reset_index(drop=True)
        windows[int(w)] = (top, kept)
        hit = kept[kept["price"].to_numpy(dtype=_I64) == top]
        if top >= 0 and len(hit):
            out.append(hit[cols].assign(wend=int(w)))
    if not out:
        return None
    return pd.concat(out, ignore_index=True)


# ---------------------------------------------------------------- Q8: windowed join


def q8_new_sellers(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q8, monitor new users, keyed by person id (= seller): persons who opened an
    auction in the 10 s tumbling window they joined in; emits each (person, window)
    once.

    WATERMARK: windows below it can be dropped from the state."""
    persons: dict[int, dict[int, str]] = state.setdefault("p", {})
    sold: dict[int, set[int]] = state.setdefault("a", {})
    done: set[tuple[int, int]] = state.setdefault("done", set())
    kind = _col(rows, "event_type")
    w = (_col(rows, "t") // 1000 // TUMBLE_MS) * TUMBLE_MS
    keys = _col(rows, "key")
    out = []
    for i in np.flatnonzero(kind == 0).tolist():
        persons.setdefault(int(keys[i]), {})[int(w[i])] = rows["name"].iat[i]
    for i in np.flatnonzero(kind == 1).tolist():
        sold.setdefault(int(keys[i]), set()).add(int(w[i]))
    for k in set(keys.tolist()):
        for win, name in persons.get(k, {}).items():
            if win in sold.get(k, ()) and (k, win) not in done:
                done.add((k, win))
                out.append((k, name, win * 1000))
    if not out:
        return None
    return pd.DataFrame(out, columns=["id", "name", "stime"])


# ---------------------------------------------------------------- Q11: sessions


def q11_sessions(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Q11, user sessions, keyed by bidder: bids per session (a gap over 10 s starts a
    new one; two events 10 s apart share one, as Flink's windows intersect there);
    a session is ``[first event, last event + 10 s)``; emits every session the batch
    touched. The state keeps each bidder's latest session: a bidder's events come in
    event-time order (the generator's files are).

    WATERMARK: a session whose end is below it is final: emit once and drop it."""
    last: dict[int, tuple[int, int, int]] = state.setdefault("s", {})
    bidder, t = _col(rows, "bidder"), _col(rows, "dateTime") // 1000
    order = np.lexsort((t, bidder))
    bidder, t = bidder[order], t[order]
    first = np.concatenate([[True], bidder[1:] != bidder[:-1]])
    new = first | np.concatenate([[True], np.diff(t) > GAP_MS])
    sid = np.cumsum(new) - 1
    n = int(sid[-1]) + 1 if len(sid) else 0
    s_bidder = bidder[new]
    s_start = t[new]
    s_last = np.maximum.reduceat(t, np.flatnonzero(new)) if n else t[:0]
    s_count = np.bincount(sid, minlength=n).astype(_I64)
    firsts = np.flatnonzero(first)
    heads = sid[firsts]  # each bidder's first session of the batch
    for h, b in zip(heads.tolist(), s_bidder[heads].tolist(), strict=True):
        prev = last.get(b)
        if prev is not None and s_start[h] - prev[1] <= GAP_MS:
            s_start[h] = min(prev[0], s_start[h])
            s_last[h] = max(prev[1], s_last[h])
            s_count[h] += prev[2]
    tails = np.concatenate([heads[1:] - 1, [n - 1]]) if n else heads
    for i, b in zip(tails.tolist(), s_bidder[tails].tolist(), strict=True):
        last[b] = (int(s_start[i]), int(s_last[i]), int(s_count[i]))
    return pd.DataFrame(
        {
            "bidder": s_bidder,
            "bid_count": s_count,
            "starttime": s_start * 1000,
            "endtime": (s_last + GAP_MS) * 1000,
        }
    )
