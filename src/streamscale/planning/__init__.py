"""Every algorithm of the papers and the baselines, as pure functions ``problem → result``.

Families live in sub-packages (``allocation``, ``placement``, ``balancing``);
:mod:`streamscale.planning.registry` maps policy names to adapters that turn
the domain model into each algorithm's problem. Nothing here imports pyspark,
the simulator or the CLI, reads the clock, or uses global randomness.
"""

from __future__ import annotations

from streamscale.planning.registry import (
    Entry,
    Family,
    PlanningContext,
    StepResult,
    compose,
    entries,
    get,
    register,
)

__all__ = [
    "Entry",
    "Family",
    "PlanningContext",
    "StepResult",
    "compose",
    "entries",
    "get",
    "register",
]
