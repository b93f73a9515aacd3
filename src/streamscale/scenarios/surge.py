"""The surge scenario: load rises to a multiple of its base and falls back, on a cluster.

The micro-benchmark (generator → keyed calculator) offers ``base`` tuples/s, then
``peak_factor × base``, then ``base`` again, each for ``phase_s`` seconds, with the
per-tuple cost *waited* (``cost_kind: wall``, an I/O-bound operator) so that a
loopback cluster of executors with C task slots each behaves like that many cores
on a small machine. A ``warmup_s`` period at the base load comes first and is not
scored; after the scored window the run goes on for ``tail_s`` so that every scored
tuple is either committed or older than the latency target when it stops.

Each policy runs in its own SparkSession on the same cluster:

* ``elastic`` — Elasticutor's queueing-model cores; the cores become executors
  (:class:`~streamscale.runtime.spark.executors.resources.ExecutorResources`);
* ``proportional`` — DS2-style: cores proportional to the observed load over a target
  utilisation, realized as executors the same way;
* ``static-peak`` / ``static-base`` — executors sized for the peak / the base load
  (the load's cores plus one, in whole executors), one task per slot, never changed;
* ``spark-dynamic`` — Spark's own dynamic allocation with its default timeouts over a
  job with one task per slot of the largest cluster (so pending tasks give it a reason
  to scale), shuffle tracking on; ``spark-dynamic-tuned`` — the same with the timeouts
  a user shortens for micro-batches (idle, cached-data and shuffle-tracking: 10 s) over
  a job with one task per slot of ``static-peak``'s executors (:func:`policy_instances`);
* ``restart-ds2`` — the calculator as Spark's own ``transformWithStateInPandas`` on
  RocksDB, rescaled the way Flink's autoscaler applies DS2: stop, repartition the state
  offline, restart with the new parallelism and executors
  (:mod:`~streamscale.scenarios.restart`).

Every policy is scored by the same instrument (:mod:`~streamscale.scenarios.surge_score`):
Spark's query progress for the batches, Spark's executor list for the cores, each
executor billed from its request.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.scenarios.scoring import ExecutorSpan, Request
from streamscale.scenarios.surge_outcome import ExecutorSampler, SurgeOutcome

__all__ = [
    "DYNAMIC_SETTINGS",
    "SURGE_POLICIES",
    "ExecutorSampler",
    "SurgeConfig",
    "SurgeJob",
    "SurgeOutcome",
    "micro_benchmark_job",
    "run_policy",
    "run_surge",
]

#: how executors start: on this host when requested, or started beforehand with the
#: request usable after a stated delay (:mod:`~streamscale.runtime.spark.executors.emulated`)
STARTUP_MODES = ("real", "emulated")
SURGE_POLICIES = (
    "elastic",
    "elastic-reactive",
    "elastic-standby",
    "elastic-proactive",
    "proportional",
    "static-peak",
    "static-base",
    "spark-dynamic",
    "spark-dynamic-tuned",
    "restart-ds2",
)
#: the policies whose plans the realizer turns into executors
ADAPTIVE = ("elastic", "proportional")
#: ``elastic`` with warm capacity (issue "Hold latency through a surge", item 5): one idle
#: standby executor held beyond the plan (billed like every executor), or sized for the
#: offered rate's trend one executor start-up ahead
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # the reactive policy: no forecast, the controller's default scale-down delay
    "elastic-reactive": ("elastic", {"forecast": False}),
    "elastic-standby": ("elastic", {"standby_executors": 1}),
    "elastic-proactive": ("elastic", {"proactive": True}),
}
#: Spark's dynamic allocation as each variant runs it; every setting is named in the output
DYNAMIC_SETTINGS: dict[str, dict[str, str]] = {
    "spark-dynamic": {  # Spark's defaults but for the bounds
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        # shuffleTracking.timeout left at Spark's default (infinity; Spark refuses the word)
        "spark.dynamicAllocation.executorIdleTimeout": "60s",
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
    },
    # What a user shortens for micro-batches of a few seconds: an executor may go once no
    # task ran on it for five triggers of 2 s, whatever it holds. A finished batch's
    # shuffle files are never read again (each batch is a new shuffle; the keyed state is
    # in the state store), yet shuffle tracking keeps an executor holding them for
    # shuffleTracking.timeout (Spark's default: for ever); the keyed stage caches its
    # outputs until the operator's next batch, and cached blocks keep an executor for
    # cachedExecutorIdleTimeout (default: for ever).
    "spark-dynamic-tuned": {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.timeout": "10s",
        "spark.dynamicAllocation.cachedExecutorIdleTimeout": "10s",
        "spark.dynamicAllocation.executorIdleTimeout": "10s",
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
    },
}


@dataclass(frozen=True)
class SurgeConfig:
    """The scenario (defaults: base 100 t/s, 3× peak, 60 s phases, 20 ms waited per tuple).

    The defaults need 2 cores at the base load and 6 at the peak, on at most 8
    executors × 2 cores (16 emulated cores). A 45 s warm-up lets the query's first,
    slow batches drain before the schedule starts.
    """

    base_rate: float = 100.0
    peak_factor: float = 3.0
    phase_s: float = 60.0
    cost_ms: float = 20.0
    keys: int = 1000
    alpha: float = 0.5
    omega: float = 2.0
    shards: int = 32
    trigger_s: float = 2.0
    latency_target_ms: float = 10_000.0
    executor_cores: int = 2
    max_executors: int = 8
    #: Elasticutor's elastic executors y: one per executor the cluster may hold (paper
    #: 000 §6: one per node)
    elastic_instances: int = 8
    seed: int = 7
    warmup_s: float = 45.0
    # Placement is left to Spark here: enforcing the plan's placement of cores (each
    # unit pinned to its node's executor) kept 27 % of the batches within the SLO
    # against 78 % unpinned in an A/B run of this scenario (elastic, 20 s phases).
    pin: bool = False
    #: executors start with the client compiler and the serial collector, for every
    #: policy alike (:data:`~streamscale.runtime.spark.executors.resources.QUICK_START_JVM`)
    quick_start: bool = True
    #: executor start-up: ``real`` (executors start when requested, on this host) or
    #: ``emulated`` (every executor started before the run; a request is usable
    #: ``startup_delay_s`` later and billed from the request:
    #: :mod:`~streamscale.runtime.spark.executors.emulated`)
    startup: str = "real"
    startup_delay_s: float = 20.0

    def __post_init__(self) -> None:
        if self.startup not in STARTUP_MODES:
            raise StreamscaleError(
                f"unknown start-up mode (known: {', '.join(STARTUP_MODES)})",
                item=f"startup {self.startup}",
            )
        if not (math.isfinite(self.startup_delay_s) and self.startup_delay_s >= 0):
            raise StreamscaleError(
                f"must be >= 0, got {self.startup_delay_s}", item="startup delay"
            )

    @property
    def tail_s(self) -> float:
        """Run time after the scored window: every scored tuple resolves within it."""
        return self.latency_target_ms / 1000.0 + 2 * self.trigger_s

    @property
    def duration_s(self) -> float:
        """Warm-up, base, peak, then base for two phases (time to release executors), tail."""
        return self.warmup_s + 4 * self.phase_s + self.tail_s

    @property
    def window(self) -> tuple[float, float]:
        """The scored window in seconds of the generator's clock (emit times)."""
        return (self.warmup_s, self.warmup_s + 4 * self.phase_s)

    @property
    def surge_at(self) -> float:
        """When the peak starts, in seconds of the generator's clock."""
        return self.warmup_s + self.phase_s

    def cores_for(self, rate: float) -> int:
        """Cores that serve ``rate`` at the mean per-tuple cost (no headroom)."""
        return max(1, math.ceil(rate * self.cost_ms / 1000.0))

    def executors_for(self, rate: float, executor_cores: int | None = None) -> int:
        """Executors whose slots cover ``rate`` at the mean per-tuple cost (no headroom)."""
        return math.ceil(self.cores_for(rate) / (executor_cores or self.executor_cores))

    def static_executors(self, rate: float, executor_cores: int | None = None) -> int:
        """A static sizing for ``rate``: its cores plus one, in whole executors."""
        c = executor_cores or self.executor_cores
        return min(self.max_executors, math.ceil((self.cores_for(rate) + 1) / c))

    def oracle_core_ratio(self, executor_cores: int | None = None) -> float:
        """The least core-seconds any executor policy can hold, over ``static-peak``'s.

        An oracle that knows the schedule holds, in every scored phase (base, peak,
        base, base), the fewest whole executors whose slots cover the phase's load,
        from the phase's first second to its last; ``static-peak`` holds its executors
        throughout. No policy that keeps up with the load holds fewer core-seconds.

        Examples
        --------
        >>> SurgeConfig().oracle_core_ratio()  # 2-core executors: 1 at base, 3 at peak, of 4
        0.375
        >>> SurgeConfig().oracle_core_ratio(4)  # 4-core: 1 at base, 2 at peak, of 2
        0.625
        """
        c = executor_cores or self.executor_cores
        base = self.executors_for(self.base_rate, c)
        peak = self.executors_for(self.base_rate * self.peak_factor, c)
        static = self.static_executors(self.base_rate * self.peak_factor, c)
        return (3 * base + peak) / (4 * static)

    def offered_points(self) -> tuple[list[float], list[float]]:
        """The offered rate as steps over the generator's clock: ``(times, rates)``."""
        p, w, base = self.phase_s, self.warmup_s, self.base_rate
        peak = base * self.peak_factor
        return [0, w + p, w + p, w + 2 * p, w + 2 * p, w + 4 * p], [
            base, base, peak, peak, base, base]  # fmt: skip

    def describe(self) -> str:
        """The load in a few words, for titles."""
        b = self.base_rate
        return f"surge {b:g} → {b * self.peak_factor:g} → {b:g} t/s, {self.phase_s:g} s each"

    def schedule(self) -> str:
        p, w = self.phase_s, self.warmup_s
        peak = self.base_rate * self.peak_factor
        return f"0:{self.base_rate},{w + p}:{peak},{w + 2 * p}:{self.base_rate}"

    def foresight_params(self) -> dict[str, Any]:
        """Settings a forecasting policy gets on this scenario (none: the step surge has
        no history; :class:`~streamscale.scenarios.traffic.TrafficConfig` gives one)."""
        return {}

    def source_options(self) -> dict[str, str]:
        """The generator's options for this scenario."""
        return {
            "keys": str(self.keys),
            "alpha": str(self.alpha),
            "omega": str(self.omega),
            "cost_ms": str(self.cost_ms),
            "payload_bytes": "64",
            "rate": str(self.base_rate),
            "schedule": self.schedule(),
            "seed": str(self.seed),
        }


