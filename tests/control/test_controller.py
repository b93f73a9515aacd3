"""The controller's damping, checked on tiny hand-written event sequences.

A scripted policy answers each ``decide`` with the next decision of its script and
records the times it was asked, so every test states exactly when the policy runs and
what the controller does with its answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from streamscale.control.controller import (
    HISTORY_LIMIT,
    Apply,
    Collect,
    Controller,
    ControllerConfig,
    Decision,
    Hold,
    Observed,
    Tick,
)
from streamscale.errors import StreamscaleError
from streamscale.model import Allocation, Plan, Snapshot


def _plan(cores: int) -> Plan:
    return Plan(Allocation({"calc[0]": cores}))


class Scripted:
    name = "scripted"

    def __init__(self, decisions: Sequence[Decision]) -> None:
        self.decisions = list(decisions)
        self.asked: list[float] = []

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        self.asked.append(now)
        return self.decisions.pop(0)

    def shard_bytes(self, instance: str, shard: int) -> int:
        return 0


def _observe(ctl: Controller, now: float, current: Plan) -> list[object]:
    """One decision round at ``now``: a tick, then the observation it asked for."""
    assert ctl.handle([Tick(now)]) == [Collect()]
    return list(ctl.handle([Observed(Snapshot.build(time=now), current, now)]))


CFG = ControllerConfig(interval_s=1.0, stabilization_s=2.0, scale_down_delay_s=10.0)


def test_ticks_collect_once_per_interval_and_not_while_collecting() -> None:
    ctl = Controller(Scripted([Decision(None, "fine")]), CFG)
    assert ctl.handle([Tick(0.0)]) == [Collect()]
    assert ctl.handle([Tick(0.5), Tick(5.0)]) == []  # a Collect is outstanding
    assert ctl.handle([Observed(Snapshot.build(), _plan(1), 5.0)]) == [Hold("fine")]
    assert ctl.handle([Tick(5.5)]) == []  # < interval after the decision at 5.0
    assert ctl.handle([Tick(6.0)]) == [Collect()]


def test_no_change_holds_with_the_policy_reason_or_a_default() -> None:
    pol = Scripted([Decision(None, "balanced"), Decision(_plan(1)), Decision(None)])
    ctl = Controller(pol, CFG)
    assert _observe(ctl, 0.0, _plan(1)) == [Hold("balanced")]
    assert _observe(ctl, 1.0, _plan(1)) == [Hold("no change needed")]  # same plan
    assert _observe(ctl, 2.0, _plan(1)) == [Hold("no change needed")]


def test_stabilization_holds_without_asking_the_policy() -> None:
    pol = Scripted([Decision(_plan(2), "up", scale="up"), Decision(_plan(3), "up", scale="up")])
    ctl = Controller(pol, CFG)
    [act] = _observe(ctl, 0.0, _plan(1))
    assert isinstance(act, Apply) and act.plan == _plan(2) and act.reason == "up"
    assert act.diff.core_moves or act.plan.allocation.cores == {"calc[0]": 2}
    assert _observe(ctl, 1.0, _plan(2)) == [Hold("stabilizing after the last change")]
    assert pol.asked == [0.0]
    [act] = _observe(ctl, 2.0, _plan(2))  # exactly stabilization_s later: decides again
    assert isinstance(act, Apply) and act.plan == _plan(3)
    assert pol.asked == [0.0, 2.0]


def test_scale_down_waits_for_the_delay_after_a_scale_up() -> None:
    down = Decision(_plan(1), "idle", scale="down")
    pol = Scripted([Decision(_plan(2), "up", scale="up"), down, down, down])
    ctl = Controller(pol, CFG)
    assert isinstance(_observe(ctl, 0.0, _plan(1))[0], Apply)
    assert _observe(ctl, 3.0, _plan(2)) == [Hold("scale-down delayed after a recent scale-up")]
    assert _observe(ctl, 9.0, _plan(2)) == [Hold("scale-down delayed after a recent scale-up")]
    [act] = _observe(ctl, 10.0, _plan(2))
    assert isinstance(act, Apply) and act.plan == _plan(1)
    assert pol.asked == [0.0, 3.0, 9.0, 10.0]


def test_scale_up_is_never_delayed_by_the_scale_down_delay() -> None:
    pol = Scripted(
        [Decision(_plan(1), "idle", scale="down"), Decision(_plan(4), "surge", scale="up")]
    )
    ctl = Controller(pol, CFG)
    assert isinstance(_observe(ctl, 0.0, _plan(2))[0], Apply)
    [act] = _observe(ctl, 2.0, _plan(1))
    assert isinstance(act, Apply) and act.plan == _plan(4)


def test_a_restarted_controller_decides_at_its_first_observation() -> None:
    first = Controller(Scripted([Decision(_plan(2), "up", scale="up")]), CFG)
    assert isinstance(_observe(first, 100.0, _plan(1))[0], Apply)
    # The driver restarts: a new controller has no stabilization or delay to honour.
    pol = Scripted([Decision(_plan(1), "idle", scale="down")])
    restarted = Controller(pol, CFG)
    [act] = _observe(restarted, 100.5, _plan(2))
    assert isinstance(act, Apply) and act.plan == _plan(1) and pol.asked == [100.5]


def test_history_is_a_bounded_ring() -> None:
    pol = Scripted([Decision(None, str(i)) for i in range(HISTORY_LIMIT + 5)])
    ctl = Controller(pol, ControllerConfig(interval_s=1.0))
    for i in range(HISTORY_LIMIT + 5):
        _observe(ctl, float(i), _plan(1))
    assert len(ctl.history) == HISTORY_LIMIT
    assert ctl.history[0] == (5.0, Hold("5"))
    assert ctl.history[-1] == (float(HISTORY_LIMIT + 4), Hold(str(HISTORY_LIMIT + 4)))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"interval_s": -1}, "interval_s: must be >= 0"),
        ({"stabilization_s": -1}, "stabilization_s: must be >= 0"),
        ({"scale_down_delay_s": "soon"}, "scale_down_delay_s: must be a number"),
        ({"cooldown": 3}, "cooldown: unknown controller setting"),
    ],
)
def test_config_from_params_is_checked(params: dict[str, object], message: str) -> None:
    with pytest.raises(StreamscaleError, match=message):
        ControllerConfig.from_params(params)
    assert ControllerConfig.from_params({"interval_s": "2"}) == ControllerConfig(interval_s=2.0)
