"""Bounded concurrent I/O for state backends: many shards' round trips at once.

An object store answers each request after a network round trip; a task that
writes its shards one after another waits for every round trip in turn. The
backends hand their independent requests (one shard's PUT and clean-up, one
version's GET) to :meth:`IoPool.run_all`, which runs them on at most
``threads`` threads, waits for **all** of them — so no request of a failed call
is still in flight when its error surfaces — and returns each result or
exception in order. The threads are started once per process and kept, shared
by every backend object of the process (Spark deserialises one per task; a
thread start costs milliseconds on a loaded machine); a forked process starts
its own. A task run on a pool of one ``role`` may use a pool of another role,
never its own (the backends use ``"shard"`` for shards and ``"chain"`` for the
versions of a shard's chain), so a full pool never waits on itself.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["IoPool", "first_error"]

T = TypeVar("T")


def _call(task: Callable[[], T]) -> T | BaseException:
    try:
        return task()
    except Exception as e:  # returned, raised by the caller once every task ended
        return e


_POOLS: dict[tuple[str, int], tuple[int, ThreadPoolExecutor]] = {}
_POOLS_MU = threading.Lock()


class IoPool:
    """Up to ``threads`` concurrent tasks, on the process's threads of ``role``."""

    def __init__(self, threads: int, role: str) -> None:
        self.threads = max(1, int(threads))
        self.role = role

    def _executor(self) -> ThreadPoolExecutor:
        key = (self.role, self.threads)
        with _POOLS_MU:
            got = _POOLS.get(key)
            if got is None or got[0] != os.getpid():
                pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"ss-{self.role}")
                got = _POOLS[key] = (os.getpid(), pool)
            return got[1]

    def run_all(self, tasks: Iterable[Callable[[], T]]) -> list[T | BaseException]:
        """Run ``tasks`` (concurrently when more than one); every result or exception, in order.

        Tasks from a generator start as it yields them, so the caller prepares
        the next while the previous ones run.
        """
        if self.threads <= 1 or (isinstance(tasks, Sequence) and len(tasks) <= 1):
            return [_call(t) for t in tasks]
        return list(self._executor().map(_call, tasks))


def first_error(results: Sequence[object]) -> BaseException | None:
    """The first exception among ``results`` (``None`` when every task succeeded)."""
    return next((r for r in results if isinstance(r, BaseException)), None)
