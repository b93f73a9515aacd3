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
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["LocalStateBackend", "StateBackend"]


@runtime_checkable
class StateBackend(Protocol):
    """Where shard state lives; must be picklable (it travels to Spark tasks)."""

    def read(self, operator: str, shard: int, upto: int) -> tuple[dict[Any, Any], int | None]:
        """Newest version ``<= upto`` of a shard's state and its version (``None``: empty)."""
        ...

    def write(self, operator: str, shard: int, version: int, state: dict[Any, Any]) -> int:
        """Write ``version`` of a shard's state (replacing one of the same version); its bytes."""
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

    def read(self, operator: str, shard: int, upto: int) -> tuple[dict[Any, Any], int | None]:
        path = self._dir(operator, shard)
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

    def write(self, operator: str, shard: int, version: int, state: dict[Any, Any]) -> int:
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
        self._collect_garbage(path, version)
        return len(data)

    def _collect_garbage(self, path: str, version: int) -> None:
        for v in self._stale.pop(path, ()):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(path, f"{v}.pkl"))

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

    def size(self, operator: str, shard: int, upto: int) -> int:
        """Bytes of the newest version ``<= upto`` of a shard (0 when it has none)."""
        path = self._dir(operator, shard)
        usable = [v for v in self._versions(path) if v <= upto]
        return os.path.getsize(os.path.join(path, f"{usable[-1]}.pkl")) if usable else 0

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