def _job(cfg: SurgeConfig, instances: int) -> Any:
    from streamscale.runtime.spark.driver.job import Job
    from streamscale.runtime.spark.keyed.functions import calculator

    return Job.simple(
        "calc",
        calculator,
        source_options=cfg.source_options(),
        instances=instances,
        shards=cfg.shards,
        cost_ms=cfg.cost_ms,
        trigger_s=cfg.trigger_s,
        params={"cost_kind": "wall"},
    )


@dataclass(frozen=True)
class SurgeJob:
    """What a policy's run builds and runs: ``build(cfg, instances)`` makes the job and
    ``run(spark, job, **kw)`` runs it with ``run_job``'s keywords (default: the
    micro-benchmark's keyed calculator under :func:`~streamscale.runtime.spark.driver.runner.run_job`;
    :func:`streamscale.nexmark.surge.nexmark_job` gives a Nexmark query)."""

    build: Callable[[SurgeConfig, int], Any]
    run: Callable[..., Any]


def micro_benchmark_job() -> SurgeJob:
    """The scenario's own job: the keyed calculator, run by ``run_job``."""
    from streamscale.runtime.spark.driver.runner import run_job

    return SurgeJob(_job, run_job)


def policy_instances(cfg: SurgeConfig, policy: str) -> int:
    """Keyed instances (tasks) of each policy's job: one per slot for the static sizings.

    Every batch runs one keyed task per instance whatever its load, and Spark's dynamic
    allocation asks for the executors whose slots hold a stage's tasks. ``spark-dynamic``
    runs one per slot of the largest cluster. ``spark-dynamic-tuned`` runs ``static-peak``'s
    count, as a user sizes a stateful query's partitions: they are fixed at its first
    batch (Spark keeps ``spark.sql.shuffle.partitions`` in the checkpoint), a task is the
    most a partition's work gets of a batch, and the base load's count would hold the job
    below the peak for good.
    """
    peak = cfg.static_executors(cfg.base_rate * cfg.peak_factor) * cfg.executor_cores
    base = cfg.static_executors(cfg.base_rate) * cfg.executor_cores
    return {
        "elastic": cfg.elastic_instances,
        "elastic-reactive": cfg.elastic_instances,
        "elastic-standby": cfg.elastic_instances,
        "elastic-proactive": cfg.elastic_instances,
        "proportional": cfg.elastic_instances,
        "static-peak": peak,
        "static-base": base,
        "spark-dynamic": cfg.max_executors * cfg.executor_cores,
        "spark-dynamic-tuned": peak,
    }[policy]


