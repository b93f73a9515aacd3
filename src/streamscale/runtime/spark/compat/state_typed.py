"""Typed per-key state on a shard's dict: value, list and map state with TTL, and timers.

The concepts (and method names and signatures) of Spark 4's
``StatefulProcessorHandle`` (``transformWithStateInPandas``): a keyed function
asks the handle for named states, scoped to the grouping key it is processing,
each with an optional time to live, and registers timers per key. Everything
lives in the shard's state dict under ``("__typed__", kind, name, key)``
entries of immutable tuples (map state: one dict per key; timers: see
:mod:`~streamscale.runtime.spark.compat.state_timers`), read without marking them
changed, so the state backend stays one mechanism and a batch's changelog
holds exactly the keys it touched.

TTL is checked against the batch's processing time (``now_ms``, passed in, so
a replayed batch expires exactly the same entries) or, for event-time TTL,
against the watermark: an entry written at event time ``t`` with TTL ``d`` is
gone from the first batch whose watermark is ``>= t + d``. Expired entries are
never returned and are removed when next touched (or by :meth:`expireAll`).
As in Spark, every element of a list state has its own expiry: ``put`` sets
them all, ``appendValue``/``appendList`` set only the new elements'.

Schemas and evolution: a value given a dataclass ``schema`` is stored by field
name and read back as that dataclass; given a Spark ``StructType`` or a DDL
string (``"n long, total double"``), values are tuples (as in Spark) stored by
field name. Restoring a value written before a field was added fills that field
with its default (``None`` for a struct field), and a field since removed is
ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat import state_timers as timers

__all__ = ["ListState", "MapState", "StatefulHandle", "ValueState", "field_names"]

_TAG = "__typed__"
_KINDS = ("value", "list", "map")
_TIME_MODES = {"none": "None", "processingtime": "ProcessingTime", "eventtime": "EventTime"}


def field_names(schema: Any) -> tuple[str, ...] | None:
    """The top-level field names of a ``StructType`` or struct DDL string; ``None`` otherwise."""
    names = getattr(schema, "names", None)
    if isinstance(names, list | tuple):
        return tuple(str(n) for n in names)
    if not isinstance(schema, str):
        return None
    text = schema.strip()
    if text.lower().startswith("struct<") and text.endswith(">"):
        text = text[7:-1]
    parts, depth, cur = [], 0, ""
    for ch in text + ",":
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    fields = [p.replace(":", " ").split() for p in parts if p]
    if not fields or any(len(f) < 2 for f in fields):
        return None  # a bare type ("int"): values are stored as they are
    return tuple(f[0].strip("`") for f in fields)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class _Codec:
    """How values of one state are stored: as given, by dataclass field, or by struct field."""

    def __init__(self, schema: Any) -> None:
        self.dc = schema if dataclasses.is_dataclass(schema) and isinstance(schema, type) else None
        self.names = None if self.dc is not None else field_names(schema)

    def encode(self, value: Any) -> Any:
        if self.dc is not None:
            return tuple(sorted(dataclasses.asdict(value).items()))
        if self.names is None:
            return tuple(map(_plain, value)) if isinstance(value, tuple) else _plain(value)
        vals = value if isinstance(value, tuple | list) else (value,)
        if len(vals) > len(self.names):
            raise StreamscaleError(
                f"value has {len(vals)} fields, its schema {len(self.names)}", item=str(value)
            )
        return tuple(zip(self.names, map(_plain, vals), strict=False))

    def decode(self, stored: Any) -> Any:
        if self.dc is not None:
            fields = {f.name for f in dataclasses.fields(self.dc)}
            return self.dc(**{n: v for n, v in dict(stored).items() if n in fields})
        if self.names is None:
            return stored
        got = dict(stored) if _named(stored) else dict(zip(self.names, stored, strict=False))
        return tuple(got.get(n) for n in self.names)


def _named(stored: Any) -> bool:
    return isinstance(stored, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in stored
    )


class StatefulHandle:
    """Typed states and timers over one shard's dict, for the key set by :meth:`setKey`.

    Parameters
    ----------
    state
        The shard's state dict (as the keyed function receives it).
    now_ms
        The batch's processing time (ms); processing-time TTL counts from it.
    watermark_ms
        The batch's event-time watermark (ms), for event-time TTL and timers.
    time_mode
        ``"ProcessingTime"`` (timers fire at ``now_ms``), ``"EventTime"`` (at
        the watermark) or ``"None"`` (no timers), as ``transformWithStateInPandas``'s.
    timer_bucket_ms
        Width of the time buckets indexing timers (a shard keeps the width it
        was first given).
    """

    def __init__(
        self,
        state: dict[Any, Any],
        *,
        now_ms: int,
        watermark_ms: int | None = None,
        time_mode: str = "ProcessingTime",
        timer_bucket_ms: int = 1000,
    ) -> None:
        mode = _TIME_MODES.get(str(time_mode).lower())
        if mode is None:
            raise StreamscaleError(f"unknown time mode {time_mode!r}", item="StatefulHandle")
        self.state = state
        self.now_ms = now_ms
        self.watermark_ms = watermark_ms
        self.time_mode = mode
        self.timer_bucket_ms = max(1, int(timer_bucket_ms))
        self.key: Any = None
        self.firing: int | None = None  # the current key's timer whose handler runs

    def setKey(self, key: Any) -> StatefulHandle:
        self.key = _plain(key)
        return self

    def _expiry(self, ttl_ms: int | None, event_ttl_ms: int | None, event_ms: int | None) -> Any:
        if event_ttl_ms is not None and event_ms is not None:
            return ("event", event_ms + event_ttl_ms)
        if ttl_ms is not None:
            return ("proc", self.now_ms + ttl_ms)
        return None

    def _expired(self, expiry: Any) -> bool:
        if expiry is None:
            return False
        kind, at = expiry
        if kind == "proc":
            return self.now_ms >= at
        return self.watermark_ms is not None and self.watermark_ms >= at

    def getValueState(
        self,
        stateName: str,
        schema: Any = None,
        ttlDurationMs: int | None = None,
        *,
        eventTimeTtlMs: int | None = None,
    ) -> ValueState:
        return ValueState(self, stateName, schema, ttlDurationMs, eventTimeTtlMs)

    def getListState(
        self,
        stateName: str,
        schema: Any = None,
        ttlDurationMs: int | None = None,
        *,
        eventTimeTtlMs: int | None = None,
    ) -> ListState:
        return ListState(self, stateName, schema, ttlDurationMs, eventTimeTtlMs)

    def getMapState(
        self,
        stateName: str,
        userKeySchema: Any = None,
        valueSchema: Any = None,
        ttlDurationMs: int | None = None,
        *,
        eventTimeTtlMs: int | None = None,
    ) -> MapState:
        del userKeySchema  # user keys are stored as given (hashable, e.g. tuples)
        return MapState(self, stateName, valueSchema, ttlDurationMs, eventTimeTtlMs)

    def _timers_allowed(self) -> None:
        if self.time_mode == "None":
            raise StreamscaleError(
                "timers need time mode ProcessingTime or EventTime", item="timer"
            )

    def registerTimer(self, expiryTimestampMs: int) -> None:
        """Register a timer for the current key (event time: later than the watermark)."""
        self._timers_allowed()
        wm = self.watermark_ms
        if self.time_mode == "EventTime" and wm is not None and expiryTimestampMs <= wm:
            raise StreamscaleError(
                f"cannot register a timer at {expiryTimestampMs} ms, not later than the "
                f"watermark {wm} ms",
                item=f"key {self.key!r}",
            )
        timers.register_timer(
            self.state, self.key, expiryTimestampMs, self.timer_bucket_ms, self.now_ms
        )

    def deleteTimer(self, expiryTimestampMs: int) -> None:
        self._timers_allowed()
        timers.delete_timer(self.state, self.key, expiryTimestampMs)

    def listTimers(self) -> Iterator[int]:
        """The current key's timers, ascending (while one fires, it is listed, as in Spark)."""
        self._timers_allowed()
        mine = timers.key_timers(self.state, self.key)
        if self.firing is not None and self.firing not in mine:
            mine = tuple(sorted((*mine, self.firing)))
        return iter(mine)

    def popDueTimers(self) -> list[tuple[Any, int]]:
        """Remove and return the ``(key, expiry)`` timers due in this batch, earliest first."""
        limit = self.now_ms if self.time_mode == "ProcessingTime" else self.watermark_ms
        if self.time_mode == "None" or limit is None:
            return []
        return timers.pop_due(self.state, limit, self.timer_bucket_ms)

    def _typed_keys(self, name: str | None = None) -> list[tuple[Any, ...]]:
        return [
            k
            for k in self.state
            if isinstance(k, tuple)
            and len(k) == 4
            and k[0] == _TAG
            and k[1] in _KINDS
            and (name is None or k[2] == name)
        ]

    def deleteIfExists(self, stateName: str) -> None:
        """Remove the state ``stateName`` for every key of the shard (a full scan)."""
        for k in self._typed_keys(stateName):
            del self.state[k]

    def expireAll(self) -> int:
        """Remove every expired entry of the shard (a full scan); how many went."""
        gone = 0
        for k in self._typed_keys():
            v = dict.__getitem__(self.state, k)
            if k[1] == "map":
                live = {u: e for u, e in v.items() if not self._expired(e[1])}
                gone += len(v) - len(live)
                if len(live) != len(v):
                    if live:
                        self.state[k] = live
                    else:
                        del self.state[k]
            elif k[1] == "list":
                key, self.key = self.key, k[3]
                gone += len(v[0]) - len(ListState(self, k[2], None, None, None)._live()[0])
                self.key = key
            elif self._expired(v[1]):
                del self.state[k]
                gone += 1
        return gone


