"""Shard state on any ``pyarrow.fs`` filesystem: S3-compatible object stores, HDFS.

The layout and the protocol are those of
:class:`~streamscale.runtime.spark.state.state.LocalStateBackend`
(``<prefix>/<operator>/<shard>/<version>.pkl``, ``<operator>/_committed`` and
``<operator>/_layout.json``);
only the four file primitives differ. A single object PUT is atomic on an
object store, so a version or commit marker is either wholly there or absent
and a crash between writing state and committing leaves the previous version
readable. Every executor reads the same store, so a shard moved to another
host finds its committed version (paper 000, §3.2: state moves with the
shard), and a missing one fails the batch instead of reading as empty.

The backend pickles as its URL: the filesystem client is created lazily in
each process and never travels to a task.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any
from urllib.parse import parse_qs, urlsplit

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state.state_api import _snapshot_opts
from streamscale.runtime.spark.state.state_local import LocalStateBackend

__all__ = ["FsStateBackend"]

_OPTIONS = {"endpoint", "region", "snapshot_every", "snapshot_ratio", "io_threads"}
_IO_THREADS = 16  # concurrent requests per write_many / read: round trips overlap


class FsStateBackend(LocalStateBackend):
    """State under a filesystem URL, e.g. ``s3://bucket/prefix?endpoint=http://127.0.0.1:9000``.

    Parameters
    ----------
    url
        ``s3://bucket/prefix`` with optional ``endpoint`` (an S3-compatible
        server; ``http://`` selects plain HTTP), ``region``, ``snapshot_every``
        ``snapshot_ratio`` and ``io_threads`` (concurrent requests, default 16) query options;
        credentials come from the usual ``AWS_*`` environment variables. Other
        schemes (``hdfs://``, ``gs://``, ``abfs://``) go to
        ``pyarrow.fs.FileSystem.from_uri``.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        opts = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = sorted(set(opts) - _OPTIONS)
        if unknown:
            raise StreamscaleError(f"unknown state backend option {unknown[0]!r}", item=url)
        if not parts.netloc:
            raise StreamscaleError("state backend URL names no bucket or host", item=url)
        self.url = url
        self._opts = opts
        self._scheme = parts.scheme
        self._client: Any = None
        root = f"{parts.netloc}{parts.path}".rstrip("/")
        if parts.scheme != "s3":
            root = parts.path.rstrip("/") or "/"
        kw = {"io_threads": _IO_THREADS, **_snapshot_opts(parse_qs(parts.query), url)}
        super().__init__(root, **kw)

    def __repr__(self) -> str:
        return f"FsStateBackend({self.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FsStateBackend, (self.url,))

    @property
    def _fs(self) -> Any:
        with self._lock:  # one client per process, even when threads ask at once
            return self._client or self._connect()

    def _connect(self) -> Any:
        if self._client is None:
            import pyarrow.fs as pafs

            if self._scheme == "s3":
                endpoint = self._opts.get("endpoint")
                kwargs: dict[str, Any] = {"region": self._opts.get("region", "us-east-1")}
                if endpoint:
                    ep = urlsplit(endpoint)
                    kwargs["endpoint_override"] = ep.netloc or endpoint
                    kwargs["scheme"] = ep.scheme or "https"
                # Delayed open: a small object is one PutObject, not a three-request
                # multipart upload; errors still surface when the stream closes.
                self._client = pafs.S3FileSystem(allow_delayed_open=True, **kwargs)
            else:
                self._client = pafs.FileSystem.from_uri(self.url.split("?", 1)[0])[0]
        return self._client

    def _get(self, file: str) -> bytes:
        with self._fs.open_input_stream(file) as f:
            return f.read()

    def _put(self, path: str, name: str, data: bytes) -> None:
        with self._fs.open_output_stream(os.path.join(path, name)) as f:
            f.write(data)

    def _list(self, path: str) -> list[str]:
        import pyarrow.fs as pafs

        infos = self._fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [i.base_name for i in infos]

    def _remove(self, file: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(file)
