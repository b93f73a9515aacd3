"""Shard state with exactly-once semantics through idempotent versions.

State lives per (operator, shard) and is versioned by the id of the batch
that wrote it. Processing batch ``b`` reads the newest version ``< b`` that is
committed and writes version ``b``; the driver commits ``b`` (an atomic marker
write) only after every task of the batch succeeded. When Spark re-runs batch
``b`` after a crash, or after an operator function raised, it reads the same
input version again and overwrites version ``b``: an update is never applied
twice and never lost. This is the micro-batch form of paper 000's consistent
shard reassignment (§3.2): the batch boundary is the barrier, and state is
never split between two tasks.

Each shard keeps two versions (the newest committed one and the one being
written), so a replay of the last committed batch still finds its input.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Hint", "LocalStateBackend", "StateBackend", "VersionIndex"]

#: The driver's view of a shard's input version: (version, or -1 for none;
#: the attempt that wrote it, or ``None`` when unknown, e.g. after a restart).
Hint = tuple[int, str | None]

# Worker-local cache, path -> (version, attempt, state). Correctness never
# depends on it: an entry is used only when version AND writing attempt match
# the driver's hint (a failed attempt's state never matches a committed one),
# and it is popped before use, so a function that fails half-way through
# mutating a state leaves nothing behind.
_CACHE: dict[str, tuple[int, str, dict[Any, Any]]] = {}
# Shards that moved to another worker leave stale entries: bound the cache
# (oldest first out) so a worker never holds every shard's state forever.
_CACHE_MAX = 4096


@runtime_checkable
class StateBackend(Protocol):
    """Where shard state lives; must be picklable (it travels to Spark tasks)."""

    def read(
        self, operator: str, shard: int, upto: int, hint: Hint | None = None
    ) -> tuple[dict[Any, Any], int | None]:
        """Newest version ``<= upto`` of a shard's state and its version (``None``: empty).

        ``hint`` is the driver's knowledge of that version (see :class:`VersionIndex`).
        """
        ...

    def write(
        self,
        operator: str,
        shard: int,
        version: int,
        state: dict[Any, Any],
        *,
        attempt: str | None = None,
        drop: Iterable[int] = (),
    ) -> int:
        """Write ``version`` (replacing one of the same version), remove ``drop``; its bytes."""
        ...

    def versions(self, operator: str, shard: int) -> list[int]:
        """Versions present for a shard, ascending (committed or not)."""
        ...

    def commit(self, operator: str, version: int) -> None:
        """Mark every version ``<= version`` of ``operator`` as committed."""
        ...

    def committed(self, operator: str) -> int:
        """The last committed batch id of ``operator`` (``-1`` before the first)."""
        ...

    def load_all(self, operator: str) -> dict[int, dict[Any, Any]]:
        """The committed state of every shard of ``operator`` that has one."""
        ...


class LocalStateBackend:
    """State on a local (or shared) file system: ``root/<operator>/<shard>/<version>.pkl``.

    Tasks on one node share the directory, so moving a shard between tasks of
    one node moves no bytes (paper 000, §3, intra-process state sharing).
    Writes go to a temporary file renamed into place, so a killed process never
    leaves a half-written version behind.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = str(root)
        self._stale: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"LocalStateBackend({self.root!r})"

    def __reduce__(self) -> tuple[type[LocalStateBackend], tuple[str]]:
        return (LocalStateBackend, (self.root,))

    def _dir(self, operator: str, shard: int) -> str:
        return os.path.join(self.root, operator, str(shard))

    @staticmethod
    def _versions(path: str) -> list[int]:
        try:
            names = os.listdir(path)
        except FileNotFoundError:
            return []
        return sorted(int(n[:-4]) for n in names if n.endswith(".pkl") and n[:-4].isdigit())

    def versions(self, operator: str, shard: int) -> list[int]:
        return self._versions(self._dir(operator, shard))

    def read(
        self, operator: str, shard: int, upto: int, hint: Hint | None = None
    ) -> tuple[dict[Any, Any], int | None]:
        path = self._dir(operator, shard)
        cached = _CACHE.pop(path, None)
        if hint is not None:
            v, attempt = hint
            if v < 0:
                return {}, None
            if cached is not None and attempt is not None and cached[:2] == (v, attempt):
                return cached[2], v
            try:
                with open(os.path.join(path, f"{v}.pkl"), "rb") as f:
                    return pickle.load(f), v
            except FileNotFoundError:
                pass  # a stale hint: fall back to listing
        versions = self._versions(path)
        usable = [v for v in versions if v <= upto]
        if not usable:
            return {}, None
        v = usable[-1]
        # Versions older than the one read are never needed again (a replay
        # reads this same one): the next write of this shard removes them.
        self._stale[path] = [x for x in versions if x < v]
        with open(os.path.join(path, f"{v}.pkl"), "rb") as f:
            return pickle.load(f), v

    def write(
        self,
        operator: str,
        shard: int,
        version: int,
        state: dict[Any, Any],
        *,
        attempt: str | None = None,
        drop: Iterable[int] = (),
    ) -> int:
        path = self._dir(operator, shard)
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = os.path.join(path, f".{version}.{os.getpid()}.tmp")
        try:
            f = open(tmp, "wb")  # noqa: SIM115
        except FileNotFoundError:
            os.makedirs(path, exist_ok=True)
            f = open(tmp, "wb")  # noqa: SIM115
        with f:
            f.write(data)
        os.replace(tmp, os.path.join(path, f"{version}.pkl"))
        if attempt is not None:
            _CACHE[path] = (version, attempt, state)
            while len(_CACHE) > _CACHE_MAX:
                del _CACHE[next(iter(_CACHE))]
        for v in {*self._stale.pop(path, ()), *drop}:
            if v < version:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(path, f"{v}.pkl"))
        return len(data)

    def commit(self, operator: str, version: int) -> None:
        path = os.path.join(self.root, operator)
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, f"._committed.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            f.write(str(version))
        os.replace(tmp, os.path.join(path, "_committed"))

    def committed(self, operator: str) -> int:
        try:
            with open(os.path.join(self.root, operator, "_committed")) as f:
                return int(f.read().strip() or -1)
        except FileNotFoundError:
            return -1

    def load_all(self, operator: str) -> dict[int, dict[Any, Any]]:
        upto = self.committed(operator)
        base = os.path.join(self.root, operator)
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return {}
        out: dict[int, dict[Any, Any]] = {}
        for n in names:
            if n.isdigit():
                state, v = self.read(operator, int(n), upto)
                if v is not None:
                    out[int(n)] = state
        return out


