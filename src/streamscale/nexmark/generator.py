"""The Nexmark event generator, vectorized: persons, auctions and bids by event id.

Follows the published generator of the Nexmark suite for Flink
(``nexmark-flink/src/main/java/com/github/nexmark/flink/generator/``:
``NexmarkGenerator``, ``GeneratorConfig`` and ``model/PersonGenerator``,
``AuctionGenerator``, ``BidGenerator``, ``PriceGenerator``, ``StringsGenerator``;
itself a port of Apache Beam's ``org.apache.beam.sdk.nexmark.sources.generator``):

* event ``n`` (``firstEventId + n``) is a person, an auction or a bid by ``n mod 50``
  against the proportion 1 : 3 : 46 (``NexmarkGenerator.nextEvent``);
* ids: a person's id is ``lastBase0PersonId + 1000``, an auction's
  ``lastBase0AuctionId + 1000`` (``FIRST_PERSON_ID``, ``FIRST_AUCTION_ID``);
* hot keys: a bid goes to the first auction of the last batch of 100 auctions with
  probability ``1 - 1/hotAuctionRatio`` (2), else to a random in-flight auction
  (``nextBase0AuctionId``: the last ``numInFlightAuctions`` (100) plus a lead of 10);
  its bidder is the second person of the last batch of 100 persons with probability
  ``1 - 1/hotBiddersRatio`` (4), else a random active person (``nextBase0PersonId``:
  the last ``numActivePeople`` (1000) plus a lead of 10); an auction's seller is the
  first person of that batch with probability ``1 - 1/hotSellersRatio`` (4);
* prices ``round(10^(6u) · 100)`` (``PriceGenerator``), categories ``10 + U{0..4}``,
  an auction's ``expires`` its time plus ``1 + U[0, 2·horizon)`` where the horizon is
  the time until ``numInFlightAuctions`` more auctions are generated
  (``AuctionGenerator.nextAuctionLengthMs``), reserve ``initialBid + price``;
* event time: ``GeneratorConfig.timestampForEvent`` is ``baseTime + n · 10^6 / rate``
  µs truncated to ms; here the rate may change along a schedule of
  ``(duration_s, rate)`` steps (the last rate holds after the schedule ends);
* strings: ``StringsGenerator.nextString`` (letters with a space one time in 13,
  trimmed) and ``nextExtra`` (padding to the average event size, ±20 %).

Two deliberate differences. The published generator draws from one
``java.util.Random`` per generator, so its output depends on how events are split
between generators; here every random draw of event ``n`` is a hash of
``(seed, n, draw)`` (splitmix64), so the events are a pure function of the seed and
the event id and any split of the id range into source tasks yields the same events.
And the later ``BidGenerator`` adds ``FIRST_PERSON_ID`` to the bidder twice (a bug:
bidders would never match a person); it is added once here, as in Beam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from streamscale.errors import StreamscaleError

__all__ = [
    "AUCTION_COLUMNS",
    "BID_COLUMNS",
    "PERSON_COLUMNS",
    "Events",
    "GeneratorConfig",
    "event_times_ms",
    "generate",
    "split_ranges",
]

PERSON_COLUMNS = ("id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra")
AUCTION_COLUMNS = (
    "id",
    "itemName",
    "description",
    "initialBid",
    "reserve",
    "dateTime",
    "expires",
    "seller",
    "category",
    "extra",
)
BID_COLUMNS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")

FIRST_AUCTION_ID = 1000
FIRST_PERSON_ID = 1000
FIRST_CATEGORY_ID = 10
_NUM_CATEGORIES = 5
_AUCTION_ID_LEAD = 10
_PERSON_ID_LEAD = 10
_HOT_RATIO = 100  # HOT_SELLER_RATIO, HOT_AUCTION_RATIO, HOT_BIDDER_RATIO
_HOT_CHANNELS_RATIO = 2
_CHANNELS = 10_000
_HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
_FIRST = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter")
_FIRST = (*_FIRST, "Walter")
_LAST = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

#: 2024-01-01T00:00:00Z: a fixed base time keeps runs comparable (NexmarkConfiguration.baseTime).
DEFAULT_BASE_TIME_MS = 1_704_067_200_000


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    """Parameters of the generator (``NexmarkConfiguration`` / ``GeneratorConfig``).

    ``schedule`` is a sequence of ``(duration_s, rate)`` steps (events per second);
    after its last step the last rate holds.
    """

    schedule: tuple[tuple[float, float], ...] = ((1.0, 10_000.0),)
    seed: int = 0
    base_time_ms: int = DEFAULT_BASE_TIME_MS
    first_event_id: int = 0
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    def __post_init__(self) -> None:
        if not self.schedule:
            raise StreamscaleError("the rate schedule is empty", item="schedule")
        for d, r in self.schedule:
            if not (r > 0) or not (d > 0):
                raise StreamscaleError(
                    "every step needs a duration > 0 and a rate > 0", item=f"step ({d}, {r})"
                )
        props = (self.person_proportion, self.auction_proportion, self.bid_proportion)
        if min(props) < 1:
            raise StreamscaleError("proportions must be >= 1", item=str(props))

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @staticmethod
    def constant(rate: float, **kw: object) -> GeneratorConfig:
        """A config at one rate (events per second)."""
        return GeneratorConfig(schedule=((1.0, float(rate)),), **kw)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Events:
    """Generated events of an id range, each table in event-id (and event-time) order."""

    person: pd.DataFrame
    auction: pd.DataFrame
    bid: pd.DataFrame


def split_ranges(n_events: int, tasks: int) -> list[tuple[int, int]]:
    """Event-number ranges ``[lo, hi)`` of ``tasks`` source tasks covering ``n_events``
    (``GeneratorConfig.split``: equal shares, the last task takes the remainder)."""
    if tasks < 1 or n_events < 0:
        raise StreamscaleError("need tasks >= 1 and events >= 0", item=f"{n_events}/{tasks}")
    share = n_events // tasks
    out, lo = [], 0
    for i in range(tasks):
        hi = n_events if i == tasks - 1 else lo + share
        out.append((lo, hi))
        lo = hi
    return out


# ---------------------------------------------------------------- random draws


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 in, uint64 out; wraps by design)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Draws:
    """Counter-based draws: draw ``k`` of event ``n`` depends on (seed, n, k) only."""

    def __init__(self, seed: int, ids: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            s = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + np.uint64(0x9E3779B97F4A7C15))
            self._base = _mix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ s)
        self._k = 0

    def uniform(self, width: int | None = None) -> np.ndarray:
        """Uniform in [0, 1): shape (n,) or (n, width)."""
        with np.errstate(over="ignore"):
            if width is None:
                self._k += 1
                x = _mix(self._base + np.uint64(self._k) * np.uint64(0xD1B54A32D192ED03))
            else:
                ks = np.arange(self._k + 1, self._k + 1 + width, dtype=np.uint64)
                self._k += width
                x = _mix(self._base[:, None] + ks[None, :] * np.uint64(0xD1B54A32D192ED03))
        return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def below(self, n: np.ndarray | int) -> np.ndarray:
        """Uniform integers in [0, n) (``Random.nextInt(n)``)."""
        return np.floor(self.uniform() * np.asarray(n, dtype=np.float64)).astype(np.int64)


def _strings(d: _Draws, max_length: int) -> np.ndarray:
    """``StringsGenerator.nextString``: 3..max_length-1 chars, a space one time in 13, trimmed."""
    n = len(d._base)
    length = 3 + d.below(max_length - 3)
    letters = (97 + np.floor(d.uniform(max_length) * 26)).astype(np.uint8)
    space = d.uniform(max_length) < 1.0 / 13.0
    chars = np.where(space, np.uint8(32), letters)
    chars[np.arange(max_length)[None, :] >= length[:, None]] = 0
    raw = chars.view(f"S{max_length}").reshape(n)
    return np.char.strip(np.char.decode(raw, "ascii"))


def _exact_strings(d: _Draws, length: np.ndarray) -> np.ndarray:
    """Lower-case strings of the given lengths (``nextExactString``)."""
    n = len(length)
    width = max(1, int(length.max()) if n else 1)
    chars = (97 + np.floor(d.uniform(width) * 26)).astype(np.uint8)
    chars[np.arange(width)[None, :] >= length[:, None]] = 0
    return np.char.decode(chars.view(f"S{width}").reshape(n), "ascii")


def _extra(d: _Draws, current: np.ndarray, average: int) -> np.ndarray:
    """``StringsGenerator.nextExtra``: pads ``current`` bytes to ``average`` on average."""
    want = average - current
    delta = np.rint(want * 0.2).astype(np.int64)
    size = want - delta + np.where(delta > 0, d.below(np.maximum(2 * delta, 1)), 0)
    size = np.where(current > average, 0, size)
    return _exact_strings(d, size)


def _join(*parts: np.ndarray | str) -> np.ndarray:
    out = parts[0]
    for p in parts[1:]:
        out = np.char.add(out, p)
    return out


# ---------------------------------------------------------------- ids and time


def event_times_ms(cfg: GeneratorConfig, numbers: np.ndarray) -> np.ndarray:
    """Event time (ms) of event numbers: ``timestampForEvent`` along the rate schedule."""
    numbers = np.asarray(numbers, dtype=np.int64)
    durations = np.array([d for d, _ in cfg.schedule], dtype=np.float64)
    rates = np.array([r for _, r in cfg.schedule], dtype=np.float64)
    counts = np.floor(durations * rates).astype(np.int64)
    first = np.concatenate([[0], np.cumsum(counts)])  # first event number of each step
    start_us = np.concatenate([[0.0], np.cumsum(durations)]) * 1e6
    step = np.clip(np.searchsorted(first, numbers, side="right") - 1, 0, len(rates) - 1)
    delay_us = 1e6 / rates[step]
    offset_us = np.floor((numbers - first[step]) * delay_us) + start_us[step]
    return cfg.base_time_ms + (offset_us.astype(np.int64) // 1000)


def _last_person(cfg: GeneratorConfig, eid: np.ndarray) -> np.ndarray:
    """``PersonGenerator.lastBase0PersonId``."""
    epoch, off = np.divmod(eid, cfg.total_proportion)
    off = np.minimum(off, cfg.person_proportion - 1)
    return epoch * cfg.person_proportion + off


def _last_auction(cfg: GeneratorConfig, eid: np.ndarray) -> np.ndarray:
    """``AuctionGenerator.lastBase0AuctionId``."""
    epoch, off = np.divmod(eid, cfg.total_proportion)
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    is_person = off < pp
    epoch = np.where(is_person, epoch - 1, epoch)
    off = np.where(is_person | (off >= pp + ap), ap - 1, off - pp)
    return epoch * ap + off


def _next_person(cfg: GeneratorConfig, d: _Draws, eid: np.ndarray) -> np.ndarray:
    """``PersonGenerator.nextBase0PersonId``: a random active person, plus a lead."""
    people = _last_person(cfg, eid) + 1
    active = np.minimum(people, cfg.num_active_people)
    return people - active + d.below(active + _PERSON_ID_LEAD)


def _next_auction(cfg: GeneratorConfig, d: _Draws, eid: np.ndarray) -> np.ndarray:
    """``AuctionGenerator.nextBase0AuctionId``: a random in-flight auction, plus a lead."""
    last = _last_auction(cfg, eid)
    lo = np.maximum(last - cfg.num_in_flight_auctions, 0)
    return lo + d.below(last - lo + 1 + _AUCTION_ID_LEAD)


def _price(d: _Draws) -> np.ndarray:
    """``PriceGenerator.nextPrice``: ``round(10^(6u) · 100)``."""
    return np.floor(np.power(10.0, d.uniform() * 6.0) * 100.0 + 0.5).astype(np.int64)


def _ts(ms: np.ndarray) -> pd.Series:
    return pd.Series(pd.to_datetime(ms, unit="ms", utc=True).astype("datetime64[us, UTC]"))


# ---------------------------------------------------------------- the three tables


def _persons(cfg: GeneratorConfig, num: np.ndarray, eid: np.ndarray) -> pd.DataFrame:
    d = _Draws(cfg.seed, eid)
    name = _join(np.asarray(_FIRST)[d.below(len(_FIRST))], " ", np.asarray(_LAST)[d.below(9)])
    email = _join(_strings(d, 7), "@", _strings(d, 5), ".com")
    groups = [np.char.zfill(d.below(10_000).astype(str), 4) for _ in range(4)]
    card = _join(groups[0], " ", groups[1], " ", groups[2], " ", groups[3])
    city = np.asarray(_CITIES)[d.below(len(_CITIES))]
    state = np.asarray(_STATES)[d.below(len(_STATES))]
    size = (
        8 + np.char.str_len(name) + np.char.str_len(email) + 19 + np.char.str_len(city) + 2
    ).astype(np.int64)
    return pd.DataFrame(
        {
            "id": _last_person(cfg, eid) + FIRST_PERSON_ID,
            "name": name.astype(object),
            "emailAddress": email.astype(object),
            "creditCard": card.astype(object),
            "city": city.astype(object),
            "state": state.astype(object),
            "dateTime": _ts(event_times_ms(cfg, num)),
            "extra": _extra(d, size, cfg.avg_person_bytes).astype(object),
        }
    )


def _auctions(cfg: GeneratorConfig, num: np.ndarray, eid: np.ndarray) -> pd.DataFrame:
    d = _Draws(cfg.seed, eid)
    t = event_times_ms(cfg, num)
    hot = d.below(cfg.hot_sellers_ratio) > 0
    seller = np.where(
        hot, (_last_person(cfg, eid) // _HOT_RATIO) * _HOT_RATIO, _next_person(cfg, d, eid)
    )
    category = FIRST_CATEGORY_ID + d.below(_NUM_CATEGORIES)
    initial = _price(d)
    ahead = (cfg.num_in_flight_auctions * cfg.total_proportion) // cfg.auction_proportion
    horizon = event_times_ms(cfg, num + ahead) - t
    expires = t + 1 + d.below(np.maximum(horizon * 2, 1))
    name, desc = _strings(d, 20), _strings(d, 100)
    reserve = initial + _price(d)
    size = (8 + np.char.str_len(name) + np.char.str_len(desc) + 40).astype(np.int64)
    return pd.DataFrame(
        {
            "id": _last_auction(cfg, eid) + FIRST_AUCTION_ID,
            "itemName": name.astype(object),
            "description": desc.astype(object),
            "initialBid": initial,
            "reserve": reserve,
            "dateTime": _ts(t),
            "expires": _ts(expires),
            "seller": seller + FIRST_PERSON_ID,
            "category": category,
            "extra": _extra(d, size, cfg.avg_auction_bytes).astype(object),
        }
    )


def _channel_urls(seed: int) -> np.ndarray:
    """One URL per channel number (``BidGenerator.getNextChannelAndurl``), from the seed."""
    n = np.arange(_CHANNELS + len(_HOT_CHANNELS), dtype=np.int64)
    d = _Draws(seed ^ 0x5EED, n)
    parts = [np.char.replace(_strings(d, 5), " ", "_") for _ in range(3)]
    base = _join("https://www.nexmark.com/", parts[0], "/", parts[1], "/", parts[2])
    base = _join(base, "/item.htm?query=1")
    rev = np.array([abs(_reverse32(int(i))) for i in range(_CHANNELS)], dtype=np.int64)
    with_id = d.below(10)[:_CHANNELS] > 0
    tail = np.where(with_id, np.char.add("&channel_id=", rev.astype(str)), "")
    return np.concatenate([np.char.add(base[:_CHANNELS], tail), base[_CHANNELS:]])


def _reverse32(i: int) -> int:
    """``Integer.reverse`` as a signed 32-bit int."""
    r = int(f"{i & 0xFFFFFFFF:032b}"[::-1], 2)
    return r - (1 << 32) if r >= 1 << 31 else r


_URLS: dict[int, np.ndarray] = {}


def _bids(cfg: GeneratorConfig, num: np.ndarray, eid: np.ndarray) -> pd.DataFrame:
    d = _Draws(cfg.seed, eid)
    hot_a = d.below(cfg.hot_auction_ratio) > 0
    auction = np.where(
        hot_a, (_last_auction(cfg, eid) // _HOT_RATIO) * _HOT_RATIO, _next_auction(cfg, d, eid)
    )
    hot_b = d.below(cfg.hot_bidders_ratio) > 0
    bidder = np.where(
        hot_b, (_last_person(cfg, eid) // _HOT_RATIO) * _HOT_RATIO + 1, _next_person(cfg, d, eid)
    )
    price = _price(d)
    hot_c = d.below(_HOT_CHANNELS_RATIO) > 0
    chan = np.where(hot_c, _CHANNELS + d.below(len(_HOT_CHANNELS)), d.below(_CHANNELS))
    urls = _URLS.get(cfg.seed)
    if urls is None:
        urls = _URLS.setdefault(cfg.seed, _channel_urls(cfg.seed))
    names = np.concatenate(
        [np.char.add("channel-", np.arange(_CHANNELS).astype(str)), np.asarray(_HOT_CHANNELS)]
    )
    size = np.full(len(eid), 32, dtype=np.int64)
    return pd.DataFrame(
        {
            "auction": auction + FIRST_AUCTION_ID,
            "bidder": bidder + FIRST_PERSON_ID,
            "price": price,
            "channel": names[chan].astype(object),
            "url": urls[chan].astype(object),
            "dateTime": _ts(event_times_ms(cfg, num)),
            "extra": _extra(d, size, cfg.avg_bid_bytes).astype(object),
        }
    )


def generate(cfg: GeneratorConfig, lo: int, hi: int) -> Events:
    """The events numbered ``[lo, hi)`` (event ids ``firstEventId + n``).

    Pure: the same config and range give the same events, and the events of a range
    are the concatenation of those of any split of it (:func:`split_ranges`).
    """
    if lo < 0 or hi < lo:
        raise StreamscaleError("need 0 <= lo <= hi", item=f"[{lo}, {hi})")
    num = np.arange(lo, hi, dtype=np.int64)
    eid = cfg.first_event_id + num
    rem = eid % cfg.total_proportion
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    is_p, is_a = rem < pp, (rem >= pp) & (rem < pp + ap)
    is_b = ~(is_p | is_a)
    return Events(
        person=_table(_persons, cfg, num, eid, is_p),
        auction=_table(_auctions, cfg, num, eid, is_a),
        bid=_table(_bids, cfg, num, eid, is_b),
    )


def _table(
    make: Any, cfg: GeneratorConfig, num: np.ndarray, eid: np.ndarray, sel: np.ndarray
) -> pd.DataFrame:
    if sel.any():
        return make(cfg, num[sel], eid[sel])
    one = np.zeros(1, dtype=np.int64)  # no such event here: the table's columns, no rows
    return make(cfg, one, one).iloc[0:0].reset_index(drop=True)


def parse_schedule(text: str | Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """``"30:1000,60:4000"`` (duration_s:rate, …) or pairs, as a schedule."""
    if not isinstance(text, str):
        return tuple((float(d), float(r)) for d, r in text)
    steps = []
    for part in text.split(","):
        try:
            d, r = part.split(":")
            steps.append((float(d), float(r)))
        except ValueError:
            raise StreamscaleError(
                "a schedule is duration_s:rate[,duration_s:rate...]", item=part
            ) from None
    return tuple(steps)
