"""The state backend interface and the driver's index of committed shard versions.

See :mod:`streamscale.runtime.spark.state` for the protocol: batch ``b`` of a
shard reads the newest committed version ``< b`` and writes version ``b``; the
driver commits ``b`` once every task of the batch succeeded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Hint", "StateBackend", "VersionIndex"]

#: The driver's view of a shard's input version: (version, or -1 for none;
#: the attempt that wrote it, or ``None`` when unknown, e.g. after a restart).
Hint = tuple[int, str | None]


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
