"""The main job: paper 000's micro-benchmark under each policy in turn, and its report.

Paper 000 (Elasticutor), §6.1: a generator feeds a keyed calculator (10 K keys,
Zipf α = 0.5, ω = 2 key-frequency shuffles per minute, 1 ms mean per-tuple cost,
128-byte payloads). :func:`run_demo` runs it on Spark once per policy
(``elastic``, ``static``, ``rc``, ``naive-ec`` through the elastic runner and
``spark-native`` through Spark's own state store) on the same generated tuples
and :func:`write_report` writes ``summary.json``, ``summary.md`` and
``timeline.png`` (throughput and p99 latency over time per policy).

Throughput counts tuples per wall second after the first batch; efficiency is
throughput ÷ the physical limit ``cores ÷ mean per-tuple cost`` (the mean of
the truncated N(μ, 0.5μ) cost, ≈ 1.004 μ).
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.formatting import jsonable, markdown_table
from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.result import RunResult
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.sources.sources import expected_cost_ms
from streamscale.scenarios.native import NATIVE_POLICY, run_native

__all__ = [
    "DEFAULT_POLICIES",
    "DemoConfig",
    "PolicyOutcome",
    "microbench_job",
    "run_demo",
    "summarize",
    "write_report",
]

DEFAULT_POLICIES: tuple[str, ...] = ("elastic", "static", "rc", "naive-ec", NATIVE_POLICY)
#: seconds of offered tuples a batch takes at most when batches run back to back (trigger 0)
_UNTRIGGERED_CAP_S = 2.0


@dataclass(frozen=True)
class DemoConfig:
    """The micro-benchmark's workload and how long each policy runs.

    ``rate`` None means ``load`` × the physical limit of ``cores`` (the
    generator must saturate the calculator for throughput to be measured).
    ``instances`` None means one executor per core, so ``static`` (one core
    per executor) uses every core once, as the paper's static baseline does.
    Each policy runs :attr:`batches` micro-batches (``duration_s`` worth of
    triggers after a warm-up batch), capped at :attr:`wall_cap_s` wall seconds.
    """

    duration_s: float = 30.0
    policies: tuple[str, ...] = DEFAULT_POLICIES
    keys: int = 10_000
    alpha: float = 0.5
    omega: float = 2.0
    cost_ms: float = 1.0
    payload_bytes: int = 128
    rate: float | None = None
    load: float = 1.1
    instances: int | None = None
    shards: int = 64
    trigger_s: float = 2.0
    #: rows per batch at most ``rate × batch_cap_s`` (None: one trigger interval's worth)
    batch_cap_s: float | None = None
    seed: int = 7
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.policies:
            raise StreamscaleError("no policy to run", item="--policies")
        if self.duration_s <= 0:
            raise StreamscaleError("must be > 0", item="--duration")
        if self.rate is not None and self.rate <= 0:
            raise StreamscaleError("must be > 0", item="--rate")
        if self.batch_cap_s is not None and self.batch_cap_s <= 0:
            raise StreamscaleError("must be > 0", item="batch_cap_s")

    @property
    def batches(self) -> int:
        """Batches per policy: ``duration_s`` of triggers plus the warm-up batch.

        Counting batches rather than wall seconds keeps Spark's start-up (which
        varies with the machine's load) out of every policy's measured window.
        """
        return max(2, math.ceil(self.duration_s / max(self.trigger_s, 0.1)) + 1)

    @property
    def wall_cap_s(self) -> float:
        """Wall-time cap per policy, for a run whose batches fall far behind the trigger."""
        return 4.0 * self.duration_s + 120.0

    @property
    def cap_s(self) -> float:
        """Seconds of offered tuples a batch takes at most (one trigger interval by default)."""
        if self.batch_cap_s is not None:
            return self.batch_cap_s
        return self.trigger_s if self.trigger_s > 0 else _UNTRIGGERED_CAP_S

    def executors_for(self, cores: int) -> int:
        """Elastic executors of the calculator: ``instances`` or one per core."""
        return self.instances if self.instances is not None else max(cores, 1)

    def rate_for(self, cores: int) -> float:
        """Tuples/s offered: ``rate`` or ``load`` × ``cores ÷ cost``."""
        if self.rate is not None:
            return self.rate
        return self.load * cores * 1000.0 / self.cost_ms if self.cost_ms > 0 else 1000.0 * cores


def microbench_job(config: DemoConfig, cores: int) -> Job:
    """Generator → keyed calculator, paper 000's micro-benchmark (§6.1)."""
    rate = config.rate_for(cores)
    options = {
        "keys": str(config.keys),
        "alpha": repr(config.alpha),
        "omega": repr(config.omega),
        "cost_ms": repr(config.cost_ms),
        "payload_bytes": str(config.payload_bytes),
        "rate": repr(rate),
        "seed": str(config.seed),
        "partitions": str(max(cores, 1)),
        # A bounded batch keeps a saturated run from snowballing into ever larger batches.
        "max_rows_per_batch": str(max(int(rate * config.cap_s), 1)),
    }
    return Job.simple(
        "calc",
        "streamscale.runtime.spark.keyed.functions:calculator",
        source_options=options,
        instances=config.executors_for(cores),
        shards=config.shards,
        cost_ms=config.cost_ms,
        trigger_s=config.trigger_s,
    )


