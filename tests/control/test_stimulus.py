"""The controller's input log: events round-trip through JSON, and a replay with the run's
policy reproduces every decision the run took (the plans the realizer was handed)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from streamscale.control.controller import Controller, ControllerConfig, Observed, Tick
from streamscale.control.loop import step
from streamscale.control.policies import initial_plan, make_policy
from streamscale.control.stimulus import (
    InputLog,
    controller_header,
    event_from_dict,
    event_to_dict,
    replay,
    segments,
)
from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, OperatorStats, Plan, ShardStats, Snapshot, Topology
from streamscale.model.io import cluster_from_dict, topology_from_dict


def _snapshot(now: float, loads: np.ndarray, rate: float) -> Snapshot:
    return Snapshot.build(
        time=now,
        operators={"calc": OperatorStats(rate, rate, 1000.0, rate / 10)},
        shards=[ShardStats("calc", i, float(v), 10 + i, 32768) for i, v in enumerate(loads)],
    )


class Script:
    """A collector that reports the next of a hand-made sequence of snapshots."""

    def __init__(self, snaps: list[Snapshot]) -> None:
        self.snaps = snaps

    def collect(self, now: float) -> Snapshot:
        return self.snaps.pop(0)


class Holder:
    """A realizer that takes every plan it is handed and keeps them in order."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.applied: list[tuple[float, Plan]] = []

    def current(self) -> Plan:
        return self.plan

    def apply(self, plan: Plan, now: float) -> None:
        self.plan = plan
        self.applied.append((now, plan))


def _sequence() -> list[Snapshot]:
    """Skewed light load, a surge to four times the load, then back down."""
    rng = np.random.default_rng(3)
    skew = rng.pareto(1.5, 256) + 0.1
    out = []
    for i in range(14):
        factor = 1.0 if i < 4 else 4.0 if i < 9 else 0.2
        loads = skew / skew.sum() * 3.0 * factor
        out.append(_snapshot(float(i), loads, 1500.0 * factor))
    return out


def _run(topo: Topology, cluster: Cluster, name: str) -> tuple[list[str], Holder, Controller]:
    params = {"theta": 1.2}
    cfg = ControllerConfig(interval_s=1.0, stabilization_s=1.5, scale_down_delay_s=3.0)
    pol = make_policy(name, topo, cluster, params=params, seed=11)
    ctl = Controller(pol, cfg)
    realizer = Holder(initial_plan(name, topo, cluster, params=params))
    collector = Script(_sequence())
    header = controller_header(
        policy=name, params=params, seed=11, config=cfg, topology=topo, cluster=cluster
    )
    log = InputLog(header)
    lines = []
    for t in range(14):
        step(ctl, collector, realizer, float(t), log=log)
        step(ctl, collector, realizer, t + 0.5, log=log)  # within the interval: no collect
        lines.append(json.dumps({"batch": t, **log.drain()}))  # as the shell writes them
    return lines, realizer, ctl


def _read(lines: list[str]) -> list[Any]:
    return segments((f"line {i}", json.loads(x)) for i, x in enumerate(lines))


def test_event_and_model_round_trip(topo: Topology, cluster: Cluster) -> None:
    plan = initial_plan("elastic", topo, cluster)
    ev = Observed(_sequence()[5], plan, 5.0)
    back = event_from_dict(json.loads(json.dumps(event_to_dict(ev))))
    assert back == ev
    assert event_from_dict(json.loads(json.dumps(event_to_dict(Tick(2.5))))) == Tick(2.5)
    header = json.loads(json.dumps(controller_header(
        policy="elastic", params={}, seed=None, config=ControllerConfig(), topology=topo,
        cluster=cluster,
    )))  # fmt: skip
    assert topology_from_dict(header["topology"]) == topo
    assert cluster_from_dict(header["cluster"]) == cluster


def test_replay_reproduces_every_decision(topo: Topology, cluster: Cluster) -> None:
    lines, realizer, ctl = _run(topo, cluster, "elastic")
    assert len(realizer.applied) >= 2  # the sequence makes the policy scale up and down
    segs = _read(lines)
    assert len(segs) == 1
    got = replay(segs[0])
    assert [r.now for r in got] == [t for t, _ in ctl.history]
    assert all(r.match for r in got)
    # the replay's applied plans are the plans the run's realizer was handed
    replayed = [(r.now, r.replay["plan"]) for r in got if r.replay and r.replay["type"] == "apply"]
    assert [t for t, _ in replayed] == [t for t, _ in realizer.applied]
    for (_, p), (_, want) in zip(replayed, realizer.applied, strict=True):
        assert p["allocation"]["cores"] == dict(want.allocation.cores)
        assert p["routing"]["tables"] == {k: list(v) for k, v in want.routing.tables.items()}
    # the plan is logged only when it changed since the previous observation
    inputs = [d for x in lines for d in json.loads(x)["inputs"] if d["event"] == "observed"]
    assert sum("plan" in d for d in inputs) == len(realizer.applied) + 1


def test_replay_with_another_policy_reports_differences(topo: Topology, cluster: Cluster) -> None:
    lines, _, _ = _run(topo, cluster, "elastic")
    got = replay(_read(lines)[0], policy="static")
    # every observation carries the run's plan, so static asks back for its own plan
    static = initial_plan("static", topo, cluster)
    applies = [r.replay for r in got if r.replay is not None and r.replay["type"] == "apply"]
    assert applies and all(
        a["plan"]["allocation"]["cores"] == dict(static.allocation.cores) for a in applies
    )
    assert [r.now for r in got if not r.match] and all(
        not r.match for r in got if r.run is not None and r.run["type"] == "apply"
    )
    # a controller setting given at replay changes the damping: no decision for 100 s
    slow = replay(_read(lines)[0], params={"stabilization_s": "100"})
    assert sum(r.replay is not None and r.replay["type"] == "apply" for r in slow) == 1


