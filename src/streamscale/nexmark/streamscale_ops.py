"""The operators of Nexmark Q0-Q8 on streamscale: stateless and keyed functions.

Stateless operators are ``fn(pandas.DataFrame) -> pandas.DataFrame`` (``map_batches``);
keyed operators are ``fn(rows, state) -> pandas.DataFrame``: one shard's rows of a
batch (any number of keys) and that shard's state dict, which streamscale versions,
moves and recovers with the shard (:mod:`streamscale.runtime.spark.keyed.keyed`). Each
works on the whole shard at once (numpy, pandas) and touches Python objects only per
key, window or session, never per row where it can be avoided. The aggregations of
Q4, Q5, Q8 and Q11 are declarative operators (``key_by(...).agg`` / ``.window(...)
.agg``, :mod:`streamscale.runtime.spark.keyed.agg`) built in
:mod:`~streamscale.nexmark.streamscale_engine`; the functions here are the parts
around them (Q4's join, Q7's combiner, Q8's selection).

Times are epoch microseconds in and out (``t`` columns); window arithmetic is in ms,
aligned to the epoch. Without a watermark reaching the keyed function, a window or
session is never closed: each batch emits the current value of every window it
touched and the last emission per window is the final one (``results.finalize``).
Where a watermark will plug in is marked ``WATERMARK`` (closing and evicting windows
below it, emitting each once). ``q5_windows`` and ``q5_hot_items`` are Q5 as keyed
functions, for a topology file (``examples/nexmark-q5.yaml``); the engine runs Q5 on
declarative operators.
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
    "q3_auctions",
    "q3_persons",
    "q3_project",
    "q4_average",
    "q4_max_delta",
    "q5_hot_items",
    "q5_windows",
    "q6_avg_per_seller",
    "q6_winning_bid",
    "q7_candidates",
    "q8_new_sellers",
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


def q3_persons(df: pd.DataFrame) -> pd.DataFrame:
    """Q3's left side: persons in OR, ID or CA (``key`` is the person's id)."""
    p = df[(df["event_type"].to_numpy() == 0) & df["state"].isin(["OR", "ID", "CA"]).to_numpy()]
    return p[["key", "name", "city", "state"]].reset_index(drop=True)


def q3_auctions(df: pd.DataFrame) -> pd.DataFrame:
    """Q3's right side: auctions of category 10 (``key`` is the seller, ``id`` the auction)."""
    a = df[(df["event_type"].to_numpy() == 1) & (df["category"].to_numpy(dtype=np.float64) == 10)]
    return a[["key", "aid"]].rename(columns={"aid": "id"}).reset_index(drop=True)


def q3_project(df: pd.DataFrame) -> pd.DataFrame:
    """Q3's result columns of the persons ⋈ auctions join."""
    return df[["name", "city", "state", "id"]]


q3_persons.output_schema = "key bigint, name string, city string, state string"  # type: ignore[attr-defined]
q3_auctions.output_schema = "key bigint, id bigint"  # type: ignore[attr-defined]
q3_project.output_schema = "name string, city string, state string, id bigint"  # type: ignore[attr-defined]


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