def _record(outcome: SurgeOutcome, spark: Any, log: Any, sampler: ExecutorSampler) -> None:
    from streamscale.scenarios.spark_log import executor_spans

    outcome.end_s = time.time()
    outcome.spans = log.seq_spans()
    t0 = log.t0()
    outcome.t0 = math.nan if t0 is None else t0
    outcome.executors = executor_spans(spark.sparkContext)
    outcome.samples = list(sampler.samples)
    outcome.cpu = list(sampler.cpu)


def run_policy(
    master: str,
    cfg: SurgeConfig,
    policy: str,
    *,
    on_batch: Callable[[dict[str, Any]], None],
    job: SurgeJob | None = None,
    metrics_dir: Path | None = None,
) -> SurgeOutcome:
    """One policy through the scenario in a fresh SparkSession on ``master``; ``job``
    builds and runs the job (default: :func:`micro_benchmark_job`); with ``metrics_dir``
    the run's ``metrics.jsonl`` (every batch and the controller's inputs, for
    ``streamscale replay``) is kept in ``metrics_dir/POLICY``."""
    if policy == "restart-ds2":
        from streamscale.scenarios.restart import run_restart_ds2

        return run_restart_ds2(master, cfg, on_batch=on_batch)
    from streamscale.runtime.spark.executors.resources import (
        capacity_cluster,
        executor_conf,
    )
    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.scenarios.spark_log import ProgressLog

    conf = executor_conf(
        cfg.executor_cores, cfg.max_executors, pin=cfg.pin, separate_hosts=cfg.pin,
        quick_start=cfg.quick_start,
    )  # fmt: skip
    dynamic = DYNAMIC_SETTINGS.get(policy)
    if dynamic is not None:
        conf.update(dynamic)
        conf.update(
            {
                "spark.dynamicAllocation.minExecutors": "1",
                "spark.dynamicAllocation.initialExecutors": "1",
                "spark.dynamicAllocation.maxExecutors": str(cfg.max_executors),
            }
        )
    instances = policy_instances(cfg, policy)
    work = job if job is not None else micro_benchmark_job()
    built = work.build(cfg, instances)
    base_policy, extra = VARIANTS.get(policy, (policy, {}))
    spark = build_session(master, app_name=f"streamscale-surge-{policy}", conf=conf)
    sc = spark.sparkContext
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-surge-"))
    outcome = SurgeOutcome(policy)
    outcome.settings = {
        "instances": instances,
        **(conf if dynamic is not None else {}),
        **extra,
    }
    log = ProgressLog().attach(spark)
    sampler = ExecutorSampler(sc)
    resources = None
    try:
        if dynamic is None:
            resources = _resources(cfg, sc, instances)
            resources.settle(120.0)
        with sampler:
            res = work.run(
                spark,
                built,
                policy=base_policy if base_policy in ADAPTIVE else "static",
                duration_s=cfg.duration_s,
                checkpoint=scratch / "ckpt",
                out=None if metrics_dir is None else Path(metrics_dir) / policy,
                # the backlog a surge leaves must drain well within the SLO (DS2's catch-up);
                # the SLO is each tuple's latency, so the backlog is sized by the wait of
                # its last tuple (first in, first out), not by the time to empty the queue
                params={
                    "latency_target_ms": cfg.trigger_s * 1000.0,
                    "catch_up_s": cfg.latency_target_ms / 2000.0,
                    "catch_up_form": "latency",
                    **(cfg.foresight_params() if foresees(policy) else {}),
                    **extra,
                },
                on_batch=lambda rec: on_batch(_row(policy, rec, sc)),
                seed=cfg.seed,
                cluster=capacity_cluster(cfg.max_executors, cfg.executor_cores)
                if resources is None
                else None,
                resources=resources,
            )
        del res
        _record(outcome, spark, log, sampler)
        spans = getattr(resources, "spans", None)
        if spans is not None:  # emulated start-up: the usable executors are billed
            outcome.executors = [ExecutorSpan(s.executor, s.cores, s.added_s, s.removed_s)
                                 for s in spans]  # fmt: skip
        if resources is not None:
            outcome.requests = [Request(t, n) for t, n in resources.requests]
            outcome.mid_batch = [t for t, _ in resources.mid_batch]
    except StreamscaleError as exc:
        outcome.error = str(exc)
    finally:
        log.detach()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome


