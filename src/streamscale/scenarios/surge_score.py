"""The surge's figures per policy, from what Spark recorded.

Every figure comes from a :class:`~streamscale.scenarios.surge.SurgeOutcome` — Spark's
query progress, Spark's executor list, the run's executor requests — through the pure
scoring of :mod:`~streamscale.scenarios.scoring`, so each policy is measured alike:

* ``slo_tuples`` (the headline): tuples emitted in the scored window whose end-to-end
  latency (batch end − scheduled emit time) met the target; ``slo_batches`` beside it;
* ``core_seconds``: executors' cores within the window, billed from their request;
  ``mean_cores`` = core-seconds ÷ the window;
* ``scale_ups`` / ``scale_downs``: rises and falls of the executors alive from one
  scored batch's end to the next; ``scale_ups_run`` / ``scale_downs_run`` the same over
  the whole run, warm-up included (from the query's start);
* ``reaction``: from the surge's start to the first request for more executors
  (``decision_s``), to the first executor that arrived after it (``arrival_s``) and to
  the first second of tasks it ran (``tasks_s``, from 0.5 s samples of Spark's executor
  task time).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from streamscale.scenarios.scoring import (
    BatchSpan,
    ExecutorSpan,
    batch_latencies,
    bill,
    score_batches,
    score_tuples,
)

__all__ = [
    "alive_at",
    "in_force",
    "reaction",
    "scale_events",
    "summarize_surge",
    "timeline",
    "up_requests",
]

#: task time (ms) an added executor must have run to count as working (warm-up tasks
#: that start its Python workers take milliseconds)
WORKING_MS = 500.0


def _emit_fn(o: Any, cfg: Any) -> Any:
    from streamscale.runtime.spark.sources.sources import GeneratorSpec

    spec = GeneratorSpec.from_options(cfg.source_options())
    return lambda seqs: o.t0 + spec.emit_times(seqs)


def alive_at(executors: list[ExecutorSpan], t: float) -> int:
    """Executors alive at epoch time ``t``."""
    return sum(1 for e in executors if e.added_s <= t and (e.removed_s is None or e.removed_s > t))


def scale_events(executors: list[ExecutorSpan], times: list[float]) -> tuple[int, int]:
    """Rises and falls of the executors alive, sampled at ``times`` (sorted here)."""
    alive = [alive_at(executors, t) for t in sorted(times)]
    pairs = list(itertools.pairwise(alive))
    return sum(1 for a, b in pairs if b > a), sum(1 for a, b in pairs if b < a)


def in_force(requests: Any, at: float) -> int:
    """The executors requested in all at ``at``: the latest request at or before it (0:
    none yet). Not the largest: a run that asked for 8 while it warmed up and went back
    to 2 meets the surge with 2, and its next request for 8 is a scale-up."""
    return max(((r.t_s, r.total) for r in requests if r.t_s <= at), default=(0.0, 0))[1]


def up_requests(o: Any, cfg: Any) -> list[float]:
    """Epoch times of the requests for more executors than the previous request, from the
    surge's start to its end (one, for a policy that meets a step in one step)."""
    at, end = o.t0 + cfg.surge_at, o.t0 + cfg.surge_at + cfg.phase_s
    prev = in_force(o.requests, at)
    out = []
    for r in o.requests:
        if at < r.t_s <= end and r.total > prev:
            out.append(r.t_s)
        if r.t_s > at:
            prev = r.total
    return out


def reaction(o: Any, cfg: Any) -> dict[str, float | None]:
    """Seconds from the surge's start to the first request for more executors, the first
    executor that arrived after it and the first second of its tasks (``None``: never)."""
    at = o.t0 + cfg.surge_at
    before = in_force(o.requests, at)
    ups = [r.t_s for r in o.requests if r.t_s > at and r.total > before]
    added = sorted(e.added_s for e in o.executors if e.added_s > at)
    new = {e.executor for e in o.executors if e.added_s > at}
    working = [t for t, reading in o.samples if any(reading.get(x, 0.0) >= WORKING_MS for x in new)]
    return {
        "decision_s": ups[0] - at if ups else None,
        "arrival_s": added[0] - at if added else None,
        "tasks_s": min(working) - at if working else None,
    }


def host_cpu(o: Any, cfg: Any) -> dict[str, float | None]:
    """The host's mean busy CPU share in the base phase before the surge and in the
    surge's first 30 s (when executors are requested, start and warm up): on a loopback
    cluster they all share one machine, so a saturated host slows the running batch."""
    at = o.t0 + cfg.surge_at
    cpu = getattr(o, "cpu", [])

    def mean(a: float, b: float) -> float | None:
        xs = [c for t, c in cpu if a < t <= b]
        return float(np.mean(xs)) if xs else None

    return {
        "base": mean(o.t0 + cfg.window[0], at),
        "surge": mean(at, at + min(30.0, cfg.phase_s)),
    }


