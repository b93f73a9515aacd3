"""Incremental shard state: a dict that records its changed keys, and changelogs.

A keyed function receives its shard's state as a :class:`TrackedDict` (a
``dict``); the backend then writes only the keys the batch changed, as a
changelog on top of the version it read, and compacts into a full snapshot
every few batches or when the changelogs grow past a fraction of the snapshot.
Recovery reads the snapshot and applies the changelogs in order. This is the
changelog checkpointing of Spark's RocksDB state store provider, at the grain
of a shard version (paper 000, §3.2: the batch boundary is the barrier).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Chain", "TrackedDict", "apply_log", "is_log", "log_record"]

# Values a function cannot change in place: reading one does not dirty its key.
# A mutable value read through [] or get() is assumed changed (it may be).
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), complex, frozenset, tuple})
_LOG = "streamscale-changelog-1"


class TrackedDict(dict):  # type: ignore[type-arg]
    """A ``dict`` recording which keys may have changed since :meth:`reset`.

    Keys set, deleted, popped, or read with a mutable value are dirty; a call
    of ``values()`` or ``items()`` while mutable values are present makes the
    whole dict ``opaque`` (the next version is written as a full snapshot).
    """

    __slots__ = ("dirty", "opaque")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dirty: set[Any] = set()
        self.opaque = False

    def reset(self) -> None:
        self.dirty = set()
        self.opaque = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __setitem__(self, k: Any, v: Any) -> None:
        self.dirty.add(k)
        super().__setitem__(k, v)

    def __delitem__(self, k: Any) -> None:
        super().__delitem__(k)
        self.dirty.add(k)

    def __getitem__(self, k: Any) -> Any:
        v = super().__getitem__(k)
        if type(v) not in _IMMUTABLE:
            self.dirty.add(k)
        return v

    def get(self, k: Any, default: Any = None) -> Any:
        v = super().get(k, default)
        if type(v) not in _IMMUTABLE:
            self.dirty.add(k)
        return v

    def setdefault(self, k: Any, default: Any = None) -> Any:
        if k not in self:
            self[k] = default
        return self[k]

    def pop(self, k: Any, *default: Any) -> Any:
        self.dirty.add(k)
        return super().pop(k, *default)

    def popitem(self) -> tuple[Any, Any]:
        k, v = super().popitem()
        self.dirty.add(k)
        return k, v

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __ior__(self, other: Any) -> TrackedDict:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        self.dirty.update(self.keys())
        super().clear()

    def _scan(self) -> None:
        if not self.opaque and any(type(v) not in _IMMUTABLE for v in dict.values(self)):
            self.opaque = True

    def values(self) -> Any:  # type: ignore[override]
        self._scan()
        return super().values()

    def items(self) -> Any:  # type: ignore[override]
        self._scan()
        return super().items()

    def copy(self) -> dict[Any, Any]:  # type: ignore[override]
        return dict(self)


@dataclass(frozen=True, slots=True)
class Chain:
    """What reading a version took: the versions it depends on, and sizes.

    ``files`` are the versions to read, snapshot first, ending with the version
    itself; ``snap_bytes``/``snap_keys`` describe the snapshot, ``log_bytes``
    the changelogs since it.
    """

    files: tuple[int, ...]
    snap_bytes: int
    snap_keys: int
    log_bytes: int


def log_record(
    base: Chain, state: Mapping[Any, Any], dirty: Iterable[Any]
) -> tuple[str, tuple[int, ...], int, int, int, dict[Any, Any], tuple[Any, ...]]:
    """The changelog of the keys in ``dirty``, on top of version ``base.files[-1]``."""
    puts: dict[Any, Any] = {}
    dels: list[Any] = []
    for k in dirty:
        if k in state:
            puts[k] = dict.__getitem__(state, k)
        else:
            dels.append(k)
    return (_LOG, base.files, base.snap_bytes, base.snap_keys, base.log_bytes, puts, tuple(dels))


def is_log(obj: Any) -> bool:
    return isinstance(obj, tuple) and len(obj) == 7 and obj[0] == _LOG


def apply_log(state: dict[Any, Any], record: tuple[Any, ...]) -> None:
    """Apply one changelog record's puts and deletes to ``state`` in place."""
    dict.update(state, record[5])
    for k in record[6]:
        dict.pop(state, k, None)