#: the policies that size with the forecast and the latency target (the scenario's own
#: history, scale-down delay and SLO: ``cfg.foresight_params()``)
FORESIGHT = ("elastic",)


def foresees(policy: str) -> bool:
    """Whether ``policy`` sizes with the forecast (``elastic``; not ``elastic-reactive``)."""
    return policy in FORESIGHT


def _resources(cfg: SurgeConfig, sc: Any, instances: int) -> Any:
    """The executors a policy's run sizes: started on request, or emulated (``cfg.startup``)."""
    from streamscale.runtime.spark.executors.emulated import EmulatedStartupResources
    from streamscale.runtime.spark.executors.resources import ExecutorResources

    kw = {"pin": cfg.pin, "cores_per_executor": cfg.executor_cores,
          "max_executors": cfg.max_executors,
          "initial_executors": max(1, math.ceil(instances / cfg.executor_cores))}  # fmt: skip
    if cfg.startup == "emulated":
        return EmulatedStartupResources(sc, delay_s=cfg.startup_delay_s, **kw)
    return ExecutorResources(sc, **kw)


def _row(policy: str, rec: Any, sc: Any) -> dict[str, Any]:
    seq = sc._jsc.sc().getExecutorIds()
    x = rec.extra
    return {"policy": policy, "batch": rec.batch_id, "rows": rec.rows, "time": rec.time,
            "executors": seq.size(), "p99_ms": rec.latency_p99_ms,
            "duration_s": rec.duration_s, "stage_s": x.get("stage_s", rec.duration_s),
            "ready_cores": x.get("ready_cores"), "units": len(x.get("units", ())),
            "admission_limit": x.get("admission_limit"), "warm_up_s": x.get("warm_up_s"),
            "executors_wanted": x.get("executors_wanted"), "backlog": x.get("backlog"),
            "decision": x.get("decision"), "control_error": x.get("control_error"),
            "mid": x.get("mid_batch_requests"),
            "tasks": x.get("task_runs"), "ran_on": x.get("task_executors"),
            "placement": x.get("placement")}  # fmt: skip


def run_surge(
    master: str,
    cfg: SurgeConfig,
    policies: Sequence[str],
    *,
    on_batch: Callable[[dict[str, Any]], None] = lambda row: None,
    job: SurgeJob | None = None,
    metrics_dir: Path | None = None,
) -> list[SurgeOutcome]:
    """Every policy in turn on the same cluster (``job``: see :func:`run_policy`); a
    policy whose run fails is reported with its error (one line) and the others still
    run."""
    for p in policies:
        if p not in SURGE_POLICIES:
            raise StreamscaleError(f"unknown policy (known: {', '.join(SURGE_POLICIES)})", item=p)
    out = []
    for p in policies:
        try:
            out.append(
                run_policy(master, cfg, p, on_batch=on_batch, job=job, metrics_dir=metrics_dir)
            )
        except Exception as exc:  # Spark refused a setting, the session died: say which
            failed = SurgeOutcome(p)
            failed.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            out.append(failed)
    return out


def config_dict(cfg: SurgeConfig) -> dict[str, Any]:
    return {**asdict(cfg), "cost_kind": "wall", "schedule": cfg.schedule()}