class VersionIndex:
    """The driver's record of each shard's committed versions (newest last).

    Built once by listing the backend, then kept up to date from the shards
    each committed batch wrote, so tasks open the right version directly (no
    directory listing) and may use their worker cache.
    """

    def __init__(self, backend: StateBackend, operator: str, shards: int) -> None:
        self.operator = operator
        self._v: list[list[Hint]] = [
            [(v, None) for v in backend.versions(operator, g)] for g in range(shards)
        ]

    def hints(self, upto: int) -> tuple[tuple[Hint, ...], tuple[tuple[int, ...], ...]]:
        """Per shard: the input version ``<= upto``, and the older versions to remove."""
        hints: list[Hint] = []
        drops: list[tuple[int, ...]] = []
        for vs in self._v:
            usable = [h for h in vs if h[0] <= upto]
            h: Hint = usable[-1] if usable else (-1, None)
            hints.append(h)
            drops.append(tuple(v for v, _ in vs if v < h[0]))
        return tuple(hints), tuple(drops)

    def committed(
        self, batch: int, attempt: str, written: Iterable[int], hints: tuple[Hint, ...]
    ) -> None:
        """Record that ``batch`` (run as ``attempt``) committed new versions of ``written``."""
        for g in written:
            prev = hints[g]
            self._v[g] = ([prev] if prev[0] >= 0 else []) + [(batch, attempt)]
