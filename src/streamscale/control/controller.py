"""The controller: a pure state machine from events to actions (dask-worker style).

It never performs I/O and never reads the clock: the shell (see
:func:`streamscale.control.loop.step`) feeds it ``Tick`` and ``Observed``
events carrying the time, executes the ``Collect`` and ``Apply`` actions it
returns against a Collector and a Realizer, and records the history.
Damping follows production autoscalers (docs/algorithms.md, "Beyond the papers"):
a decision interval, a stabilization period after each change, and a longer
cool-down before giving cores back than before taking more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from streamscale.model import Plan, PlanDiff, Snapshot
from streamscale.settings import Schema, Setting

__all__ = [
    "CONTROLLER_SETTINGS",
    "HISTORY_LIMIT",
    "Action",
    "Apply",
    "Collect",
    "Controller",
    "ControllerConfig",
    "Decision",
    "Event",
    "Hold",
    "Observed",
    "Policy",
    "Tick",
]


@dataclass(frozen=True, slots=True)
class Tick:
    now: float


@dataclass(frozen=True, slots=True)
class Observed:
    snapshot: Snapshot
    plan: Plan
    now: float


Event = Tick | Observed


@dataclass(frozen=True, slots=True)
class Collect:
    """Ask the collector for a snapshot."""


@dataclass(frozen=True, slots=True)
class Apply:
    plan: Plan
    diff: PlanDiff
    reason: str
    figures: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hold:
    reason: str


Action = Collect | Apply | Hold


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer: the plan it wants (``None`` keeps the current one)."""

    plan: Plan | None
    reason: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)
    scale: Literal["up", "down", "none"] = "none"


class Policy(Protocol):
    """Plans from a snapshot; pure. ``name`` is what configs and the CLI call it."""

    name: str

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision: ...

    def shard_bytes(self, instance: str, shard: int) -> int: ...


#: The controller's settings, declared once; :class:`ControllerConfig` takes its defaults here.
CONTROLLER_SETTINGS = Schema(
    "controller",
    Setting("interval_s", float, 1.0, "seconds between decisions (0: at every batch)", low=0.0),
    Setting("stabilization_s", float, 2.0, "no decision this long after a change (s)", low=0.0),
    Setting(
        "scale_down_delay_s",
        float,
        10.0,
        "no scale-down this long after a scale-up (s)",
        low=0.0,
    ),
)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Damping of the controller (see :data:`CONTROLLER_SETTINGS` for meaning and bounds)."""

    interval_s: float = CONTROLLER_SETTINGS["interval_s"].default
    stabilization_s: float = CONTROLLER_SETTINGS["stabilization_s"].default
    scale_down_delay_s: float = CONTROLLER_SETTINGS["scale_down_delay_s"].default

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ControllerConfig:
        """Checked settings (unknown names and out-of-range values raise, naming the item)."""
        return cls(**CONTROLLER_SETTINGS.parse(params))


#: Decisions the controller remembers (a ring buffer: a long run's memory stays bounded).
HISTORY_LIMIT = 1024


@dataclass
class Controller:
    """Decides when to observe and whether to apply the policy's plan.

    States: ``idle`` (waiting for the next interval), ``collecting``
    (a ``Collect`` is outstanding). ``history`` keeps the last :data:`HISTORY_LIMIT`
    decisions. The controller keeps no other state across a restart: a new one decides at
    its first observation, with no stabilization or scale-down delay carried over.
    """

    policy: Policy
    config: ControllerConfig = field(default_factory=ControllerConfig)
    state: Literal["idle", "collecting"] = "idle"
    last_decision: float = float("-inf")
    last_change: float = float("-inf")
    last_scale_up: float = float("-inf")
    history: deque[tuple[float, Action]] = field(
        default_factory=lambda: deque(maxlen=HISTORY_LIMIT)
    )

    def handle(self, events: Iterable[Event]) -> list[Action]:
        out: list[Action] = []
        for ev in events:
            out.extend(self._one(ev))
        return out

    def _one(self, ev: Event) -> list[Action]:
        if isinstance(ev, Tick):
            if self.state == "idle" and ev.now - self.last_decision >= self.config.interval_s:
                self.state = "collecting"
                return [Collect()]
            return []
        self.state = "idle"
        self.last_decision = ev.now
        act = self._decide(ev)
        self.history.append((ev.now, act))
        return [act]

    def _decide(self, ev: Observed) -> Action:
        if ev.now - self.last_change < self.config.stabilization_s:
            return Hold("stabilizing after the last change")
        d = self.policy.decide(ev.snapshot, ev.plan, ev.now)
        if d.plan is None or d.plan == ev.plan:
            return Hold(d.reason or "no change needed")
        if d.scale == "down" and ev.now - self.last_scale_up < self.config.scale_down_delay_s:
            return Hold("scale-down delayed after a recent scale-up")
        diff = ev.plan.diff(d.plan, shard_bytes=self.policy.shard_bytes)
        self.last_change = ev.now
        if d.scale == "up":
            self.last_scale_up = ev.now
        return Apply(d.plan, diff, d.reason, d.figures)
