"""The controller's inputs as JSON, and their replay through a fresh controller.

The controller is pure (:mod:`streamscale.control.controller`): what it decides follows
from the events it is fed — ``Tick`` and ``Observed``, each carrying the time — and
from its policy, built from a name, settings, a seed, the topology and the cluster.
A run logs all of these (:class:`InputLog`; the shell puts them in ``metrics.jsonl``,
see docs/metrics.md), so a decision can be replayed offline, as dask's stimulus log
allows: :func:`replay` feeds the logged events at the logged times to a new controller
(the run's policy, or another one) and pairs every decision of the run with the
replay's. Planners are pure and seeds are logged, so the run's own policy and
settings reproduce every decision exactly.

Two kinds of JSON object (both plain JSON, numbers stay numbers):

* ``{"kind": "controller", ...}`` — one per controller (a run, or a resumed run): the
  policy's name, its settings and seed, the controller's settings, the topology and
  the cluster (:func:`controller_header`);
* ``{"kind": "input", ...}`` — one per event fed, in order (:meth:`InputLog.record`):
  ``event`` (``"tick"`` or ``"observed"``), ``now``, for an observation the snapshot and
  the plan in force (the plan only when it differs from the previous observation's),
  and what the run's controller answered (``actions``) or the error it raised.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from streamscale.control.controller import (
    CONTROLLER_SETTINGS,
    Action,
    Collect,
    Controller,
    ControllerConfig,
    Event,
    Hold,
    Observed,
    Policy,
    Tick,
)
from streamscale.control.watch import (
    Request,
    Sample,
    WatchConfig,
    WatchState,
    WatchView,
    watch_step,
)
from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, Plan, Topology
from streamscale.model.io import (
    cluster_from_dict,
    dump,
    plan_from_dict,
    snapshot_from_dict,
    topology_from_dict,
)
from streamscale.planning.allocation.surge import CATCH_UP_FORMS

__all__ = [
    "HEADER_KIND",
    "INPUT_KIND",
    "WATCH_KIND",
    "InputLog",
    "Replayed",
    "Segment",
    "action_to_dict",
    "controller_header",
    "event_from_dict",
    "event_to_dict",
    "replay",
    "replay_watch",
    "segments",
    "watch_input",
]

#: ``kind`` of the object that starts a controller's log.
HEADER_KIND = "controller"
#: ``kind`` of one logged event.
INPUT_KIND = "input"


def _plain(v: Any) -> Any:
    """``v`` as plain JSON values: non-finite floats as strings, numpy scalars as numbers."""
    if isinstance(v, bool) or v is None or isinstance(v, str | int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    item = getattr(v, "item", None)  # numpy scalars
    if callable(item):
        return _plain(item())
    return str(v)


def _model(obj: Any) -> dict[str, Any]:
    """A model object as the mapping its loader reads back (without the ``kind`` tag)."""
    d = dump(obj)
    d.pop("kind", None)
    return _plain(d)  # type: ignore[no-any-return]


def action_to_dict(action: Action) -> dict[str, Any]:
    """What the controller answered: ``collect``, ``hold`` (with its reason) or ``apply``
    (reason, the new plan, the policy's figures and the migration it implies)."""
    if isinstance(action, Collect):
        return {"type": "collect"}
    if isinstance(action, Hold):
        return {"type": "hold", "reason": action.reason}
    return {
        "type": "apply",
        "reason": action.reason,
        "plan": _model(action.plan),
        "figures": _plain(action.figures),
        "shard_moves": len(action.diff.shard_moves),
        "core_moves": len(action.diff.core_moves),
        "migration_bytes": action.diff.migration_bytes,
    }


def event_to_dict(ev: Event, *, with_plan: bool = True) -> dict[str, Any]:
    """One event as an ``input`` object (``with_plan=False`` leaves an observation's plan out)."""
    if isinstance(ev, Tick):
        return {"kind": INPUT_KIND, "event": "tick", "now": ev.now}
    d: dict[str, Any] = {
        "kind": INPUT_KIND,
        "event": "observed",
        "now": ev.now,
        "snapshot": _model(ev.snapshot),
    }
    if with_plan:
        d["plan"] = _model(ev.plan)
    return d


def event_from_dict(
    d: Mapping[str, Any], *, plan: Plan | None = None, where: str = "input"
) -> Event:
    """The event of an ``input`` object; ``plan`` stands in for an observation logged without one."""
    now = d.get("now")
    if isinstance(now, bool) or not isinstance(now, int | float):
        raise StreamscaleError(f"'now' must be a number, got {now!r}", item=where)
    kind = d.get("event")
    if kind == "tick":
        return Tick(float(now))
    if kind != "observed":
        raise StreamscaleError(f"unknown event {kind!r} (tick or observed)", item=where)
    if not isinstance(d.get("snapshot"), Mapping):
        raise StreamscaleError("an observation needs a 'snapshot' mapping", item=where)
    if isinstance(d.get("plan"), Mapping):
        plan = plan_from_dict(d["plan"], where=f"{where}: plan")
    if plan is None:
        raise StreamscaleError("the first observation needs a 'plan'", item=where)
    snap = snapshot_from_dict(d["snapshot"], where=f"{where}: snapshot")
    return Observed(snap, plan, float(now))


def controller_header(
    *,
    policy: str,
    params: Mapping[str, Any] | None,
    seed: int | None,
    config: ControllerConfig,
    topology: Topology,
    cluster: Cluster,
) -> dict[str, Any]:
    """The ``controller`` object: everything a fresh controller needs besides the events.

    ``params`` are the policy's settings as the run passed them to
    :func:`~streamscale.control.policies.make_policy` (before defaults).
    """
    return {
        "kind": HEADER_KIND,
        "policy": policy,
        "params": _plain(dict(params or {})),
        "seed": seed,
        "config": {f.name: getattr(config, f.name) for f in fields(ControllerConfig)},
        "topology": _model(topology),
        "cluster": _model(cluster),
    }


@dataclass
class InputLog:
    """Collects a controller's inputs and answers as JSON objects for the shell to write.

    :func:`streamscale.control.loop.step` calls :meth:`record` with each event before the
    controller handles it and :meth:`answered` with what it returned; the shell calls
    :meth:`failed` when the step raised and :meth:`drain` after each step.
    """

    header: dict[str, Any]
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _header_sent: bool = False
    _last_plan: Plan | None = None

    @classmethod
    def start(
        cls,
        policy: Policy,
        *,
        params: Mapping[str, Any] | None,
        seed: int | None,
        config: ControllerConfig,
        topology: Topology,
        cluster: Cluster,
    ) -> InputLog:
        """The log of a controller about to run ``policy`` (its ``name`` is logged)."""
        name = getattr(policy, "name", type(policy).__name__)
        return cls(controller_header(
            policy=name, params=params, seed=seed, config=config, topology=topology,
            cluster=cluster,
        ))  # fmt: skip

    def record(self, ev: Event) -> None:
        with_plan = isinstance(ev, Observed) and ev.plan != self._last_plan
        if isinstance(ev, Observed):
            self._last_plan = ev.plan
        d = event_to_dict(ev, with_plan=with_plan)
        d["policy"] = self.header["policy"]
        self._pending.append(d)

    def answered(self, actions: Iterable[Action]) -> None:
        if self._pending:
            self._pending[-1]["actions"] = [action_to_dict(a) for a in actions]

    def failed(self, message: str) -> None:
        """The step raised after the last event was fed (the shell then leaves the
        controller idle; the replay does the same)."""
        if self._pending:
            self._pending[-1].setdefault("error", message)

    def drain(self) -> dict[str, Any]:
        """``{"inputs": [...]}`` since the last drain, with ``"controller"`` the first time."""
        out: dict[str, Any] = {}
        if not self._header_sent:
            out["controller"] = self.header
            self._header_sent = True
        out["inputs"], self._pending = self._pending, []
        return out


@dataclass(frozen=True, slots=True)
class Segment:
    """One controller's log: its header and its inputs, in order."""

    header: Mapping[str, Any]
    inputs: tuple[Mapping[str, Any], ...]
    where: str = "metrics"


def segments(lines: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Segment]:
    """The controllers' logs in ``(where, line)`` pairs of a ``metrics.jsonl``.

    A line carries ``controller`` (a new controller starts) and ``inputs`` under
    ``extra`` (a batch's line, docs/metrics.md; a bare log at the top level is read as
    well). Lines without either are
    skipped; inputs before any header raise, naming the line.
    """
    out: list[tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for where, line in lines:
        body = line.get("extra") if isinstance(line.get("extra"), Mapping) else line
        header = body.get(HEADER_KIND)
        if isinstance(header, Mapping):
            out.append((where, header, []))
        inputs = body.get("inputs")
        if not inputs:
            continue
        if not isinstance(inputs, list):
            raise StreamscaleError("'inputs' must be a list", item=where)
        if not out:
            raise StreamscaleError("controller inputs before any 'controller' header", item=where)
        out[-1][2].extend(inputs)
    return [Segment(h, tuple(i), w) for w, h, i in out if i]


@dataclass(frozen=True, slots=True)
class Replayed:
    """One decision: the run's action and the replay's at ``now`` (``None``: no answer)."""

    now: float
    run: Mapping[str, Any] | None
    replay: Mapping[str, Any] | None

    @property
    def match(self) -> bool:
        return _canonical(self.run) == _canonical(self.replay)


def _canonical(action: Mapping[str, Any] | None) -> str:
    return json.dumps(action, sort_keys=True)


def _build(
    seg: Segment, policy: str | None, params: Mapping[str, Any] | None
) -> tuple[Controller, str]:
    from streamscale.control.policies import make_policy

    h = seg.header
    name = policy or h.get("policy")
    if not isinstance(name, str):
        raise StreamscaleError("the header names no policy", item=seg.where)
    given = dict(params or {})
    ctl_keys = {k for k in given if k in CONTROLLER_SETTINGS}
    config = ControllerConfig.from_params(h.get("config") or {})
    if ctl_keys:
        over = CONTROLLER_SETTINGS.parse({k: given.pop(k) for k in ctl_keys}, defaults=False)
        config = replace(config, **over)
    same = policy is None or policy == h.get("policy")
    pol_params = {**(h.get("params") or {}), **given} if same else given
    topology = topology_from_dict(h.get("topology") or {}, where=f"{seg.where}: topology")
    cluster = cluster_from_dict(h.get("cluster") or {}, where=f"{seg.where}: cluster")
    pol: Policy = make_policy(name, topology, cluster, params=pol_params, seed=h.get("seed"))
    return Controller(pol, config), name


def replay(
    seg: Segment, *, policy: str | None = None, params: Mapping[str, Any] | None = None
) -> list[Replayed]:
    """Feed ``seg``'s events to a fresh controller; one :class:`Replayed` per observation.

    Parameters
    ----------
    seg
        One controller's log (see :func:`segments`).
    policy
        The policy to replay with (default: the run's).
    params
        Settings over the run's (same policy) or instead of them (another policy); the
        controller's settings (``interval_s``, …) override the run's controller.

    Notes
    -----
    Each observation carries the plan the run had in force, so with another policy
    every decision is the one that policy would take from what the run observed.
    A step that failed in the run left the controller idle; the replay does the same.
    """
    controller, _ = _build(seg, policy, params)
    out: list[Replayed] = []
    plan: Plan | None = None
    for i, d in enumerate(seg.inputs):
        where = f"{seg.where}: input {i}"
        if not isinstance(d, Mapping):
            raise StreamscaleError("an input must be a mapping", item=where)
        ev = event_from_dict(d, plan=plan, where=where)
        try:
            got: Mapping[str, Any] | None = _answer(controller.handle([ev]))
        except StreamscaleError as exc:
            got = {"type": "error", "reason": str(exc)}
        if "error" in d:
            controller.state = "idle"
        if isinstance(ev, Observed):
            plan = ev.plan
            ran = _answer_dicts(d)
            if "error" in d and "actions" not in d:
                ran = {"type": "error", "reason": d["error"]}
            out.append(Replayed(ev.now, ran, got))
    return out


def _answer(actions: list[Action]) -> dict[str, Any] | None:
    return _canonical_dict(action_to_dict(actions[0])) if actions else None


def _answer_dicts(d: Mapping[str, Any]) -> Mapping[str, Any] | None:
    acts = d.get("actions") or []
    return acts[0] if acts else None


def _canonical_dict(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` as it reads back from JSON (tuples as lists), for comparison with a logged one."""
    return json.loads(json.dumps(d))  # type: ignore[no-any-return]


#: ``kind`` of one logged sample of the mid-batch watch.
WATCH_KIND = "watch_input"


def watch_input(
    sample: Sample,
    view: WatchView,
    request: Request | None,
    *,
    config: WatchConfig,
    latency_target_s: float,
    catch_up_s: float,
    max_utilization: float,
    theta: float,
    catch_up_form: str,
) -> dict[str, Any]:
    """One call of :func:`~streamscale.control.watch.watch_step` as a ``watch_input``
    object: its sample, the view and settings passed in, and the request it returned."""
    return {
        "kind": WATCH_KIND,
        "sample": _plain(asdict(sample)),
        "view": _plain(asdict(view)),
        "config": _plain(asdict(config)),
        "latency_target_s": latency_target_s,
        "catch_up_s": catch_up_s,
        "max_utilization": max_utilization,
        "theta": theta,
        "catch_up_form": catch_up_form,
        "request": None if request is None else _plain(asdict(request)),
    }


def _typed(cls: type[Any], raw: Any, where: str) -> Any:
    if not isinstance(raw, Mapping):
        raise StreamscaleError(f"{cls.__name__} must be a mapping", item=where)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise StreamscaleError(f"unknown field {unknown[0]!r}", item=where)
    try:
        return cls(**raw)
    except TypeError as exc:
        raise StreamscaleError(str(exc), item=where) from None


def replay_watch(inputs: Iterable[Mapping[str, Any]], *, where: str = "watch") -> list[Replayed]:
    """Feed logged watch samples, in order, to :func:`watch_step` from an empty state; one
    :class:`Replayed` per sample (``run`` / ``replay``: the request, or ``None``)."""
    state = WatchState()
    out: list[Replayed] = []
    for i, d in enumerate(inputs):
        at = f"{where}: watch input {i}"
        sample = _typed(Sample, d.get("sample"), f"{at}: sample")
        view = _typed(WatchView, d.get("view"), f"{at}: view")
        raw = d.get("config")
        if isinstance(raw, Mapping) and "growth_horizon" not in raw:
            raw = {**raw, "growth_horizon": "startup"}  # logs written before the setting
        config = WatchConfig.from_params(raw)
        knobs = {
            k: d.get(k) for k in ("latency_target_s", "catch_up_s", "max_utilization", "theta")
        }
        for k, v in knobs.items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise StreamscaleError(f"{k!r} must be a number, got {v!r}", item=at)
        form = d.get("catch_up_form", "drain")  # logs written before the setting: drain
        if form not in CATCH_UP_FORMS:
            raise StreamscaleError(f"'catch_up_form' must be one of {', '.join(CATCH_UP_FORMS)}, "
                                   f"got {form!r}", item=at)  # fmt: skip
        state, request = watch_step(state, sample, view, config=config, catch_up_form=form,
                                    **knobs)  # fmt: skip
        got = None if request is None else _canonical_dict(_plain(asdict(request)))
        out.append(Replayed(sample.now, d.get("request"), got))
    return out
