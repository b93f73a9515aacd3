"""A stock-exchange job like paper 000's SSE workload, as bundled DAG functions.

Paper 000 (§5) evaluates Elasticutor on the Shanghai Stock Exchange's order
stream: a *transactor* matches each stock's buy and sell orders, downstream
operators compute statistics of the resulting trades and raise events. The
trace itself is not public; here orders are derived deterministically from the
generator's tuples (stock = ``key``; side, limit price and volume from ``seq``),
so any run can be checked against a sequential reference.

* :func:`orders` (stateless): a tuple becomes an order ``key, seq, side, price, volume``.
* :func:`transactor` (keyed by stock): a price-time-priority order book per stock;
  an incoming order trades against the best resting orders on the other side at
  their price, the rest of it rests (each side keeps its best ``depth`` orders).
  Emits one row per trade.
* :func:`statistics` (keyed by stock): running volume-weighted average price and
  trade count per stock, one row per trade.
* :func:`events` (keyed by stock): an event whenever a stock's VWAP has moved by
  more than ``threshold`` (relative) since its last event (the first trade is one).

The three keyed operators share the key, so shard ``g`` of each feeds shard ``g``
of the next: what the placement policies collocate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["events", "match", "order_of", "orders", "statistics", "transactor"]


def order_of(seq: int) -> tuple[str, float, int]:
    """Side, limit price (95.00 … 104.99) and volume (1 … 9) of tuple ``seq``."""
    side = "buy" if seq % 2 == 0 else "sell"
    price = 100.0 + ((seq * 7919) % 1000 - 500) / 100.0
    return side, round(price, 2), 1 + (seq * 31) % 9


def orders(df: pd.DataFrame) -> pd.DataFrame:
    """Each tuple as an order of its key's stock."""
    seqs = df["seq"].to_numpy(dtype=np.int64).tolist()
    parts = [order_of(s) for s in seqs]
    return pd.DataFrame(
        {
            "key": df["key"].to_numpy(),
            "seq": np.asarray(seqs, dtype=np.int64),
            "side": [p[0] for p in parts],
            "price": np.asarray([p[1] for p in parts], dtype=float),
            "volume": np.asarray([p[2] for p in parts], dtype=np.int64),
        }
    )


def match(
    book: dict[str, list[list[Any]]], side: str, price: float, volume: int, seq: int, depth: int
) -> list[tuple[float, int]]:
    """Match one order against ``book`` (``{"buy": [...], "sell": [...]}`` of
    ``[price, volume, seq]``), in place; the trades ``(price, volume)``.

    Buys rest best (highest price) first, sells lowest first, earlier first among
    equal prices; each side keeps its best ``depth`` orders.
    """
    other = book["sell" if side == "buy" else "buy"]
    trades: list[tuple[float, int]] = []
    while volume > 0 and other:
        best = other[0]
        crosses = best[0] <= price if side == "buy" else best[0] >= price
        if not crosses:
            break
        qty = min(volume, best[1])
        trades.append((best[0], qty))
        volume -= qty
        best[1] -= qty
        if best[1] == 0:
            other.pop(0)
    if volume > 0:
        own = book[side]
        own.append([price, volume, seq])
        own.sort(key=(lambda o: (-o[0], o[2])) if side == "buy" else (lambda o: (o[0], o[2])))
        del own[depth:]
    return trades


def transactor(rows: pd.DataFrame, state: dict[Any, Any], *, depth: int = 20) -> pd.DataFrame:
    """Trades of one shard's orders, in arrival order, against its stocks' books."""
    books: dict[Any, dict[str, list[list[Any]]]] = state.setdefault("books", {})
    out: dict[str, list[Any]] = {"key": [], "seq": [], "price": [], "volume": []}
    cols = zip(
        rows["key"].tolist(),
        rows["seq"].tolist(),
        rows["side"].tolist(),
        rows["price"].tolist(),
        rows["volume"].tolist(),
        strict=True,
    )
    for key, seq, side, price, volume in cols:
        book = books.get(key)
        if book is None:
            book = books[key] = {"buy": [], "sell": []}
        for p, q in match(book, side, float(price), int(volume), int(seq), depth):
            out["key"].append(key)
            out["seq"].append(int(seq))
            out["price"].append(p)
            out["volume"].append(q)
    return pd.DataFrame(
        {
            "key": out["key"],
            "seq": np.asarray(out["seq"], dtype=np.int64),
            "price": np.asarray(out["price"], dtype=float),
            "volume": np.asarray(out["volume"], dtype=np.int64),
        }
    )


def statistics(rows: pd.DataFrame, state: dict[Any, Any]) -> pd.DataFrame:
    """Per stock: VWAP and trade count after each trade."""
    acc: dict[Any, tuple[float, int, int]] = state.setdefault("vwap", {})
    vwap = np.empty(len(rows), dtype=float)
    count = np.empty(len(rows), dtype=np.int64)
    cols = zip(rows["key"].tolist(), rows["price"].tolist(), rows["volume"].tolist(), strict=True)
    for i, (key, price, volume) in enumerate(cols):
        value, vol, n = acc.get(key, (0.0, 0, 0))
        value, vol, n = value + float(price) * int(volume), vol + int(volume), n + 1
        acc[key] = (value, vol, n)
        vwap[i], count[i] = value / vol, n
    return pd.DataFrame(
        {
            "key": rows["key"].to_numpy(),
            "seq": rows["seq"].to_numpy(),
            "vwap": vwap,
            "trades": count,
        }
    )


def events(rows: pd.DataFrame, state: dict[Any, Any], *, threshold: float = 0.002) -> pd.DataFrame:
    """An event when a stock's VWAP left its last event's VWAP by more than ``threshold``."""
    last: dict[Any, float] = state.setdefault("last", {})
    out: dict[str, list[Any]] = {"key": [], "seq": [], "vwap": [], "kind": []}
    cols = zip(rows["key"].tolist(), rows["seq"].tolist(), rows["vwap"].tolist(), strict=True)
    for key, seq, vwap in cols:
        ref = last.get(key)
        if ref is None:
            kind = "first"
        elif abs(vwap - ref) > threshold * ref:
            kind = "up" if vwap > ref else "down"
        else:
            continue
        last[key] = float(vwap)
        out["key"].append(key)
        out["seq"].append(int(seq))
        out["vwap"].append(float(vwap))
        out["kind"].append(kind)
    return pd.DataFrame(
        {
            "key": out["key"],
            "seq": np.asarray(out["seq"], dtype=np.int64),
            "vwap": np.asarray(out["vwap"], dtype=float),
            "kind": out["kind"],
        }
    )