def timeline(o: Any, cfg: Any) -> list[dict[str, Any]]:
    """One row per committed batch: seconds since the generator started, rows, p99 latency
    (ms, over the batch's tuples), executors alive at its end, backlog left at the source."""
    from streamscale.runtime.spark.sources.sources import GeneratorSpec

    if not o.spans or not math.isfinite(o.t0):
        return []
    spec = GeneratorSpec.from_options(cfg.source_options())
    emit = _emit_fn(o, cfg)
    rows = []
    prev = None
    for s in sorted(o.spans, key=lambda x: x.end_s):
        lat = batch_latencies(s, emit)
        t = s.end_s - o.t0
        rows.append(
            {
                "t": t,
                "batch": s.batch_id,
                "rows": s.rows,
                "input_rate": s.rows / (t - prev) if prev is not None and t > prev else None,
                "p99_ms": float(np.percentile(lat, 99)) * 1000.0 if len(lat) else None,
                "executors": alive_at(o.executors, s.end_s),
                "backlog": max(0, spec.available(t) - s.end_seq),
            }
        )
        prev = t
    return rows


def summarize_surge(o: Any, cfg: Any) -> dict[str, Any]:
    """The figures of one policy's run (see the module docstring)."""
    if o.error is not None or not o.spans or not math.isfinite(o.t0):
        return {"policy": o.policy, "error": o.error or "no batches recorded"}
    emit = _emit_fn(o, cfg)
    w = (o.t0 + cfg.window[0], o.t0 + cfg.window[1])
    target = cfg.latency_target_ms / 1000.0
    tuples = score_tuples(o.spans, emit, target_s=target, window=w, end_s=o.end_s)
    n_batches, ok_batches = score_batches(o.spans, emit, target_s=target, window=w)
    billing = bill(o.executors, o.requests, window=w)
    scored: list[BatchSpan] = [s for s in o.spans if s.end_s >= w[0]]
    lat = [batch_latencies(s, emit) for s in scored]
    inside = [
        (x, emit(np.arange(s.start_seq, s.end_seq))) for x, s in zip(lat, scored, strict=True)
    ]
    window_lat = np.concatenate([x[(e >= w[0]) & (e <= w[1])] for x, e in inside] or [[]])
    alive = [alive_at(o.executors, s.end_s) for s in sorted(scored, key=lambda s: s.end_s)]
    ups, downs = scale_events(o.executors, [s.end_s for s in scored])
    # the whole run, warm-up included: from the query's start to its last batch
    ups_run, downs_run = scale_events(o.executors, [o.t0, *(s.end_s for s in o.spans)])
    react = reaction(o, cfg)
    in_window = sum(s.rows for s in scored if s.end_s <= w[1])
    return {
        "policy": o.policy,
        "slo_tuples": tuples.fraction,
        "slo_batches": ok_batches / n_batches if n_batches else math.nan,
        "scored_tuples": tuples.scored,
        "pending_tuples": tuples.pending,
        "core_seconds": billing.core_seconds,
        "mean_cores": billing.core_seconds / (w[1] - w[0]),
        "peak_executors": max(alive, default=0),
        "scale_ups": ups,
        "scale_downs": downs,
        "scale_ups_run": ups_run,
        "scale_downs_run": downs_run,
        "throughput": in_window / (w[1] - w[0]),
        "p99_ms": float(np.percentile(window_lat, 99)) * 1000.0 if len(window_lat) else None,
        "batches": n_batches,
        "window_s": w[1] - w[0],
        **{f"reaction_{k}": v for k, v in react.items()},
        **{f"host_cpu_{k}": v for k, v in host_cpu(o, cfg).items()},
        "surge_requests": len(up_requests(o, cfg)),
        "mid_batch_requests": len(getattr(o, "mid_batch", [])),
        **({"rescales": _rescales(o, emit)} if o.rescales else {}),
    }


def _rescales(o: Any, emit: Any) -> list[dict[str, Any]]:
    """Per restart: its times, the downtime and the latency spike (largest batch p99 in
    the 30 s after the stop, against the largest of the three batches before it)."""
    spans = sorted(o.spans, key=lambda s: s.end_s)
    out = []
    for r in o.rescales:
        before = [s for s in spans if s.end_s <= r["decided_at"]][-3:]
        after = [s for s in spans if r["stopped_at"] < s.end_s <= r["stopped_at"] + 30.0]

        def p99(ss: list[BatchSpan]) -> float | None:
            xs = [float(np.percentile(batch_latencies(s, emit), 99)) for s in ss if s.rows]
            return max(xs) * 1000.0 if xs else None

        keep = {k: v for k, v in r.items() if k != "window"}
        for k in ("decided_at", "stopped_at", "restarted_at"):
            keep[k] = r[k] - o.t0  # seconds of the generator's clock
        out.append({**keep, "p99_before_ms": p99(before), "p99_after_ms": p99(after)})
    return out
