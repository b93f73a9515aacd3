"""Executor start-up as on a real cluster, emulated on a host that cannot afford it.

On one small machine, starting an executor (a JVM, its Python workers, a warm-up task)
takes the very CPU that the running batches and the emulated cores share, so a
policy that scales out is measured with the host's start-up cost on top. On a real
cluster an executor starts on a node of its own; what the job feels is the delay.

:class:`EmulatedStartupResources` keeps that delay and drops the host's cost: every
executor the cluster may hold is started (and warmed) before the run, and none takes a
task until the policy has requested it; a request becomes usable ``delay_s`` seconds
after it is made, and the run is billed from the request, as for a real executor. A
release makes the executor unusable at once. To the driver it is an
:class:`~streamscale.runtime.spark.executors.resources.ExecutorResources` whose
:meth:`alive` lists the usable executors only, so a batch's tasks are sized by and
placed on them; Spark's own executor list (all of them) is not used for sizing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.executors.resources import ExecutorResources, _ids

__all__ = ["EmulatedStartupResources", "Span"]


@dataclass
class Span:
    """One usable executor of the emulation: ``cores`` from ``added_s`` to ``removed_s``
    (epoch seconds; ``None``: still usable)."""

    executor: str
    cores: int
    added_s: float
    removed_s: float | None = None


@dataclass
class EmulatedStartupResources(ExecutorResources):
    """:class:`ExecutorResources` with every executor started beforehand and each request
    usable ``delay_s`` seconds after it is made (see the module docstring).

    ``spans`` records every executor's usable period, for billing beside
    :attr:`requests`; :attr:`startups` observes ``delay_s`` (the pool is warm: an arrival
    is ready at once) as the real start-up would be observed.
    """

    delay_s: float = 20.0
    #: how long the real executors may take to start before the run
    pool_timeout_s: float = 180.0
    spans: list[Span] = field(default_factory=list)
    _usable: dict[str, Span] = field(default_factory=dict)
    _grants: deque[float] = field(default_factory=deque)  # when pending requests become usable
    _pool: list[str] = field(default_factory=list)
    _immediate: bool = True  # the executors held before the run are usable at once

    def __post_init__(self) -> None:
        if not self.delay_s >= 0:
            raise StreamscaleError(f"must be >= 0, got {self.delay_s!r}", item="start-up delay")
        ExecutorResources._request_total(self, self.max_executors)
        self._pool = self._start_pool()
        super().__post_init__()
        self._immediate = False

    def _start_pool(self) -> list[str]:
        end = time.monotonic() + self.pool_timeout_s
        while time.monotonic() < end:
            ids = _ids(self.sc._jsc.sc().getExecutorIds())
            if len(ids) >= self.max_executors:
                from streamscale.runtime.spark.executors.warm import warm_up

                warm_up(self.sc, self.max_executors * self.cores_per_executor)
                return sorted(ids, key=lambda x: (len(x), x))
            time.sleep(0.25)
        raise StreamscaleError(
            f"the cluster did not start {self.max_executors} executors within "
            f"{self.pool_timeout_s:g} s",
            item="startup emulated",
        )

    # -- the emulation ------------------------------------------------------------------
    def observe_arrivals(self) -> list[str]:
        """:meth:`ExecutorResources.observe_arrivals`, each arrival warm at once: the pool
        was warmed before the run, and the delay stands for the whole start-up. A warm-up
        job for an emulated arrival queued behind the running batch's tasks on this host,
        and the start-up learned from it was 15–16 s against a 1 s emulated delay — in a
        replay at 60×, a quarter of an hour where the deployment's is a minute."""
        new = super().observe_arrivals()
        if new and self.ready_when_warmed:
            self.mark_warm(new)
        return new

    def _request_total(self, n: int) -> None:
        """Pending requests become usable ``delay_s`` after they are made (at once for the
        executors held before the run); a lower total withdraws the newest pending."""
        with self._lock:
            now = time.time()
            have = len(self._usable) + len(self._grants)
            at = now if self._immediate else now + self.delay_s
            for _ in range(max(0, n - have)):
                self._grants.append(at)
            while self._grants and len(self._usable) + len(self._grants) > n:
                self._grants.pop()

    def _listed(self) -> list[str]:
        with self._lock:
            now = time.time()
            while self._grants and self._grants[0] <= now:
                free = [e for e in self._pool if e not in self._usable]
                if not free:
                    self._grants.clear()
                    break
                self._grants.popleft()
                span = Span(free[0], self.cores_per_executor, now)
                self._usable[free[0]] = span
                self.spans.append(span)
            return sorted(self._usable, key=lambda x: (len(x), x))

    def _kill(self, ids: Sequence[str]) -> bool:
        """Released executors stop being usable at once; each arrives anew when granted
        again (a pool executor's id comes back, where a real cluster's never does: counted
        as arrived already, its next grant matched no request, and the next new arrival
        was matched to that request's time — a start-up learned as 14.7 s for a 1 s
        delay)."""
        with self._lock:
            now = time.time()
            for e in ids:
                span = self._usable.pop(e, None)
                if span is not None:
                    span.removed_s = now
                self._arrived.discard(e)
            return True
