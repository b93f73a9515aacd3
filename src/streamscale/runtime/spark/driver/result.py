""":class:`RunResult`: what a finished run returns, whichever way it ran.

:func:`~streamscale.runtime.spark.driver.dag.run_graph` (and so
:meth:`~streamscale.runtime.spark.api.Stream.run`) builds it from the run's bounded
history; :func:`~streamscale.runtime.spark.driver.runner.run_job` adds a linear job's
figures (its cores and physical limit), and
:func:`~streamscale.runtime.spark.driver.runner.summarize_run` builds the same for the
Spark-native baseline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamscale.model import Plan
from streamscale.runtime.spark.driver.graph_batch import GraphBatch

__all__ = ["RunResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """A finished run: its recent batches, the newest plan and whole-run figures.

    A job may run for weeks and its driver must not keep every batch, so ``records``
    holds only the most recent committed batches while every other figure covers the
    whole run, read from its bounded history
    (:class:`~streamscale.runtime.spark.driver.history.RunHistory`). ``throughput`` and
    the latency percentiles are over the batches after the first (which carries
    Spark's start-up; the first alone when it is all).

    Attributes
    ----------
    records
        The most recent committed batches, in order (at most
        :data:`~streamscale.runtime.spark.driver.history.RECENT_BATCHES`).
    batches
        Batches committed over the whole run.
    plan
        The newest plan: the one the last batch decided, which a next batch (or a
        resumed run) would take, even when the run stopped before it took effect.
        ``None`` when the run had no plan (the Spark-native baseline).
    dead_letters
        Dead letters the run left (those the retention limit removed included).
    keyed_rows
        Rows into each keyed operator over the whole run.
    sink_rows
        Rows out of each sink over the whole run (a linear job's sinks are written
        inside its keyed tasks and are not counted here).
    throughput
        Rows into the first keyed operator per second.
    p50_ms, p99_ms
        Latency percentiles (ms), from a sketch of every latency (1 % relative error).
    busy_s, cpu_s
        Every keyed task's wall and CPU seconds, summed: on a shared machine ``cpu_s``
        far below ``busy_s`` means the cores were not ours.
    max_tasks
        The most reduce tasks a batch ran.
    rows
        Rows into the first keyed operator over the whole run.
    cores
        The cores the physical limit counts (0: not known, as for a job graph).
    physical_limit
        Rows per second ``cores`` sustain at the job's mean per-tuple cost,
        ``cores ÷ mean per-tuple cost`` (NaN: no cost known).
    efficiency
        ``throughput ÷ physical_limit`` (NaN where the limit is not known): derived,
        a property.
    """

    records: tuple[GraphBatch, ...]
    batches: int
    plan: Plan | None
    dead_letters: int
    keyed_rows: Mapping[str, int] = field(default_factory=dict)
    sink_rows: Mapping[str, int] = field(default_factory=dict)
    throughput: float = 0.0
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    busy_s: float = 0.0
    cpu_s: float = 0.0
    max_tasks: int = 0
    rows: int = 0
    cores: int = 0
    physical_limit: float = math.nan

    @property
    def efficiency(self) -> float:
        """``throughput ÷ physical_limit`` (NaN where the limit is not known)."""
        limit = self.physical_limit
        return self.throughput / limit if math.isfinite(limit) and limit > 0 else math.nan
