"""The I/O shell around :class:`Controller`: one step of collect → decide → realize."""

from __future__ import annotations

from streamscale.control.controller import Apply, Collect, Controller, Observed, Tick
from streamscale.control.protocols import Collector, Realizer

__all__ = ["step"]


def step(
    controller: Controller, collector: Collector, realizer: Realizer, now: float
) -> list[Apply]:
    """Feed a tick at ``now``; run what the controller asks; return the plans applied."""
    applied: list[Apply] = []
    pending = controller.handle([Tick(now)])
    while pending:
        act = pending.pop(0)
        if isinstance(act, Collect):
            snap = collector.collect(now)
            pending.extend(controller.handle([Observed(snap, realizer.current(), now)]))
        elif isinstance(act, Apply):
            realizer.apply(act.plan, now)
            applied.append(act)
    return applied
