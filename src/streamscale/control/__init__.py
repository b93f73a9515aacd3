"""The control loop: Collector → Planner → Realizer, driven by a pure controller."""

from __future__ import annotations

from streamscale.control.controller import (
    Action,
    Apply,
    Collect,
    Controller,
    ControllerConfig,
    Decision,
    Event,
    Hold,
    Observed,
    Policy,
    Tick,
)
from streamscale.control.protocols import Clock, Collector, Realizer

__all__ = [
    "Action",
    "Apply",
    "Clock",
    "Collect",
    "Collector",
    "Controller",
    "ControllerConfig",
    "Decision",
    "Event",
    "Hold",
    "Observed",
    "Policy",
    "Realizer",
    "Tick",
]
