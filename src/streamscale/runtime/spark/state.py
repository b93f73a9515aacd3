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

A shard's state is never silently empty: a version the driver knows to be
committed that cannot be read (deleted, truncated, on another host's disk)
fails the batch with one line naming the operator, the shard and the path.
Versions and the commit marker are written to a temporary file renamed into
place (optionally fsynced, with their directory), so a crash between writing
state and committing leaves the previous version readable.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs, urlsplit

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state_log import Chain, TrackedDict, apply_log, is_log, log_record

__all__ = ["Hint", "LocalStateBackend", "StateBackend", "VersionIndex", "state_backend"]

#: The driver's view of a shard's input version: (version, or -1 for none;
#: the attempt that wrote it, or ``None`` when unknown, e.g. after a restart).
Hint = tuple[int, str | None]

# Worker-local cache, path -> (version, attempt, state). Correctness never
# depends on it: an entry is used only when version AND writing attempt match
# the driver's hint (a failed attempt's state never matches a committed one),
# and it is popped before use, so a function that fails half-way through
# mutating a state leaves nothing behind.
_CACHE: dict[str, tuple[int, str, TrackedDict, Chain]] = {}
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
    leaves a half-written version behind; with ``fsync`` the data and the
    directory entry are flushed to the disk before a write or commit returns.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        fsync: bool = False,
        snapshot_every: int = 16,
        snapshot_ratio: float = 0.5,
    ) -> None:
        self.root = str(root)
        self.fsync = fsync
        self.snapshot_every = max(1, int(snapshot_every))
        self.snapshot_ratio = float(snapshot_ratio)
        self.bytes_written = 0  # by this process: what a batch costs the store
        self.bytes_read = 0  # from the store, not the worker cache: state moved here
        self._load_workers = 1
        self._stale: dict[str, list[int]] = {}
        self._open: dict[str, tuple[Chain, dict[Any, Any]]] = {}

    def __repr__(self) -> str:
        return f"LocalStateBackend({self.root!r}, fsync={self.fsync})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_local, (self.root, self.fsync, self.snapshot_every, self.snapshot_ratio))

    def _put(self, path: str, name: str, data: bytes) -> None:
        """Atomically place ``data`` at ``path/name`` (temporary file renamed into place)."""
        tmp = os.path.join(path, f".{name}.{os.getpid()}.tmp")
        try:
            f = open(tmp, "wb")  # noqa: SIM115
        except FileNotFoundError:
            os.makedirs(path, exist_ok=True)
            f = open(tmp, "wb")  # noqa: SIM115
        with f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, name))
        if self.fsync:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # File primitives: an object-store backend overrides these four.
    def _get(self, file: str) -> bytes:
        with open(file, "rb") as f:
            return f.read()

    def _list(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

    def _remove(self, file: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(file)

    def _load(self, operator: str, shard: int, v: int) -> tuple[TrackedDict, Chain]:
        """Version ``v`` of a shard (snapshot + changelogs), known to exist, and its chain."""
        obj, n = self._obj(operator, shard, v)
        if isinstance(obj, dict):
            return TrackedDict(obj), Chain((v,), n, len(obj), 0)
        files: tuple[int, ...] = obj[1]
        snap, _ = self._obj(operator, shard, files[0])
        if not isinstance(snap, dict):
            raise StreamscaleError(
                f"state of operator {operator!r} shard {shard}: version {files[0]} is not a "
                "snapshot",
                item=os.path.join(self._dir(operator, shard), f"{files[0]}.pkl"),
            )
        state = TrackedDict(snap)
        for c in files[1:]:
            rec, _ = self._obj(operator, shard, c)
            apply_log(state, rec)
        apply_log(state, obj)
        return state, Chain((*files, v), obj[2], obj[3], obj[4] + n)

    def _obj(self, operator: str, shard: int, v: int) -> tuple[Any, int]:
        """One stored version (snapshot dict or changelog record) and its bytes."""
        file = os.path.join(self._dir(operator, shard), f"{v}.pkl")
        try:
            raw = self._get(file)
            self.bytes_read += len(raw)
            state = pickle.loads(raw)
        except FileNotFoundError:
            raise StreamscaleError(
                f"state of operator {operator!r} shard {shard}: committed version {v} is missing",
                item=file,
            ) from None
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            raise StreamscaleError(
                f"state of operator {operator!r} shard {shard}: version {v} is unreadable ({e})",
                item=file,
            ) from None
        if not (isinstance(state, dict) or is_log(state)):
            raise StreamscaleError(
                f"state of operator {operator!r} shard {shard}: version {v} is not a state",
                item=file,
            )
        return state, len(raw)

    def _dir(self, operator: str, shard: int) -> str:
        return os.path.join(self.root, operator, str(shard))

    def _versions(self, path: str) -> list[int]:
        names = self._list(path)
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
                self._open[path] = (cached[3], cached[2])
                return cached[2], v
            # The driver knows v committed: if it is gone the batch fails (never empty).
            return self._opened(path, self._load(operator, shard, v)), v
        versions = self._versions(path)
        usable = [v for v in versions if v <= upto]
        if not usable:
            return {}, None
        v = usable[-1]
        # Versions older than the one read are never needed again (a replay
        # reads this same one): the next write of this shard removes them.
        self._stale[path] = [x for x in versions if x < v]
        return self._opened(path, self._load(operator, shard, v)), v

    def _opened(self, path: str, loaded: tuple[TrackedDict, Chain]) -> TrackedDict:
        self._open[path] = (loaded[1], loaded[0])
        return loaded[0]

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
        opened = self._open.pop(path, None)
        data: bytes | None = None
        if opened is not None and opened[1] is state and opened[0].files[-1] < version:
            base = opened[0]
            if (
                isinstance(state, TrackedDict)
                and not state.opaque
                and len(base.files) < self.snapshot_every
            ):
                data = pickle.dumps(log_record(base, state, state.dirty), protocol=_PROTOCOL)
                if base.log_bytes + len(data) > self.snapshot_ratio * base.snap_bytes:
                    data = None  # compact: the changelogs outgrew their snapshot
                else:
                    chain = Chain((*base.files, version), *_sizes(base), base.log_bytes + len(data))
        if data is None:
            plain = dict(state)
            data = pickle.dumps(plain, protocol=_PROTOCOL)
            chain = Chain((version,), len(data), len(plain), 0)
        self._put(path, f"{version}.pkl", data)
        self.bytes_written += len(data)
        tracked = state if isinstance(state, TrackedDict) else TrackedDict(state)
        tracked.reset()
        if attempt is not None:
            _CACHE[path] = (version, attempt, tracked, chain)
            while len(_CACHE) > _CACHE_MAX:
                del _CACHE[next(iter(_CACHE))]
        self._collect(path, version, opened[0] if opened else None, drop)
        if chain.snap_keys:
            return int(chain.snap_bytes * max(len(state), 1) / chain.snap_keys)
        return chain.snap_bytes + chain.log_bytes

    def _collect(self, path: str, version: int, base: Chain | None, drop: Iterable[int]) -> None:
        """Remove versions below the input version that its chain does not need."""
        candidates = {*self._stale.pop(path, ()), *drop}
        limit = version if base is None else base.files[-1]
        if base is not None and len(base.files) == 1:  # a snapshot input: list once per cycle
            candidates.update(self._versions(path))
        keep = set(base.files) if base is not None else set()
        for v in candidates:
            if v < limit and v not in keep:
                self._remove(os.path.join(path, f"{v}.pkl"))

    def commit(self, operator: str, version: int) -> None:
        self._put(os.path.join(self.root, operator), "_committed", str(version).encode())

    def committed(self, operator: str) -> int:
        try:
            return int(self._get(os.path.join(self.root, operator, "_committed")).strip() or -1)
        except FileNotFoundError:
            return -1

    def load_all(self, operator: str) -> dict[int, dict[Any, Any]]:
        upto = self.committed(operator)
        shards = [int(n) for n in self._list(os.path.join(self.root, operator)) if n.isdigit()]
        if self._load_workers > 1 and len(shards) > 1:  # a remote store: overlap the requests
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(self._load_workers, len(shards))) as pool:
                got = list(pool.map(lambda g: self.read(operator, g, upto), shards))
        else:
            got = [self.read(operator, g, upto) for g in shards]
        return {g: state for g, (state, v) in zip(shards, got, strict=True) if v is not None}


def _local(root: str, fsync: bool, every: int = 16, ratio: float = 0.5) -> LocalStateBackend:
    return LocalStateBackend(root, fsync=fsync, snapshot_every=every, snapshot_ratio=ratio)


def _sizes(c: Chain) -> tuple[int, int]:
    return c.snap_bytes, c.snap_keys


_PROTOCOL = pickle.HIGHEST_PROTOCOL


_TRUE = {"1", "true", "yes", "on"}


def _snapshot_opts(opts: dict[str, list[str]], url: str) -> dict[str, Any]:
    """``snapshot_every`` (versions per snapshot) and ``snapshot_ratio`` from a URL query."""
    out: dict[str, Any] = {}
    for name, kind in (("snapshot_every", int), ("snapshot_ratio", float)):
        if name in opts:
            try:
                out[name] = kind(opts[name][-1])
            except ValueError:
                raise StreamscaleError(f"{name} must be a number", item=url) from None
    return out


def state_backend(url: str | Path) -> StateBackend:
    """The state backend a URL names: a local path or ``file://`` URL (the default).

    ``s3://bucket/prefix?endpoint=http://host:port`` (and other ``pyarrow.fs``
    schemes) name a :class:`~streamscale.runtime.spark.state_fs.FsStateBackend`,
    which every executor of a cluster reads alike.

    Query options: ``fsync=1`` flushes every version and commit marker to the
    disk before returning (e.g. ``file:///data/state?fsync=1``);
    ``snapshot_every=N`` and ``snapshot_ratio=R`` set when changelogs are
    compacted into a snapshot (every ``N`` versions, or when they outgrow ``R``
    times the snapshot; defaults 16 and 0.5).
    """
    text = str(url)
    parts = urlsplit(text)
    if parts.scheme in ("", "file"):
        opts = parse_qs(parts.query)
        unknown = sorted(set(opts) - {"fsync", "snapshot_every", "snapshot_ratio"})
        if unknown:
            raise StreamscaleError(f"unknown state backend option {unknown[0]!r}", item=text)
        root = parts.path if parts.scheme == "file" else text.split("?", 1)[0]
        if not root:
            raise StreamscaleError("state backend URL names no path", item=text)
        fsync = opts.get("fsync", ["0"])[-1].lower() in _TRUE
        return LocalStateBackend(root, fsync=fsync, **_snapshot_opts(opts, text))
    if parts.scheme in ("s3", "hdfs", "gs", "abfs"):
        from streamscale.runtime.spark.state_fs import FsStateBackend

        return FsStateBackend(text)
    raise StreamscaleError(f"unsupported state backend scheme {parts.scheme!r}", item=text)


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
