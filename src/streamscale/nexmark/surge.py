"""The surge scenario of ``bench_autoscale`` on Nexmark Q5 and Q8.

The scenario, its policies and its scoring are :mod:`streamscale.scenarios.surge`'s and
:mod:`~streamscale.scenarios.surge_score`'s, unchanged: a warm-up, then base → peak →
base offered load, each policy in its own SparkSession on the same loopback cluster,
``slo_tuples`` (tuple-weighted) and core-seconds billed from each executor's request.
What changes is the job: instead of the generator → calculator micro-benchmark, the
bundled Nexmark source (``streamscale_nexmark``) offers events on the scenario's rate
schedule and the query's streamscale job (:func:`~streamscale.nexmark.streamscale_engine.
build_job`) runs them:

* Q5 reads the bid stream; its windowed ``count`` per (hop window, auction) is the
  declarative operator that carries the cost;
* Q8 reads the union event stream (persons and auctions); its windowed aggregation per
  (person id, tumbling window) carries the cost.

A *tuple* is a Nexmark event (the source's offsets count events), so ``slo_tuples``
weighs every event offered in the scored window. The per-tuple cost is **waited**
(``wait_ms`` of the declarative operator: the reduce task sleeps per input row, as the
surge's ``cost_kind: wall``), so a loopback cluster's task slots behave like cores on a
small machine. The scenario's ``cost_ms`` is per event; the operator's input rows per
event (:data:`ROWS_PER_EVENT`: Q5's bids fall in 5 hop windows each, Q8 sees persons and
auctions only) turn it into a cost per row, so the load in cores at a given event rate is
the scenario's (:meth:`SurgeConfig.cores_for`) for either query.

:func:`run_nexmark_job` runs such a job with the arguments
:func:`streamscale.scenarios.surge.run_policy` gives ``run_job``; :func:`nexmark_job` is
the job ``run_policy`` (``job=``) builds and runs instead of its own, so every other step
— sessions, executors, Spark's dynamic allocation, the records scored — is the
scenario's own code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.nexmark.generator import GeneratorConfig
from streamscale.scenarios.surge import SurgeConfig, SurgeJob

__all__ = [
    "ROWS_PER_EVENT",
    "SURGE_QUERIES",
    "NexmarkSurgeJob",
    "adaptive_instances",
    "live_input",
    "nexmark_job",
    "nexmark_options",
    "run_nexmark_job",
    "wait_ms",
]

SURGE_QUERIES = ("q5", "q8")
_G = GeneratorConfig()  # the source's proportions (persons : auctions : bids)
_PERSON, _AUCTION, _BID = _G.person_proportion, _G.auction_proportion, _G.bid_proportion
_TOTAL = _G.total_proportion
#: Rows of the costed operator's input per Nexmark event: Q5 counts each bid in its
#: 10 s / 2 s = 5 hop windows; Q8 aggregates the persons and the auctions.
ROWS_PER_EVENT: dict[str, float] = {
    "q5": 5.0 * _BID / _TOTAL,
    "q8": (_PERSON + _AUCTION) / _TOTAL,
}


def _check(q: str) -> str:
    n = str(q).strip().lower()
    if n not in SURGE_QUERIES:
        raise StreamscaleError(
            f"the surge runs on {', '.join(SURGE_QUERIES)} only", item=f"query {q}"
        )
    return n


def wait_ms(cfg: SurgeConfig, q: str) -> float:
    """The waited cost per input row of ``q``'s costed operator (``cfg.cost_ms`` per event)."""
    return cfg.cost_ms / ROWS_PER_EVENT[_check(q)]


def nexmark_options(cfg: SurgeConfig, q: str) -> dict[str, str]:
    """The Nexmark source's options: the scenario's rate schedule (base until the surge,
    the peak for a phase, base after it) in events/s, as steps ``duration_s:rate``."""
    q = _check(q)
    base, peak = cfg.base_rate, cfg.base_rate * cfg.peak_factor
    steps = f"{cfg.surge_at!r}:{base!r},{cfg.phase_s!r}:{peak!r},1.0:{base!r}"
    return {
        "table": "bid" if q == "q5" else "events",
        "seed": str(cfg.seed),
        "schedule": steps,
        "partitions": "2",
    }


