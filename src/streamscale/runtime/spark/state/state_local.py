"""The state backend on a local (or shared) file system.

The protocol (versions per batch, commit markers, layout records) is described in
:mod:`streamscale.runtime.spark.state.state`, which also builds a backend from a URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state.state_api import LAYOUT_FILE, Hint
from streamscale.runtime.spark.state.state_io import IoPool, first_error
from streamscale.runtime.spark.state.state_log import (
    Chain,
    TrackedDict,
    apply_log,
    is_log,
    log_record,
)

__all__ = ["LocalStateBackend"]

# Worker-local cache, path -> (version, attempt, state). Correctness never
# depends on it: an entry is used only when version AND writing attempt match
# the driver's hint (a failed attempt's state never matches a committed one),
# and it is popped before use, so a function that fails half-way through
# mutating a state leaves nothing behind.
_CACHE: dict[str, tuple[int, str, TrackedDict, Chain]] = {}
# Shards that moved to another worker leave stale entries: bound the cache
# (oldest first out) so a worker never holds every shard's state forever.
_CACHE_MAX = 4096


class LocalStateBackend:
    """State on a local (or shared) file system: ``root/<operator>/<shard>/<version>.pkl``.

    Tasks on one node share the directory, so moving a shard between tasks of
    one node moves no bytes (paper 000, §3, intra-process state sharing).
    Writes go to a temporary file renamed into place, so a killed process never
    leaves a half-written version behind; with ``fsync`` the data and the
    directory entry are flushed to the disk before a write or commit returns.
    :meth:`write_many`, :meth:`read_many` and :meth:`load_all` issue their
    shards' requests on up to ``io_threads`` threads at once (1: in turn).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        fsync: bool = False,
        snapshot_every: int = 16,
        snapshot_ratio: float = 0.5,
        io_threads: int = 1,
    ) -> None:
        self.root = str(root)
        self.fsync = fsync
        self.snapshot_every = max(1, int(snapshot_every))
        self.snapshot_ratio = float(snapshot_ratio)
        self.io_threads = max(1, int(io_threads))
        self.bytes_written = 0  # by this process: what a batch costs the store
        self.bytes_read = 0  # from the store, not the worker cache: state moved here
        self._lock = threading.Lock()
        self._shard_io = IoPool(self.io_threads, "shard")  # one task per shard
        self._chain_io = IoPool(self.io_threads, "chain")  # the versions of one shard's chain
        self._stale: dict[str, list[int]] = {}
        self._open: dict[str, tuple[Chain, dict[Any, Any]]] = {}

    def __repr__(self) -> str:
        return f"LocalStateBackend({self.root!r}, fsync={self.fsync})"

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.root, self.fsync, self.snapshot_every, self.snapshot_ratio, self.io_threads)
        return (_local, args)

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
        """Version ``v`` of a shard (snapshot + changelogs), known to exist, and its chain.

        The changelog names every version it builds on, so those are fetched at once.
        """
        obj, n = self._obj(operator, shard, v)
        if isinstance(obj, dict):
            return TrackedDict(obj), Chain((v,), n, len(obj), 0)
        files: tuple[int, ...] = obj[1]
        got = self._chain_io.run_all([partial(self._obj, operator, shard, c) for c in files])
        err = first_error(got)
        if err is not None:
            raise err
        snap = got[0][0]  # type: ignore[index]
        if not isinstance(snap, dict):
            raise StreamscaleError(
                f"state of operator {operator!r} shard {shard}: version {files[0]} is not a "
                "snapshot",
                item=os.path.join(self._dir(operator, shard), f"{files[0]}.pkl"),
            )
        state = TrackedDict(snap)
        for rec, _ in got[1:]:  # type: ignore[misc]
            apply_log(state, rec)
        apply_log(state, obj)
        return state, Chain((*files, v), obj[2], obj[3], obj[4] + n)

    def _obj(self, operator: str, shard: int, v: int) -> tuple[Any, int]:
        """One stored version (snapshot dict or changelog record) and its bytes."""
        file = os.path.join(self._dir(operator, shard), f"{v}.pkl")
        where = f"state of operator {operator!r} shard {shard}"
        try:
            raw = self._get(file)
            state = pickle.loads(raw)
        except FileNotFoundError:
            raise StreamscaleError(
                f"{where}: committed version {v} is missing", item=file
            ) from None
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            raise StreamscaleError(f"{where}: version {v} is unreadable ({e})", item=file) from None
        except OSError as e:
            raise StreamscaleError(f"{where}: reading version {v} failed ({e})", item=file) from e
        with self._lock:
            self.bytes_read += len(raw)
        if not (isinstance(state, dict) or is_log(state)):
            raise StreamscaleError(f"{where}: version {v} is not a state", item=file)
        return state, len(raw)

    def _dir(self, operator: str, shard: int) -> str:
        return os.path.join(self.root, operator, str(shard))

    def version_file(self, operator: str, shard: int, version: int) -> str:
        """Where ``version`` of a shard is stored."""
        return os.path.join(self._dir(operator, shard), f"{version}.pkl")

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

    def read_many(
        self,
        operator: str,
        shards: Iterable[int],
        upto: int,
        hints: Mapping[int, Hint] | None = None,
    ) -> dict[int, tuple[dict[Any, Any], int | None]]:
        """:meth:`read` of several shards, their requests issued together."""
        h = hints or {}
        out: dict[int, tuple[dict[Any, Any], int | None]] = {}
        misses = []
        for g in shards:  # worker-cache hits and empty shards need no request
            hint = h.get(g)
            if hint is not None and (hint[0] < 0 or self._cached(operator, g, hint)):
                out[g] = self.read(operator, g, upto, hint)
            else:
                misses.append(g)
        got = self._shard_io.run_all(
            [partial(self.read, operator, g, upto, h.get(g)) for g in misses]
        )
        err = first_error(got)
        if err is not None:
            raise err
        out.update(zip(misses, got, strict=True))  # type: ignore[arg-type]
        return out

    def _cached(self, operator: str, shard: int, hint: Hint) -> bool:
        c = _CACHE.get(self._dir(operator, shard))
        return c is not None and hint[1] is not None and c[:2] == hint

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
        return self.write_many(
            operator, version, {shard: state}, attempt=attempt, drops={shard: drop}
        )[shard]

    def write_many(
        self,
        operator: str,
        version: int,
        states: Mapping[int, dict[Any, Any]],
        *,
        attempt: str | None = None,
        drops: Mapping[int, Iterable[int]] | None = None,
    ) -> dict[int, int]:
        """Write ``version`` of several shards at once; each shard's state bytes.

        Each shard's PUT (and the removal of versions no longer needed) starts
        as soon as its version is encoded, while the next shard's is; the call
        returns once all have ended. A failure raises one error naming the
        operator, the shard and the path, after the other requests finished:
        nothing of this call is left in flight. Until the driver commits
        ``version`` none of it is read as committed, so a failed call leaves
        the previous version.
        """
        plans: list[_Write] = []
        failed: list[Exception] = []

        def tasks() -> Iterator[Callable[[], None]]:
            for g, st in states.items():
                try:
                    plans.append(self._plan(operator, g, version, st, (drops or {}).get(g, ())))
                except Exception as e:  # raised once the PUTs already started have ended
                    failed.append(
                        StreamscaleError(
                            f"state of operator {operator!r} shard {g}: encoding version "
                            f"{version} failed ({type(e).__name__}: {e})",
                            item=os.path.join(self._dir(operator, g), f"{version}.pkl"),
                        )
                    )
                    return
                yield partial(self._apply, plans[-1])

        err = first_error(self._shard_io.run_all(tasks()))
        if failed or err is not None:
            raise failed[0] if failed else err  # type: ignore[misc]
        out: dict[int, int] = {}
        for p in plans:
            self.bytes_written += len(p.data)
            tracked = p.state if isinstance(p.state, TrackedDict) else TrackedDict(p.state)
            tracked.reset()
            if attempt is not None:
                _CACHE[p.path] = (version, attempt, tracked, p.chain)
            c = p.chain
            n = len(p.state)
            out[p.shard] = (
                int(c.snap_bytes * max(n, 1) / c.snap_keys)
                if c.snap_keys
                else (c.snap_bytes + c.log_bytes)
            )
        while len(_CACHE) > _CACHE_MAX:
            del _CACHE[next(iter(_CACHE))]
        return out

    def _plan(
        self, operator: str, shard: int, version: int, state: dict[Any, Any], drop: Iterable[int]
    ) -> _Write:
        """Encode one shard's version: a changelog on the version it read, or a snapshot."""
        path = self._dir(operator, shard)
        opened = self._open.pop(path, None)
        base = opened[0] if opened is not None and opened[1] is state else None
        data: bytes | None = None
        if (
            base is not None
            and base.files[-1] < version
            and isinstance(state, TrackedDict)
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
        gc_base = opened[0] if opened else None
        candidates = {*self._stale.pop(path, ()), *drop}
        return _Write(operator, shard, version, path, data, chain, state, gc_base, candidates)

    def _apply(self, p: _Write) -> None:
        """PUT one shard's version, then remove versions below its input its chain does not need."""
        name = f"{p.version}.pkl"
        try:
            self._put(p.path, name, p.data)
            base = p.base
            limit = p.version if base is None else base.files[-1]
            if base is not None and len(base.files) == 1:  # a snapshot input: list once per cycle
                p.candidates.update(self._versions(p.path))
            keep = set(base.files) if base is not None else set()
            for v in p.candidates:
                if v < limit and v not in keep:
                    self._remove(os.path.join(p.path, f"{v}.pkl"))
        except Exception as e:
            raise StreamscaleError(
                f"state of operator {p.operator!r} shard {p.shard}: writing version "
                f"{p.version} failed ({type(e).__name__}: {e})",
                item=os.path.join(p.path, name),
            ) from e

    def commit(self, operator: str, version: int, versions: Sequence[int] | None = None) -> None:
        """Mark ``version`` committed; with ``versions`` (each shard's newest committed
        version, ``-1`` for none) the marker records them, so that a version it names and
        the store lost is refused instead of read as an older one or as empty."""
        if versions is None:
            data = str(version).encode()
        else:
            data = json.dumps({"batch": version, "versions": list(versions)}).encode()
        self._put(os.path.join(self.root, operator), "_committed", data)

    def marker_file(self, operator: str) -> str:
        """The path of ``operator``'s commit marker."""
        return os.path.join(self.root, operator, "_committed")

    def _marker(self, operator: str) -> tuple[int, list[int] | None]:
        file = self.marker_file(operator)
        try:
            raw = self._get(file).strip()
        except FileNotFoundError:
            return -1, None
        try:
            if not raw.startswith(b"{"):
                return int(raw or -1), None
            rec = json.loads(raw)
            return int(rec["batch"]), [int(v) for v in rec["versions"]]
        except (ValueError, KeyError, TypeError) as e:
            raise StreamscaleError(
                f"commit marker of operator {operator!r} is unreadable ({e})", item=file
            ) from None

    def committed(self, operator: str) -> int:
        return self._marker(operator)[0]

    def committed_versions(self, operator: str) -> tuple[int, list[int] | None]:
        """The last committed batch of ``operator`` and each shard's newest version it
        names (``None``: a marker that names none, written before markers named them)."""
        return self._marker(operator)

    def layout(self, operator: str) -> dict[str, Any] | None:
        """The layout record of ``operator``'s state (``None``: none written)."""
        file = os.path.join(self.root, operator, LAYOUT_FILE)
        try:
            raw = self._get(file)
        except FileNotFoundError:
            return None
        try:
            rec = json.loads(raw)
        except ValueError as e:
            raise StreamscaleError(f"layout record is unreadable ({e})", item=file) from None
        if not isinstance(rec, dict):
            raise StreamscaleError("layout record is not an object", item=file)
        return rec

    def write_layout(self, operator: str, record: Mapping[str, Any]) -> None:
        """Write ``operator``'s layout record (atomically: wholly there or absent)."""
        data = json.dumps(dict(record), sort_keys=True).encode()
        self._put(os.path.join(self.root, operator), LAYOUT_FILE, data)

    def has_shards(self, operator: str) -> bool:
        """Whether any shard of ``operator`` has stored state (committed or not)."""
        return any(n.isdigit() for n in self._list(os.path.join(self.root, operator)))

    def load_all(self, operator: str) -> dict[int, dict[Any, Any]]:
        upto = self.committed(operator)
        shards = [int(n) for n in self._list(os.path.join(self.root, operator)) if n.isdigit()]
        got = self.read_many(operator, shards, upto)
        return {g: state for g, (state, v) in got.items() if v is not None}


@dataclass(slots=True)
class _Write:
    """One shard's encoded version and what its PUT removes afterwards."""

    operator: str
    shard: int
    version: int
    path: str
    data: bytes
    chain: Chain
    state: dict[Any, Any]
    base: Chain | None  # the chain of the version read, if this state is it
    candidates: set[int]


def _local(
    root: str, fsync: bool, every: int = 16, ratio: float = 0.5, io_threads: int = 1
) -> LocalStateBackend:
    return LocalStateBackend(
        root, fsync=fsync, snapshot_every=every, snapshot_ratio=ratio, io_threads=io_threads
    )


def _sizes(c: Chain) -> tuple[int, int]:
    return c.snap_bytes, c.snap_keys


_PROTOCOL = pickle.HIGHEST_PROTOCOL
