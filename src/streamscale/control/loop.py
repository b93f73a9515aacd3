"""The I/O shell around :class:`Controller`: one step of collect → decide → realize."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscale.control.controller import Action, Apply, Collect, Controller, Event, Observed, Tick
from streamscale.control.protocols import Collector, Realizer

if TYPE_CHECKING:
    from streamscale.control.stimulus import InputLog

__all__ = ["step"]


def step(
    controller: Controller,
    collector: Collector,
    realizer: Realizer,
    now: float,
    *,
    log: InputLog | None = None,
) -> list[Apply]:
    """Feed a tick at ``now``; run what the controller asks; return the plans applied.

    With ``log``, every event fed and the controller's answer to it are recorded
    (:class:`~streamscale.control.stimulus.InputLog`), so the step can be replayed.
    """
    applied: list[Apply] = []
    pending = _handle(controller, Tick(now), log)
    while pending:
        act = pending.pop(0)
        if isinstance(act, Collect):
            snap = collector.collect(now)
            pending.extend(_handle(controller, Observed(snap, realizer.current(), now), log))
        elif isinstance(act, Apply):
            realizer.apply(act.plan, now)
            applied.append(act)
    return applied


def _handle(controller: Controller, ev: Event, log: InputLog | None) -> list[Action]:
    if log is not None:
        log.record(ev)
    out = controller.handle([ev])
    if log is not None:
        log.answered(out)
    return out