class _Typed:
    kind = ""

    def __init__(
        self, h: StatefulHandle, name: str, schema: Any, ttl: int | None, event_ttl: int | None
    ) -> None:
        if ttl is not None and h.time_mode != "ProcessingTime":
            raise StreamscaleError(
                f"TTL needs time mode ProcessingTime, not {h.time_mode} (as Spark)",
                item=f"state {name}",
            )
        self.h, self.name, self.ttl, self.event_ttl = h, name, ttl, event_ttl
        self.codec = _Codec(schema)

    @property
    def _k(self) -> tuple[Any, ...]:
        return (_TAG, self.kind, self.name, self.h.key)

    def _entry(self) -> Any:
        e = dict.get(self.h.state, self._k)  # a read: not a change
        if e is not None and self.kind != "map" and self.h._expired(e[1]):
            del self.h.state[self._k]
            return None
        return e

    def _exp(self, event_time_ms: int | None) -> Any:
        return self.h._expiry(self.ttl, self.event_ttl, event_time_ms)

    def exists(self) -> bool:
        return self._entry() is not None

    def clear(self) -> None:
        self.h.state.pop(self._k, None)


class ValueState(_Typed):
    """One value per key: ``exists``, ``get``, ``update``, ``clear``."""

    kind = "value"

    def get(self) -> Any:
        e = self._entry()
        return None if e is None else self.codec.decode(e[0])

    def update(self, newValue: Any, *, event_time_ms: int | None = None) -> None:
        self.h.state[self._k] = (self.codec.encode(newValue), self._exp(event_time_ms))