@dataclass
class PolicyOutcome:
    """One policy's run: its result, or the one-line error that stopped it."""

    policy: str
    result: RunResult | None = None
    error: str | None = None


def run_demo(
    spark: Any,
    config: DemoConfig,
    out: Path,
    *,
    on_start: Callable[[str], None] | None = None,
    on_batch: Callable[[str, GraphBatch], None] | None = None,
    on_done: Callable[[PolicyOutcome], None] | None = None,
) -> list[PolicyOutcome]:
    """Run the micro-benchmark once per policy; metrics go to ``out/<policy>/metrics.jsonl``.

    A policy that fails (e.g. a planner error) is recorded with its message and
    the next policy still runs. Every run starts from a fresh checkpoint.
    """
    cores = int(spark.sparkContext.defaultParallelism)
    job = microbench_job(config, cores)
    outcomes: list[PolicyOutcome] = []
    scratch = Path(tempfile.mkdtemp(prefix="streamscale-demo-"))
    try:
        for policy in config.policies:
            if on_start is not None:
                on_start(policy)
            pout = out / policy
            if pout.exists():
                shutil.rmtree(pout)

            def cb(rec: GraphBatch, _p: str = policy) -> None:
                if on_batch is not None:
                    on_batch(_p, rec)

            kwargs: dict[str, Any] = {
                "duration_s": config.wall_cap_s,
                "max_batches": config.batches,
                "checkpoint": scratch / policy,
                "out": pout,
                "on_batch": cb,
                "seed": config.seed,
            }
            try:
                if policy == NATIVE_POLICY:
                    res = run_native(spark, job, params=config.params, **kwargs)
                else:
                    res = run_job(spark, job, policy=policy, params=config.params, **kwargs)
                outcome = PolicyOutcome(policy, result=res)
            except StreamscaleError as exc:
                outcome = PolicyOutcome(policy, error=str(exc))
            outcomes.append(outcome)
            if on_done is not None:
                on_done(outcome)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcomes


def _policy_figures(o: PolicyOutcome) -> dict[str, Any]:
    if o.result is None:
        return {"error": o.error}
    r = o.result
    steady = r.records[1:] if len(r.records) > 1 else r.records
    deltas = [x.delta for x in steady if math.isfinite(x.delta)]
    return {
        "throughput": r.throughput,
        "efficiency": r.efficiency,
        "p50_ms": r.p50_ms,
        "p99_ms": r.p99_ms,
        "physical_limit": r.physical_limit,
        "batches": r.batches,
        "rows": r.rows,
        "mean_delta": float(np.mean(deltas)) if deltas else math.nan,
        "max_tasks": r.max_tasks,
        "dead_letters": r.dead_letters,
    }


