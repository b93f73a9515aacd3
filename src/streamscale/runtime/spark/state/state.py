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

A shard's state is never silently empty or older than committed: the commit
marker names each shard's newest committed version
(:meth:`~streamscale.runtime.spark.state.state_api.VersionIndex.commit`), a
version it names that the store lost is refused before the query starts, and a
committed version that cannot be read (deleted, truncated, on another host's
disk) fails the batch that reads it; either way with one line naming the file,
the operator, the shard and the batch.
Versions and the commit marker are written to a temporary file renamed into
place (optionally fsynced, with their directory), so a crash between writing
state and committing leaves the previous version readable.

Which shard a key's state lives in depends on the key hashes and on ``E`` and
``Z``; each operator's state records them (``<operator>/_layout.json``,
:func:`~streamscale.runtime.spark.state.state_api.check_layout`), so a run under another
layout fails before its first batch instead of reading the wrong shards.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state.state_api import (
    STATE_URL,
    BatchVersion,
    Hint,
    StateBackend,
    VersionIndex,
    _snapshot_opts,
    check_layout,
    input_error,
    query_committed,
)
from streamscale.runtime.spark.state.state_fs import FsStateBackend
from streamscale.runtime.spark.state.state_local import LocalStateBackend

__all__ = [
    "BatchVersion",
    "FsStateBackend",
    "Hint",
    "LocalStateBackend",
    "StateBackend",
    "VersionIndex",
    "check_layout",
    "check_state_url",
    "input_error",
    "query_committed",
    "state_backend",
]

_TRUE = {"1", "true", "yes", "on"}


def state_backend(url: str | Path) -> StateBackend:
    """The state backend a URL names: a local path or ``file://`` URL (the default).

    ``s3://bucket/prefix?endpoint=http://host:port`` (and other ``pyarrow.fs``
    schemes) name a :class:`~streamscale.runtime.spark.state.state_fs.FsStateBackend`,
    which every executor of a cluster reads alike.

    Query options: ``fsync=1`` flushes every version and commit marker to the
    disk before returning (e.g. ``file:///data/state?fsync=1``);
    ``snapshot_every=N`` and ``snapshot_ratio=R`` set when changelogs are
    compacted into a snapshot (every ``N`` versions, or when they outgrow ``R``
    times the snapshot; defaults 16 and 0.5); ``io_threads=N`` bounds the
    requests :meth:`~streamscale.runtime.spark.state.state_local.LocalStateBackend.write_many` and the reads issue at once
    (default 1 on a local disk, 16 on an object store).
    """
    text = str(url)
    parts = urlsplit(text)
    if parts.scheme in ("", "file"):
        opts = parse_qs(parts.query)
        unknown = sorted(set(opts) - {"fsync", "snapshot_every", "snapshot_ratio", "io_threads"})
        if unknown:
            raise StreamscaleError(f"unknown state backend option {unknown[0]!r}", item=text)
        root = parts.path if parts.scheme == "file" else text.split("?", 1)[0]
        if not root:
            raise StreamscaleError("state backend URL names no path", item=text)
        fsync = opts.get("fsync", ["0"])[-1].lower() in _TRUE
        return LocalStateBackend(root, fsync=fsync, **_snapshot_opts(opts, text))
    if parts.scheme in ("s3", "hdfs", "gs", "abfs"):
        return FsStateBackend(text)
    raise StreamscaleError(f"unsupported state backend scheme {parts.scheme!r}", item=text)


def check_state_url(url: str, *, option: str = "--state-url") -> StateBackend:
    """The backend ``url`` names, checked before any Spark session starts.

    A local directory is created (as ``--out`` is); an object store is not contacted.

    Raises
    ------
    StreamscaleError
        ``url`` names no path or bucket, an unknown scheme or option, a non-numeric
        option, or a directory that cannot be created; the message names ``option url``.
    """
    item = f"{option} {url}"
    try:
        backend = state_backend(STATE_URL.coerce(url))
    except StreamscaleError as exc:
        text = str(exc)
        reason = text[len(exc.item) + 2 :] if exc.item and text.startswith(exc.item) else text
        raise StreamscaleError(reason, item=item) from None
    if type(backend) is LocalStateBackend:  # not a subclass on a remote filesystem
        try:
            os.makedirs(backend.root, exist_ok=True)
        except OSError as exc:
            raise StreamscaleError(f"cannot create: {exc.strerror or exc}", item=item) from None
    return backend
