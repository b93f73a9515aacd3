"""The simulator's Realizer: plans take effect through the kernel's reassignment protocols."""

from __future__ import annotations

from streamscale.model import Plan
from streamscale.sim.kernel import Simulator

__all__ = ["SimRealizer"]


class SimRealizer:
    """Applies plans to a :class:`Simulator` (CONTRACTS.md: ``current()``, ``apply(plan, now)``).

    A shard whose target unit (or that unit's node) changes moves by the
    operator's protocol: Elasticutor's labeling tuple when every target is one
    of the instance's own units, RC's global synchronisation otherwise
    (paper 000, §3.2). ``current()`` is the last plan applied, which the shards
    reach as their moves complete.
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.applied: list[tuple[float, Plan]] = []

    def current(self) -> Plan:
        return self.sim.plan

    def apply(self, plan: Plan, now: float) -> None:
        self.sim.apply(plan, now)
        self.applied.append((now, plan))