def live_input(spark: Any, q: str, cfg: SurgeConfig) -> Any:
    """``q``'s input stream from the Nexmark source on the scenario's schedule."""
    from streamscale.nexmark.source import register
    from streamscale.nexmark.streamscale_engine import prepare

    q = _check(q)
    register(spark)
    df = spark.readStream.format("streamscale_nexmark").options(**nexmark_options(cfg, q)).load()
    if q == "q5":
        return prepare(q, {"bid": df})
    return prepare(
        q, {"person": df.filter("event_type = 0"), "auction": df.filter("event_type = 1")}
    )


@dataclass(frozen=True)
class NexmarkSurgeJob:
    """What ``run_policy`` builds in place of its own job: the query, the scenario and
    the keyed instances of the policy."""

    query: str
    cfg: SurgeConfig
    instances: int


def adaptive_instances(cfg: SurgeConfig, instances: int, keyed: int) -> int:
    """Instances per keyed operator, of ``keyed`` operators, under a policy that sizes
    them: an instance holds at least one core (paper 000, §4.1), so together
    they get at most the cluster's cores (``max_executors × executor_cores``); with
    more, every decision is infeasible and the job keeps its first plan.

    Examples
    --------
    >>> adaptive_instances(SurgeConfig(max_executors=8, executor_cores=2), 8, 3)
    5
    >>> adaptive_instances(SurgeConfig(max_executors=8, executor_cores=2), 8, 1)
    8
    """
    cores = cfg.max_executors * cfg.executor_cores
    return max(1, min(instances, cores // max(1, keyed)))


def run_nexmark_job(
    spark: Any,
    job: NexmarkSurgeJob,
    *,
    policy: str,
    duration_s: float,
    checkpoint: Path,
    params: dict[str, Any] | None = None,
    on_batch: Callable[[Any], None] | None = None,
    seed: int | None = None,
    resources: Any | None = None,
    out: Path | None = None,
    **_: Any,
) -> Any:
    """Run ``job`` on ``spark`` for ``duration_s`` under ``policy`` (``run_job``'s
    arguments; a planning ``cluster`` is not needed: every keyed operator starts with one
    unit per instance), sinking into a row count."""
    from streamscale.nexmark.streamscale_engine import build_job

    cfg = job.cfg

    def build(instances: int) -> Any:
        return build_job(
            live_input(spark, job.query, cfg), job.query, instances=instances,
            shards=cfg.shards, wait_ms=wait_ms(cfg, job.query), trigger_s=cfg.trigger_s,
            source=("streamscale_nexmark", nexmark_options(cfg, job.query)),
        ).to("none", name="out")  # fmt: skip

    s = build(job.instances)
    if policy != "static":  # a policy that sizes the instances: each holds a core
        keyed = sum(1 for op in s.topology().operators if op.keyed)
        fit = adaptive_instances(cfg, job.instances, keyed)
        s = s if fit == job.instances else build(fit)

    # each batch's GraphBatch as it is: ``rows`` are the rows into the first keyed
    # operator, and the progress line reads its time, duration, latency and extra
    return s.run(
        checkpoint=checkpoint, duration_s=duration_s, spark=spark, policy=policy,
        params=params, seed=seed, on_batch=on_batch, resources=resources, out=out,
    )  # fmt: skip


def nexmark_job(q: str) -> SurgeJob:
    """The job :func:`streamscale.scenarios.surge.run_policy` builds and runs for Nexmark
    ``q`` (:func:`run_nexmark_job`) instead of its micro-benchmark job."""
    q = _check(q)
    return SurgeJob(lambda cfg, instances: NexmarkSurgeJob(q, cfg, instances), run_nexmark_job)