class Failing(Script):
    """A collector whose second collection fails on a malformed snapshot."""

    def collect(self, now: float) -> Snapshot:
        if len(self.snaps) == 13:
            self.snaps.pop(0)
            return Snapshot.build(time=now, operators={"calc": OperatorStats(-1.0)})
        return super().collect(now)


def test_a_failed_step_is_logged_and_replayed(topo: Topology, cluster: Cluster) -> None:
    cfg = ControllerConfig(interval_s=1.0, stabilization_s=0.0, scale_down_delay_s=0.0)
    ctl = Controller(make_policy("elastic", topo, cluster), cfg)
    realizer = Holder(initial_plan("elastic", topo, cluster))
    log = InputLog(controller_header(
        policy="elastic", params={}, seed=None, config=cfg, topology=topo, cluster=cluster
    ))  # fmt: skip
    collector, errors = Failing(_sequence()), []
    for t in range(4):
        try:
            step(ctl, collector, realizer, float(t), log=log)
        except StreamscaleError as exc:  # what the runner's control_step does
            ctl.state = "idle"
            log.failed(str(exc))
            errors.append(str(exc))
    assert len(errors) == 1
    (seg,) = _read([json.dumps(log.drain())])
    assert [d.get("error") for d in seg.inputs if d["event"] == "tick"][1] == errors[0]
    got = replay(seg)
    assert [r.now for r in got] == [0.0, 2.0, 3.0] == [t for t, _ in ctl.history]
    assert all(r.match for r in got)


def test_inputs_without_a_header_name_the_line() -> None:
    with pytest.raises(StreamscaleError, match="line 0: controller inputs before"):
        _read([json.dumps({"inputs": [{"kind": "input", "event": "tick", "now": 0.0}]})])
    assert _read([json.dumps({"batch_id": 0, "rows": 3})]) == []


def _logged_surge(catch_up_form: str = "drain", horizon: str = "startup") -> list[dict[str, Any]]:
    """watch_step's own example, logged: 100 t/s, then 300 t/s from t = 2 s, 50 t/s per
    core; requests are carried out (the view's request grows)."""
    from dataclasses import replace as with_

    from streamscale.control.stimulus import watch_input
    from streamscale.control.watch import Sample, WatchConfig, WatchState, WatchView, watch_step

    cfg = WatchConfig(rate_window_s=1.0, growth_horizon=horizon)
    view = WatchView(50.0, 4, 2, 2, 8, 4.0, 2.0)
    knobs = {"latency_target_s": 2.0, "catch_up_s": 5.0, "max_utilization": 0.9, "theta": 1.0}
    state, logged = WatchState(), []
    for i in range(17):
        t = i * 0.25
        offered = 100 * t if t <= 2 else 200 + 300 * (t - 2)
        sample = Sample(t, offered, min(offered, 150))
        state, req = watch_step(state, sample, view, config=cfg, catch_up_form=catch_up_form,
                                **knobs)  # fmt: skip
        logged.append(json.loads(json.dumps(
            watch_input(sample, view, req, config=cfg, catch_up_form=catch_up_form, **knobs))))  # fmt: skip
        if req is not None:
            view = with_(view, executors_requested=req.executors)
    return logged


def test_watch_samples_replay_to_the_same_requests() -> None:
    from streamscale.control.stimulus import replay_watch

    logged = _logged_surge()
    got = replay_watch(logged)
    assert len(got) == 17 and all(r.match for r in got)
    # λ = 300 + (300 − 200) × 4 / 5 = 380 t/s ⇒ ⌈380 / 50 / 0.9⌉ = 9 cores ⇒ 5 executors
    assert [(r.now, r.replay["executors"]) for r in got if r.replay] == [(2.5, 5)]
    # a log written before the growth horizon was a setting replays with the whole
    # start-up, as it ran; the same samples logged under "persisted" replay with it: the
    # excess has lasted 0.5 s at 2.5 s, λ = 300 + 100 × 0.5 / 5 = 310 ⇒ 7 cores ⇒ 4
    old = [{**d, "config": {k: v for k, v in d["config"].items() if k != "growth_horizon"}}
           for d in logged]  # fmt: skip
    assert all(r.match for r in replay_watch(old))
    persisted = replay_watch(_logged_surge(horizon="persisted"))
    assert all(r.match for r in persisted)
    assert [(r.now, r.replay["executors"]) for r in persisted if r.replay] == [(2.5, 4)]
    # the same samples with the watch switched off: the one request is the one difference
    off = [{**d, "config": {**d["config"], "mid_batch": False}} for d in logged]
    assert [r.now for r in replay_watch(off) if not r.match] == [2.5]


def test_watch_samples_replay_with_their_catch_up_form() -> None:
    from streamscale.control.stimulus import replay_watch

    logged = _logged_surge("latency")
    got = replay_watch(logged)
    assert all(r.match for r in got)
    # bounding the backlog's wait: λ = max(300, (4 × 100) / 5) = 300 ⇒ 7 cores ⇒ 4 executors
    assert [(r.now, r.replay["executors"]) for r in got if r.replay] == [(2.5, 4)]
    # replayed as draining (a log without the field), the requests differ from the first
    # (5 executors at 2.5 s; the logged views still hold 4, so it asks again after)
    drained = [{k: v for k, v in d.items() if k != "catch_up_form"} for d in logged]
    differ = [r for r in replay_watch(drained) if not r.match]
    assert differ[0].now == 2.5 and differ[0].replay["executors"] == 5
    with pytest.raises(StreamscaleError, match="catch_up_form"):
        replay_watch([{**logged[0], "catch_up_form": "soon"}])
