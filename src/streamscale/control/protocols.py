"""The two I/O ends of the loop. Spark and the simulator each implement both."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from streamscale.model import Plan, Snapshot

__all__ = ["Clock", "Collector", "Realizer"]


@runtime_checkable
class Clock(Protocol):
    """Seconds since an arbitrary origin: wall time for Spark, simulated time for the simulator."""

    def __call__(self) -> float: ...


@runtime_checkable
class Collector(Protocol):
    """Observes the running job: statistics over the period ending at ``now``."""

    def collect(self, now: float) -> Snapshot: ...


@runtime_checkable
class Realizer(Protocol):
    """Applies a plan at the next consistency point (a batch boundary on Spark)."""

    def current(self) -> Plan: ...

    def apply(self, plan: Plan, now: float) -> None: ...
