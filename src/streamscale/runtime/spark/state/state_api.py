"""The state backend interface, the layout record and the driver's version index.

See :mod:`streamscale.runtime.spark.state.state` for the protocol and the backend a URL names: batch ``b`` of a
shard reads the newest committed version ``< b`` and writes version ``b``; the
driver commits ``b`` once every task of the batch succeeded.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from streamscale.errors import StreamscaleError
from streamscale.settings import Setting

if TYPE_CHECKING:
    from streamscale.runtime.spark.routing.routing import PartitionMap

__all__ = [
    "LAYOUT_FILE",
    "STATE_URL",
    "BatchVersion",
    "Hint",
    "StateBackend",
    "VersionIndex",
    "check_layout",
    "input_error",
    "query_committed",
]

#: The layout record of an operator's state, beside its shards and commit marker.
LAYOUT_FILE = "_layout.json"

#: Where keyed state lives (``streamscale run --state-url``, ``run_job``/``run_graph``'s
#: ``state_url``); read by :func:`state_backend`.
STATE_URL = Setting(
    "state_url",
    str,
    None,
    "where keyed state lives: a directory or file://DIR (options ?fsync=1, snapshot_every=N, "
    "snapshot_ratio=R, io_threads=N) or s3://BUCKET/PREFIX?endpoint=URL (any host every "
    "executor reaches); default CHECKPOINT/state",
)

#: The driver's view of a shard's input version: (version, or -1 for none;
#: the attempt that wrote it, or ``None`` when unknown, e.g. after a restart).
Hint = tuple[int, str | None]


@dataclass(frozen=True, slots=True)
class BatchVersion:
    """One keyed operator's batch as its tasks see state: the version written
    (``batch_id``), the newest committed version read (``upto``), the partition of every
    global shard (``pmap``: the plan's routing tables), the run's ``attempt`` at the batch
    (a replayed batch writes under a new one), and per shard the input version's
    :data:`Hint` and the older versions to remove (``drops``). Drawn by
    :meth:`VersionIndex.version`; committed by :meth:`VersionIndex.commit`.

    Examples
    --------
    >>> from streamscale.runtime.spark.routing.routing import PartitionMap
    >>> pmap = PartitionMap("op", 1, 2, ("op[0]#0",), (0, 0))
    >>> v = BatchVersion(3, 2, pmap)  # no attempt or hints: tasks list the store
    >>> v.batch_id, v.upto, v.attempt, v.hints
    (3, 2, None, ())
    """

    batch_id: int
    upto: int
    pmap: PartitionMap
    attempt: str | None = None
    hints: tuple[Hint, ...] = ()
    drops: tuple[tuple[int, ...], ...] = ()


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

    def commit(self, operator: str, version: int, versions: Sequence[int] | None = None) -> None:
        """Mark every version ``<= version`` of ``operator`` as committed; ``versions``:
        each shard's newest committed version (``-1``: none), recorded with the mark."""
        ...

    def committed(self, operator: str) -> int:
        """The last committed batch id of ``operator`` (``-1`` before the first)."""
        ...

    def load_all(self, operator: str) -> dict[int, dict[Any, Any]]:
        """The committed state of every shard of ``operator`` that has one."""
        ...


class VersionIndex:
    """The driver's record of each shard's committed versions (newest last).

    Built once by listing the backend, then kept up to date from the shards
    each committed batch wrote, so tasks open the right version directly (no
    directory listing) and may use their worker cache.
    """

    def __init__(
        self, backend: StateBackend, operator: str, shards: int, *, query_committed: int = -1
    ) -> None:
        self.operator = operator
        self.backend = backend
        self._v: list[list[Hint]] = [
            [(v, None) for v in backend.versions(operator, g)] for g in range(shards)
        ]
        self._check_marker(query_committed)
        self._check_named()

    def _check_marker(self, query_committed: int) -> None:
        """No shard holds a version of a batch the query committed (``query_committed``:
        the last batch in Spark's commit log) above the batch the commit marker names: the
        marker is written before Spark commits a batch, so such a version means a lost or
        older marker, under which the shard would be read as empty or from older state.

        Raises
        ------
        StreamscaleError
            One line naming the marker file and the batch.
        """
        read = getattr(self.backend, "committed_versions", None)
        if read is None or query_committed < 0:
            return
        batch = read(self.operator)[0]
        for g, vs in enumerate(self._v):
            above = [v for v, _ in vs if batch < v <= query_committed]
            if above:
                file = self.backend.marker_file(self.operator)  # type: ignore[attr-defined]
                names = "is missing" if batch < 0 else f"names batch {batch}"
                raise StreamscaleError(
                    f"state of operator {self.operator!r}: the query committed batch "
                    f"{above[-1]}, which wrote shard {g} version {above[-1]}, but the commit "
                    f"marker {names}; the run stops rather than read the operator's state as "
                    f"{'empty' if batch < 0 else 'older'}",
                    item=file,
                )

    def _check_named(self) -> None:
        """Every shard version the last commit marker names is in the store; versions
        above it (written by a batch that never committed) are left out of the index.

        Raises
        ------
        StreamscaleError
            A named version is missing: reading an older one, or none, would recompute
            the shard from less state. One line naming the file and the batch.
        """
        read = getattr(self.backend, "committed_versions", None)
        if read is None:
            return
        batch, named = read(self.operator)
        if named is None:
            return
        for g, vs in enumerate(self._v):
            want = named[g] if g < len(named) else -1
            if want >= 0 and all(v != want for v, _ in vs):
                file = self.backend.version_file(self.operator, g, want)  # type: ignore[attr-defined]
                raise StreamscaleError(
                    f"state of operator {self.operator!r} shard {g}: version {want}, which "
                    f"the commit of batch {batch} names, is missing; the run stops rather "
                    "than read the shard from older state",
                    item=file,
                )
            self._v[g] = [(v, a) for v, a in vs if v <= want]

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

    def version(self, batch_id: int, pmap: PartitionMap) -> BatchVersion:
        """Batch ``batch_id``'s version on ``pmap``: it reads the newest version committed
        before it, under a new attempt."""
        upto = min(batch_id - 1, self.backend.committed(self.operator))
        hints, drops = self.hints(upto)
        return BatchVersion(batch_id, upto, pmap, uuid.uuid4().hex, hints, drops)

    def commit(self, version: BatchVersion, written: Iterable[int]) -> None:
        """Commit ``version``'s batch in the backend, its marker naming each shard's newest
        version, and record the shards it ``written`` (:meth:`committed`); called once
        every task of the batch succeeded."""
        batch, attempt = version.batch_id, version.attempt
        assert attempt is not None, "a committed batch was drawn by version()"
        self.committed(batch, attempt, written, version.hints)
        newest = [max((v for v, _ in vs if v <= batch), default=-1) for vs in self._v]
        self.backend.commit(self.operator, batch, newest)


def query_committed(spark_checkpoint: Path) -> int:
    """The last batch in Spark's commit log under ``spark_checkpoint`` (``-1``: none)."""
    d = Path(spark_checkpoint) / "commits"
    names = [p.name for p in d.iterdir()] if d.is_dir() else []
    return max((int(n) for n in names if n.isdigit()), default=-1)


def check_layout(backend: StateBackend, operator: str, instances: int, shards: int) -> None:
    """Check that ``operator``'s state was written under this run's layout, or record it.

    The layout is the key hashes (:data:`~streamscale.runtime.spark.routing.routing.HASH_SCHEME`),
    ``E`` and ``Z``: under any other, keys hash to other shards and their state would be
    read as empty. Without a record and without shard state, the record is written
    (atomically, through the backend); a backend that keeps no records is not checked.

    Raises
    ------
    StreamscaleError
        The record differs from this run's layout, or shard state exists without a
        record (written before layouts were recorded); one line naming the operator
        and what differs.
    """
    from streamscale.runtime.spark.routing.routing import HASH_SCHEME

    read = getattr(backend, "layout", None)
    if read is None:
        return
    # _layout.json names E (the instances) "executors": the key of the records already written
    want: dict[str, Any] = {"hash": HASH_SCHEME, "executors": instances, "shards": shards}
    have = read(operator)
    item = f"operator {operator}"
    if have is None:
        if backend.has_shards(operator):  # type: ignore[attr-defined]
            raise StreamscaleError(
                "shard state has no layout record (written before layouts were recorded, "
                f"under other key hashes than {HASH_SCHEME}); reading it with E={instances}, "
                f"Z={shards} would look for keys in the wrong shards: move it away to start "
                "from an empty state",
                item=item,
            )
        backend.write_layout(operator, want)  # type: ignore[attr-defined]
        return
    label = {"hash": "key hashes", "executors": "E", "shards": "Z"}
    diffs = [
        f"{label[k]} {have.get(k)!r} in the state, {want[k]!r} in this run"
        for k in ("hash", "executors", "shards")
        if have.get(k) != want[k]
    ]
    if diffs:
        raise StreamscaleError(
            "state was written under another layout (" + "; ".join(diffs) + "); its keys "
            "would be read from the wrong shards",
            item=item,
        )


def input_error(exc: StreamscaleError, batch_id: int) -> StreamscaleError:
    """``exc`` (a shard version that cannot be read) as the failure of batch ``batch_id``,
    whose input it is: one line naming the file and the batch."""
    text = str(exc)
    reason = text[len(exc.item) + 2 :] if exc.item and text.startswith(f"{exc.item}: ") else text
    return StreamscaleError(f"batch {batch_id} cannot read its input: {reason}", item=exc.item)


def _snapshot_opts(opts: dict[str, list[str]], url: str) -> dict[str, Any]:
    """``snapshot_every``, ``snapshot_ratio`` and ``io_threads`` from a URL query."""
    out: dict[str, Any] = {}
    for name, kind in (("snapshot_every", int), ("snapshot_ratio", float), ("io_threads", int)):
        if name in opts:
            try:
                out[name] = kind(opts[name][-1])
            except ValueError:
                raise StreamscaleError(f"{name} must be a number", item=url) from None
    return out
