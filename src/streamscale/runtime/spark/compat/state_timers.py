"""Per-key timers in a shard's state dict, indexed by time bucket and registering batch.

A timer is an expiry timestamp (ms) registered for a grouping key, as with
Spark 4's ``StatefulProcessorHandle.registerTimer``. Three kinds of entries
hold them, all immutable tuples so that reading one never marks it changed:

* ``("__typed__", "timer", "", key)``: the key's expiries, ascending
  (``listTimers``) — the authority on which timers exist;
* ``("__timers__", bucket, stamp)``: ``(expiry, key)`` pairs registered by the
  batch of processing time ``stamp`` whose expiry falls in ``bucket`` (of
  ``width`` ms), in registration order;
* ``("__timers__",)``: ``(width, ((bucket, stamp), ...))``, ascending.

Registering a timer rewrites the key's entry and the index entry of this
batch; deleting one rewrites only the key's entry (the index pair goes stale
and is skipped, then dropped, when its bucket comes due). A batch's changelog
thus grows with the timers it touched, never with the number of timers the
shard holds. Finding the timers due at a time reads only the index entries of
buckets that start at or before it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

__all__ = ["delete_timer", "key_timers", "pop_due", "register_timer"]

_DIR: tuple[str] = ("__timers__",)
_BUCKET = "__timers__"
_PER_KEY = ("__typed__", "timer", "")

State = MutableMapping[Any, Any]


def key_timers(state: State, key: Any) -> tuple[int, ...]:
    """The expiries registered for ``key``, ascending."""
    return dict.get(state, (*_PER_KEY, key), ())  # type: ignore[arg-type, no-any-return]


def _directory(state: State, width: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    got = dict.get(state, _DIR)  # type: ignore[arg-type]
    return (width, ()) if got is None else got  # a stored width wins: buckets stay findable


def register_timer(state: State, key: Any, expiry_ms: int, width: int, stamp: int) -> None:
    """Register a timer at ``expiry_ms`` for ``key`` (a no-op when it exists).

    ``stamp`` is the registering batch's processing time.
    """
    t = int(expiry_ms)
    mine = key_timers(state, key)
    if t in mine:
        return
    state[(*_PER_KEY, key)] = tuple(sorted((*mine, t)))
    w, entries = _directory(state, width)
    at = (t // w, int(stamp))
    ek = (_BUCKET, *at)
    state[ek] = (*dict.get(state, ek, ()), (t, key))  # type: ignore[arg-type]
    if at not in entries:
        state[_DIR] = (w, tuple(sorted((*entries, at))))


def delete_timer(state: State, key: Any, expiry_ms: int) -> None:
    """Delete ``key``'s timer at ``expiry_ms`` (a no-op when there is none)."""
    t = int(expiry_ms)
    mine = key_timers(state, key)
    if t not in mine:
        return
    rest = tuple(x for x in mine if x != t)
    if rest:
        state[(*_PER_KEY, key)] = rest
    else:
        del state[(*_PER_KEY, key)]


def pop_due(state: State, limit_ms: int, width: int) -> list[tuple[Any, int]]:
    """Remove and return every ``(key, expiry)`` with ``expiry <= limit_ms``, earliest first.

    Timers of one expiry keep their registration order.
    """
    if dict.get(state, _DIR) is None:  # type: ignore[arg-type]
        return []
    w, entries = _directory(state, width)
    due: list[tuple[int, Any]] = []
    seen: set[tuple[int, Any]] = set()
    left: list[tuple[int, int]] = []
    for at in entries:
        if at[0] * w > limit_ms:
            left.append(at)
            continue
        ek = (_BUCKET, *at)
        pending = []
        for e in dict.get(state, ek, ()):  # type: ignore[arg-type]
            if e in seen or e[0] not in key_timers(state, e[1]):
                continue  # deleted (or a duplicate of a re-registered timer)
            seen.add(e)
            (due if e[0] <= limit_ms else pending).append(e)
        if pending:
            state[ek] = tuple(pending)
            left.append(at)
        else:
            state.pop(ek, None)
    if len(left) != len(entries):
        if left:
            state[_DIR] = (w, tuple(left))
        else:
            state.pop(_DIR, None)
    due.sort(key=lambda e: e[0])
    for t, key in due:
        rest = tuple(x for x in key_timers(state, key) if x != t)
        if rest:
            state[(*_PER_KEY, key)] = rest
        else:
            state.pop((*_PER_KEY, key), None)
    return [(key, t) for t, key in due]