class ListState(_Typed):
    """A list per key: ``exists``, ``get``, ``put``, ``appendValue``, ``appendList``, ``clear``.

    Stored as ``(values, ("each", expiries))``: one expiry per element, as in Spark
    (an entry written with one shared expiry, ``(values, expiry)``, still reads).
    """

    kind = "list"

    def _live(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        e = dict.get(self.h.state, self._k)  # a read: not a change
        if e is None:
            return (), ()
        vals, exp = e
        exps = exp[1] if isinstance(exp, tuple) and exp and exp[0] == "each" else (exp,) * len(vals)
        keep = [i for i, x in enumerate(exps) if not self.h._expired(x)]
        if len(keep) != len(vals):
            if keep:
                self.h.state[self._k] = (
                    tuple(vals[i] for i in keep),
                    ("each", tuple(exps[i] for i in keep)),
                )
            else:
                del self.h.state[self._k]
        return tuple(vals[i] for i in keep), tuple(exps[i] for i in keep)

    def _entry(self) -> Any:
        vals, _ = self._live()
        return (vals, None) if vals else None

    def get(self) -> Iterator[Any]:
        vals, _ = self._live()
        return (self.codec.decode(v) for v in vals)

    def put(self, newState: Iterable[Any], *, event_time_ms: int | None = None) -> None:
        stored = tuple(self.codec.encode(v) for v in newState)
        if not stored:
            self.clear()
            return
        exp = self._exp(event_time_ms)
        self.h.state[self._k] = (stored, ("each", (exp,) * len(stored)))

    def appendValue(self, newState: Any, *, event_time_ms: int | None = None) -> None:
        self.appendList((newState,), event_time_ms=event_time_ms)

    def appendList(self, newState: Iterable[Any], *, event_time_ms: int | None = None) -> None:
        vals, exps = self._live()
        new = tuple(self.codec.encode(v) for v in newState)
        if not new and not vals:
            return
        exp = self._exp(event_time_ms)
        self.h.state[self._k] = ((*vals, *new), ("each", (*exps, *((exp,) * len(new)))))


class MapState(_Typed):
    """A map per key; each user key has its own TTL."""

    kind = "map"

    def _live(self) -> dict[Any, tuple[Any, Any]]:
        m = self._entry() or {}
        return {u: e for u, e in m.items() if not self.h._expired(e[1])}

    def exists(self) -> bool:
        return bool(self._live())

    def getValue(self, key: Any) -> Any:
        e = self._live().get(_plain(key))
        return None if e is None else self.codec.decode(e[0])

    def containsKey(self, key: Any) -> bool:
        return _plain(key) in self._live()

    def updateValue(self, key: Any, value: Any, *, event_time_ms: int | None = None) -> None:
        m = self._live()
        m[_plain(key)] = (self.codec.encode(value), self._exp(event_time_ms))
        self.h.state[self._k] = m

    def removeKey(self, key: Any) -> None:
        m = self._live()
        m.pop(_plain(key), None)
        if m:
            self.h.state[self._k] = m
        else:
            self.clear()

    def iterator(self) -> Iterator[tuple[Any, Any]]:
        return ((u, self.codec.decode(e[0])) for u, e in self._live().items())

    def keys(self) -> Iterator[Any]:
        return iter(self._live())

    def values(self) -> Iterator[Any]:
        return (self.codec.decode(e[0]) for e in self._live().values())