def q4_max_delta(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame | None:
    """Q4 stage 1, keyed by auction id: the highest bid within the auction's life
    (``B.dateTime BETWEEN A.dateTime AND A.expires``); for each auction whose maximum
    rose, the change to its category's sum of maxima (``dsum``: new minus old maximum)
    and count (``dcount``: 1 for the auction's first valid bid, else 0), so that the
    category's average is a sum and a count (:func:`q4_average`)."""
    auctions, ids, price, _ = _auction_bids(rows, state, "category")
    best: dict[int, int] = state.setdefault("max", {})
    if not len(ids):
        return None
    g = pd.Series(price).groupby(ids).max()
    changed = []
    for k, p in zip(g.index.tolist(), g.tolist(), strict=True):
        old = best.get(k)
        if old is None or p > old:
            best[k] = p
            changed.append((auctions[k][2], p - (old or 0), int(old is None)))
    if not changed:
        return None
    return pd.DataFrame(changed, columns=["category", "dsum", "dcount"])


q4_max_delta.output_schema = "category BIGINT, dsum BIGINT, dcount BIGINT"  # type: ignore[attr-defined]


def q4_average(df: pd.DataFrame) -> pd.DataFrame:
    """Q4 stage 3: a category's average of its auctions' maxima, from the sums of
    :func:`q4_max_delta`'s changes (stage 2, a declarative ``sum`` per category)."""
    total = df["total"].to_numpy(dtype=np.float64)
    n = df["auctions"].to_numpy(dtype=np.float64)
    return pd.DataFrame({"id": df["category"].to_numpy(dtype=_I64), "final": total / n})


q4_average.output_schema = "id BIGINT, final DOUBLE"  # type: ignore[attr-defined]


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


q6_winning_bid.output_schema = "seller BIGINT, auction BIGINT, price BIGINT, t BIGINT"  # type: ignore[attr-defined]


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


q6_avg_per_seller.output_schema = "seller BIGINT, avg_price DOUBLE"  # type: ignore[attr-defined]


# ---------------------------------------------------------------- Q5, Q7: windows (topology file, combiner)


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


def _micros(s: pd.Series) -> np.ndarray:
    """Epoch microseconds of a timestamp column (tz-aware or naive UTC)."""
    if pd.api.types.is_datetime64_any_dtype(s):
        if getattr(s.dt, "tz", None) is None:
            s = s.dt.tz_localize("UTC")
        return s.astype("datetime64[us, UTC]").astype(np.int64).to_numpy()
    return s.to_numpy(dtype=_I64)


def q7_candidates(df: pd.DataFrame) -> pd.DataFrame:
    """Q7's combiner: the bids of this chunk of the batch that can still be their
    window's highest. A row is a bid with its window's end ``wend`` and ``mprice`` (its
    price when it is in that window; null for a bid exactly on the window's end, which
    ``B.dateTime BETWEEN end - 10 s AND end`` joins but which is not in the window). A
    member priced below the highest member of its window in this chunk can never be the
    window's maximum, nor an edge bid priced below it; every other row is kept, with
    its columns unchanged (a filter: times keep their type and zone)."""
    member = df["mprice"].notna().to_numpy()
    price = df["price"].to_numpy(dtype=np.float64)
    top = df.loc[member].groupby("wend")["price"].max()
    local = df["wend"].map(top).to_numpy(dtype=np.float64)  # NaN: no member in the chunk
    keep = np.where(member, price == local, ~(price < local))
    out = df[keep].reset_index(drop=True)
    out["mprice"] = out["mprice"].astype("Int64")
    return out


q7_candidates.output_schema = (  # type: ignore[attr-defined]
    "auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP, extra STRING, "
    "wend TIMESTAMP, mprice BIGINT"
)


# ---------------------------------------------------------------- Q8: windowed join


def q8_new_sellers(df: pd.DataFrame) -> pd.DataFrame:
    """Q8 stage 2: the (person id, 10 s window) groups of stage 1 (a declarative
    windowed aggregation of the person and auction streams keyed by person id =
    seller: ``max(p)``, ``max(a)``, the person's name) that hold both a new person and
    an auction of theirs: the published join of the two windowed aggregations on
    (id, window). Window start as epoch µs."""
    both = (df["p"].to_numpy(dtype=np.float64) == 1) & (df["a"].to_numpy(dtype=np.float64) == 1)
    hit = df[both]
    return pd.DataFrame(
        {
            "id": hit["key"].to_numpy(dtype=_I64),
            "name": hit["name"].astype(object).to_numpy(),
            "stime": _micros(hit["stime"]),
        }
    )


q8_new_sellers.output_schema = "id BIGINT, name STRING, stime BIGINT"  # type: ignore[attr-defined]
