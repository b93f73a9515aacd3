"""Typed per-key state on a shard's dict: value, list and map state with TTL.

The concepts (and method names) of Spark 4's ``StatefulProcessorHandle``
(``transformWithStateInPandas``): a keyed function asks the handle for named
states, scoped to the grouping key it is processing, each with an optional
time to live. Everything lives in the shard's state dict under
``("__typed__", kind, name, key)`` entries of immutable tuples (map state: one
dict per key), so the state backend stays one mechanism and a batch's
changelog holds exactly the keys it touched.

TTL is checked against the batch's processing time (``now_ms``, passed in, so
a replayed batch expires exactly the same entries) or, for event-time TTL,
against the watermark: an entry written at event time ``t`` with TTL ``d`` is
gone from the first batch whose watermark is ``>= t + d``.

Schema evolution: a value state given a dataclass ``schema`` stores its fields
by name; restoring a value written before a field was added fills that field
with its default, and a field since removed is ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["ListState", "MapState", "StatefulHandle", "ValueState"]

_TAG = "__typed__"
_NEVER = float("inf")


class StatefulHandle:
    """Typed states over one shard's dict, for the grouping key set by :meth:`setKey`.

    Parameters
    ----------
    state
        The shard's state dict (as the keyed function receives it).
    now_ms
        The batch's processing time (ms); processing-time TTL counts from it.
    watermark_ms
        The batch's event-time watermark (ms), for event-time TTL.
    """

    def __init__(
        self, state: dict[Any, Any], *, now_ms: int, watermark_ms: int | None = None
    ) -> None:
        self.state = state
        self.now_ms = now_ms
        self.watermark_ms = watermark_ms
        self.key: Any = None

    def setKey(self, key: Any) -> StatefulHandle:
        self.key = key
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
        name: str,
        schema: type | None = None,
        ttlDurationMs: int | None = None,
        *,
        eventTimeTtlMs: int | None = None,
    ) -> ValueState:
        return ValueState(self, name, schema, ttlDurationMs, eventTimeTtlMs)

    def getListState(
        self, name: str, ttlDurationMs: int | None = None, *, eventTimeTtlMs: int | None = None
    ) -> ListState:
        return ListState(self, name, ttlDurationMs, eventTimeTtlMs)

    def getMapState(
        self, name: str, ttlDurationMs: int | None = None, *, eventTimeTtlMs: int | None = None
    ) -> MapState:
        return MapState(self, name, ttlDurationMs, eventTimeTtlMs)

    def expireAll(self) -> int:
        """Remove every expired entry of the shard (a full scan); how many went."""
        gone = 0
        for k in [k for k in self.state if isinstance(k, tuple) and k[:1] == (_TAG,)]:
            v = dict.__getitem__(self.state, k)
            if k[1] == "map":
                live = {u: e for u, e in v.items() if not self._expired(e[1])}
                gone += len(v) - len(live)
                if len(live) != len(v):
                    if live:
                        self.state[k] = live
                    else:
                        del self.state[k]
            elif self._expired(v[1]):
                del self.state[k]
                gone += 1
        return gone


class _Typed:
    kind = ""

    def __init__(
        self, h: StatefulHandle, name: str, ttl: int | None, event_ttl: int | None
    ) -> None:
        self.h, self.name, self.ttl, self.event_ttl = h, name, ttl, event_ttl

    @property
    def _k(self) -> tuple[Any, ...]:
        return (_TAG, self.kind, self.name, self.h.key)

    def _entry(self) -> Any:
        e = self.h.state.get(self._k)
        if e is not None and self.kind != "map" and self.h._expired(e[1]):
            del self.h.state[self._k]
            return None
        return e

    def exists(self) -> bool:
        return self._entry() is not None

    def clear(self) -> None:
        self.h.state.pop(self._k, None)


class ValueState(_Typed):
    """One value per key: ``exists``, ``get``, ``update``, ``clear``."""

    kind = "value"

    def __init__(
        self,
        h: StatefulHandle,
        name: str,
        schema: type | None,
        ttl: int | None,
        event_ttl: int | None,
    ) -> None:
        super().__init__(h, name, ttl, event_ttl)
        self.schema = schema

    def get(self) -> Any:
        e = self._entry()
        if e is None:
            return None
        if self.schema is None:
            return e[0]
        stored = dict(e[0])
        fields = {f.name for f in dataclasses.fields(self.schema)}
        return self.schema(**{n: v for n, v in stored.items() if n in fields})

    def update(self, value: Any, *, event_time_ms: int | None = None) -> None:
        if self.schema is not None:
            value = tuple(sorted(dataclasses.asdict(value).items()))
        self.h.state[self._k] = (value, self.h._expiry(self.ttl, self.event_ttl, event_time_ms))


class ListState(_Typed):
    """A list per key: ``get``, ``put``, ``appendValue``, ``appendList``, ``clear``."""

    kind = "list"

    def get(self) -> Iterator[Any]:
        e = self._entry()
        return iter(() if e is None else e[0])

    def put(self, values: Iterable[Any], *, event_time_ms: int | None = None) -> None:
        exp = self.h._expiry(self.ttl, self.event_ttl, event_time_ms)
        self.h.state[self._k] = (tuple(values), exp)

    def appendValue(self, value: Any, *, event_time_ms: int | None = None) -> None:
        self.appendList((value,), event_time_ms=event_time_ms)

    def appendList(self, values: Iterable[Any], *, event_time_ms: int | None = None) -> None:
        self.put((*self.get(), *values), event_time_ms=event_time_ms)


class MapState(_Typed):
    """A map per key; each user key has its own TTL."""

    kind = "map"

    def _live(self) -> dict[Any, tuple[Any, Any]]:
        m = self._entry() or {}
        return {u: e for u, e in m.items() if not self.h._expired(e[1])}

    def exists(self) -> bool:
        return bool(self._live())

    def getValue(self, user_key: Any) -> Any:
        e = self._live().get(user_key)
        return None if e is None else e[0]

    def containsKey(self, user_key: Any) -> bool:
        return user_key in self._live()

    def updateValue(self, user_key: Any, value: Any, *, event_time_ms: int | None = None) -> None:
        m = self._live()
        m[user_key] = (value, self.h._expiry(self.ttl, self.event_ttl, event_time_ms))
        self.h.state[self._k] = m

    def removeKey(self, user_key: Any) -> None:
        m = self._live()
        m.pop(user_key, None)
        if m:
            self.h.state[self._k] = m
        else:
            self.clear()

    def iterator(self) -> Iterator[tuple[Any, Any]]:
        return ((u, e[0]) for u, e in self._live().items())

    def keys(self) -> Iterator[Any]:
        return iter(self._live())

    def values(self) -> Iterator[Any]:
        return (e[0] for e in self._live().values())