def summarize(
    outcomes: Sequence[PolicyOutcome], config: DemoConfig, *, cores: int, master: str
) -> dict[str, Any]:
    """``summary.json``'s content: per-policy figures plus the configuration that produced them."""
    cfg = asdict(config)
    cfg["rate"] = config.rate_for(cores)
    cfg["instances"] = config.executors_for(cores)
    cfg["policies"] = list(config.policies)
    cfg["params"] = dict(config.params)
    return {
        "policies": {o.policy: _policy_figures(o) for o in outcomes},
        "config": cfg,
        "cores": cores,
        "master": master,
        "physical_limit": (
            cores * 1000.0 / expected_cost_ms(config.cost_ms) if config.cost_ms > 0 else None
        ),
    }


def _markdown(summary: Mapping[str, Any]) -> str:
    cfg = summary["config"]
    rows: list[list[Any]] = []
    for name, f in summary["policies"].items():
        if "error" in f:
            rows.append([name, "failed", "-", "-", "-", "-", f["error"]])
            continue
        rows.append(
            [
                name,
                _num(f["throughput"]),
                _pct(f["efficiency"]),
                _num(f["p50_ms"]),
                _num(f["p99_ms"]),
                _num(f["mean_delta"]),
                f"{f['batches']} batches, max {f['max_tasks']} tasks",
            ]
        )
    head = (
        f"# streamscale demo: paper 000 micro-benchmark on Spark ({summary['master']})\n\n"
        f"{cfg['keys']} keys, Zipf α = {cfg['alpha']}, ω = {cfg['omega']} shuffles/min, "
        f"{cfg['cost_ms']} ms mean cost per tuple, {cfg['payload_bytes']} B payload, "
        f"offered {cfg['rate']:.0f} tuples/s, {cfg['duration_s']:.0f} s per policy, "
        f"{cfg['instances']} executors × {cfg['shards']} shards, {summary['cores']} cores "
        f"({_limit(summary['physical_limit'])}).\n\n"
    )
    table = markdown_table(
        ["policy", "throughput (t/s)", "efficiency", "p50 (ms)", "p99 (ms)", "mean δ", "notes"],
        rows,
    )
    return head + table + "\n\n![throughput and p99 over time](timeline.png)\n"


def _limit(limit: float | None) -> str:
    if limit is None:
        return "no physical limit: the per-tuple cost is 0"
    return f"physical limit {limit:.0f} tuples/s"


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _pct(x: Any) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{100.0 * float(x):.1f} %"


def _plot(path: Path, outcomes: Sequence[PolicyOutcome], limit: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for o in outcomes:
        if o.result is None or not o.result.records:
            continue
        recs = o.result.records[1:] or o.result.records
        t = [r.time - o.result.records[0].time for r in recs]
        ax1.plot(t, [r.input_rate for r in recs], marker=".", label=o.policy)
        ax2.plot(t, [r.latency_p99_ms for r in recs], marker=".", label=o.policy)
    if limit:
        ax1.axhline(limit, color="grey", linestyle="--", linewidth=1, label="physical limit")
    ax1.set_ylabel("throughput (tuples/s)")
    if ax1.get_legend_handles_labels()[0]:  # no policy ran and no limit: nothing to name
        ax1.legend(loc="best", fontsize="small")
    ax2.set_ylabel("p99 latency (ms)")
    ax2.set_yscale("log")
    ax2.set_xlabel("time since the policy's warm-up batch ended (s)")
    ax1.set_title("paper 000 micro-benchmark: per-batch throughput and p99 latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out: Path, summary: Mapping[str, Any], outcomes: Sequence[PolicyOutcome]) -> None:
    """Write ``summary.json``, ``summary.md`` and ``timeline.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(jsonable(dict(summary)), indent=2) + "\n")
    (out / "summary.md").write_text(_markdown(summary))
    _plot(out / "timeline.png", outcomes, summary.get("physical_limit"))
