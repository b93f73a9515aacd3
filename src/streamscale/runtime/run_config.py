"""The settings of a run, declared once and parsed once at the edge.

:data:`RUN_SETTINGS` declares every run-level knob ``streamscale run`` and the Python
API (:meth:`streamscale.runtime.spark.api.Stream.run`) take: the policy, how long and
how far to run, the seed, the Spark master, the cluster file, where state lives, the
metrics port, Spark's UI and the executors' bounds; :data:`TRIGGER_S` is the
micro-batch interval a job's source declares. :func:`parse_run` is the one function
that turns what a user gave (options and ``--param`` pairs) into a frozen
:class:`RunConfig`; :func:`parse_params` is its ``--param`` half. The core (runner,
DAG driver, controller, policies, planners) reads the frozen values only.

The policy's and the planners' settings keep their own schemas (declared with the
policy, :mod:`streamscale.control.policies.spec`, and with each planner); they are
parsed here, once, into a :class:`~streamscale.settings.Frozen` mapping.

Defaults: policy ``elastic``; ``trigger_s`` 1 s (a source that declares none runs a
micro-batch a second; ``0`` runs them back to back, as Spark does without a trigger).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.cluster.managers import manager_for, managers
from streamscale.runtime.spark.state.retention import OUTPUT_SETTINGS
from streamscale.runtime.spark.state.state_api import STATE_URL
from streamscale.settings import Frozen, Schema, Setting, split_params

if TYPE_CHECKING:
    from streamscale.control.controller import ControllerConfig
    from streamscale.control.watch import WatchConfig

__all__ = [
    "RUN_SETTINGS",
    "TRIGGER_S",
    "RunConfig",
    "RunParams",
    "parse_params",
    "parse_run",
    "source_trigger",
]

#: The micro-batch interval of a job's source (its ``trigger_s`` parameter).
TRIGGER_S = Setting(
    "trigger_s",
    float,
    1.0,
    "micro-batch interval of the job's source (s); 0: batches back to back",
    low=0.0,
)

#: Every run-level setting, declared once (the CLI's options and the API's keywords).
RUN_SETTINGS = Schema(
    "run",
    Setting("policy", str, "elastic", "live policy planning the keyed operators"),
    Setting("duration_s", float, 30.0, "seconds to run", low=0.0, low_open=True),
    Setting("max_batches", int, None, "stop after this many batches (default: no limit)", low=1),
    Setting("seed", int, None, "seed passed to the policy (default: none)"),
    Setting("master", str, "local[*]", "Spark master URL (local[N], spark://host:port, ...)"),
    Setting("cluster", str, None, "cluster file to plan for (default: the Spark cores)"),
    STATE_URL,
    Setting(
        "metrics_port",
        int,
        None,
        "serve Prometheus /metrics on 127.0.0.1:PORT",
        low=1,
        high=65535,
    ),
    Setting("spark_ui", bool, True, "Spark's web UI"),
    Setting("available_now", bool, False, "process what the source holds, then stop"),
    Setting("executor_cores", int, 1, "cores per executor (cluster masters)", low=1, high=256),
    Setting("min_executors", int, 1, "fewest executors the job keeps", low=1, high=1024),
    Setting("max_executors", int, 8, "most executors the job may hold", low=1, high=1024),
    TRIGGER_S,
)

_SOURCE = Schema("source", TRIGGER_S)


@dataclass(frozen=True, slots=True)
class RunParams:
    """``--param`` values parsed: the policy's settings (its schema, defaults filled), the
    controller's and the watch's configuration, what the run keeps of its output
    (:data:`~streamscale.runtime.spark.state.retention.OUTPUT_SETTINGS`), and the names the
    user set."""

    policy: Frozen
    controller: ControllerConfig
    watch: WatchConfig
    given: frozenset[str]
    output: Frozen = field(default_factory=lambda: OUTPUT_SETTINGS.freeze({}))


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One run's settings, parsed once (:func:`parse_run`); see :data:`RUN_SETTINGS`."""

    policy: str
    duration_s: float
    max_batches: int | None
    seed: int | None
    master: str
    cluster: str | None
    state_url: str | None
    metrics_port: int | None
    spark_ui: bool
    available_now: bool
    executor_cores: int
    min_executors: int
    max_executors: int
    trigger_s: float
    params: RunParams


def parse_params(policy: str | None, params: Mapping[str, Any] | RunParams | None) -> RunParams:
    """``params`` (``--param`` pairs, YAML or keyword values) routed to the policy's, the
    controller's and the watch's schemas and parsed; ``policy`` ``None``: a policy object
    given by the caller, whose settings are its own business (only checked by name).

    Already parsed :class:`RunParams` are returned as they are.
    """
    if isinstance(params, RunParams):
        return params
    from streamscale.control.controller import CONTROLLER_SETTINGS, ControllerConfig
    from streamscale.control.policies import POLICY_SETTINGS, spec
    from streamscale.control.watch import WATCH_SETTINGS, WatchConfig

    chosen = spec(policy) if policy is not None else None  # an unknown policy is named first
    given = dict(params or {})
    pol, ctl, watch, out = split_params(
        given, POLICY_SETTINGS, CONTROLLER_SETTINGS, WATCH_SETTINGS, OUTPUT_SETTINGS
    )
    frozen = chosen.parse(pol) if chosen is not None else Frozen("policy", pol)
    return RunParams(
        policy=frozen,
        controller=ControllerConfig(**CONTROLLER_SETTINGS.parse(ctl)),
        watch=WatchConfig(**WATCH_SETTINGS.parse(watch)),
        given=frozenset(given),
        output=OUTPUT_SETTINGS.freeze(out),
    )


def parse_run(
    values: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    items: Mapping[str, str] | None = None,
) -> RunConfig:
    """The one parse of a run's settings: ``values`` by :data:`RUN_SETTINGS` (unset ones
    take their declared default), ``params`` by :func:`parse_params`, every cross-check
    made here, before anything starts.

    ``items`` names each setting as the caller's user knows it (``duration_s`` →
    ``--duration``) in the one-line error.
    """
    names = dict(items or {})
    try:
        v = RUN_SETTINGS.parse(values)
    except StreamscaleError as exc:
        item = exc.item or ""
        raise StreamscaleError(
            str(exc).removeprefix(f"{item}: "), item=names.get(item, item)
        ) from None
    if manager_for(v["master"]) is None:
        known = ", ".join(f"{m.name} ({m.pattern})" for m in managers())
        raise StreamscaleError(
            f"no cluster manager serves this master URL (known: {known})",
            item=f"{names.get('master', 'master')} {v['master']}",
        )
    if not v["min_executors"] <= v["max_executors"]:
        raise StreamscaleError(
            "need 1 <= --min-executors <= --max-executors <= 1024 and 1 <= --executor-cores <= 256",
            item="executors",
        )
    if v["state_url"] is not None:
        from streamscale.runtime.spark.state.state import check_state_url

        check_state_url(v["state_url"])
    return RunConfig(**v, params=parse_params(v["policy"], params))


def source_trigger(params: Mapping[str, Any], *, item: str) -> float:
    """The ``trigger_s`` a job's source operator declares in ``params``, parsed by
    :data:`TRIGGER_S` (its default when unset); ``item`` names the operator."""
    try:
        trigger: float = _SOURCE.read(params)["trigger_s"]
        return trigger
    except StreamscaleError as exc:
        raise StreamscaleError(f"{exc}", item=item) from None
