"""Scoring a run as its users feel it: tuples that met the latency target, cores billed.

Pure functions over what a run recorded (no Spark, no clock), so every policy — a
streamscale run, a Spark-native query, a query restarted several times — is scored the
same way from the same kind of record:

* the **batches** a query committed, each as the range of source sequence numbers it
  took and the wall time it ended (Spark's own query progress:
  ``timestamp + durationMs.triggerExecution``, which covers the sink and the commit);
* the **emit time** of every sequence number (the generator's schedule), so that a
  tuple's end-to-end latency is ``batch end − emit time`` — time spent waiting at the
  source (a backlog, a batch admission cap, a restart) counts in full;
* the **executors** the run held (Spark's executor list: added and removed times,
  cores) and the **requests** that asked for them.

``slo_tuples`` is the fraction of the tuples emitted in the scored window whose latency
met the target: the headline, because a long batch that misses the target carries many
tuples. A tuple still waiting when the run ended counts as a miss once it is older than
the target, and is left out otherwise (its latency is unknown). ``slo_batches`` (the
fraction of batches whose p99 met the target) is reported beside it.

Billing: an executor costs its cores from the moment it was asked for — the request that
brought it, or its own added time when no request of the run's is known (an executor
Spark's dynamic allocation asked for itself) — until it was removed or the run ended.
Requests are matched to arriving executors first-in, first-out; a request withdrawn
before an executor came for it costs nothing.

Examples
--------
Two batches of a source emitting one tuple per second from t = 0 (seq ``i`` at
``i + 1`` s); the second batch ends late:

>>> import numpy as np
>>> spans = [BatchSpan(0, 5.0, 0, 4), BatchSpan(1, 20.0, 4, 8)]
>>> s = score_tuples(spans, lambda q: q + 1.0, target_s=10.0, window=(0.0, 8.0), end_s=20.0)
>>> (s.scored, s.met)  # seqs 0..3 wait 1-4 s; 4..7 wait 12-15 s
(8, 4)
>>> bill([ExecutorSpan("1", 2, 3.0, None)], [Request(1.0, 1)], window=(0.0, 10.0)).core_seconds
18.0
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BatchSpan",
    "Billing",
    "ExecutorSpan",
    "Request",
    "TupleScore",
    "batch_latencies",
    "bill",
    "score_batches",
    "score_tuples",
]

#: seq → emit time (s, the same clock as the batch ends), vectorized
EmitTime = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """A committed batch: source sequence numbers ``start_seq <= seq < end_seq``, ended at
    ``end_s``."""

    batch_id: int
    end_s: float
    start_seq: int
    end_seq: int

    @property
    def rows(self) -> int:
        return max(0, self.end_seq - self.start_seq)


@dataclass(frozen=True, slots=True)
class ExecutorSpan:
    """An executor the run held: ``cores`` from ``added_s`` to ``removed_s`` (``None``:
    still alive when the run ended)."""

    executor: str
    cores: int
    added_s: float
    removed_s: float | None


@dataclass(frozen=True, slots=True)
class Request:
    """At ``t_s`` the run asked for ``total`` executors in all (Spark's
    ``requestTotalExecutors``; a kill lowers the total as well)."""

    t_s: float
    total: int


@dataclass(frozen=True, slots=True)
class TupleScore:
    """Tuples emitted in the window: ``scored`` of them counted, ``met`` within the target;
    ``pending`` were still waiting (and older than the target) when the run ended."""

    scored: int
    met: int
    pending: int

    @property
    def fraction(self) -> float:
        return self.met / self.scored if self.scored else math.nan


@dataclass(frozen=True, slots=True)
class Billing:
    """Core-seconds within the window and, per executor, the time its billing started."""

    core_seconds: float
    starts: tuple[tuple[str, float], ...]


def _window_mask(emit: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    return (emit >= window[0]) & (emit <= window[1])


def batch_latencies(span: BatchSpan, emit_time: EmitTime) -> np.ndarray:
    """Latency (s) of every tuple of ``span``: its batch's end minus its emit time."""
    seqs = np.arange(span.start_seq, span.end_seq, dtype=np.int64)
    return span.end_s - np.asarray(emit_time(seqs), dtype=float)


def score_tuples(
    spans: Sequence[BatchSpan],
    emit_time: EmitTime,
    *,
    target_s: float,
    window: tuple[float, float],
    end_s: float,
) -> TupleScore:
    """Tuples emitted within ``window`` whose end-to-end latency met ``target_s``.

    Parameters
    ----------
    spans
        The run's committed batches (any order; a sequence number taken by two batches,
        e.g. a batch replayed after a restart, counts once, at its first commit).
    emit_time
        Emit time of sequence numbers, on the clock of ``BatchSpan.end_s``.
    target_s
        The latency target.
    window
        Emit times ``[a, b]`` of the tuples scored.
    end_s
        When the run ended: tuples of the window that no batch took count as misses if
        ``end_s − emit > target_s``, else they are not scored.
    """
    taken = 0
    scored = met = 0
    for s in sorted(spans, key=lambda x: x.end_s):
        lo = max(s.start_seq, taken)
        if s.end_seq <= lo:
            continue
        seqs = np.arange(lo, s.end_seq, dtype=np.int64)
        emit = np.asarray(emit_time(seqs), dtype=float)
        inside = _window_mask(emit, window)
        scored += int(inside.sum())
        met += int((inside & (s.end_s - emit <= target_s)).sum())
        taken = max(taken, s.end_seq)
    # what no batch took: emitted by the run's end, within the window
    pending = 0
    hi = taken
    while True:  # the emitted tail, in chunks (the schedule is monotone in seq)
        seqs = np.arange(hi, hi + 65536, dtype=np.int64)
        emit = np.asarray(emit_time(seqs), dtype=float)
        alive = emit <= min(end_s, window[1])
        if not alive.any():
            break
        late = alive & (emit >= window[0]) & (end_s - emit > target_s)
        pending += int(late.sum())
        if not alive.all():
            break
        hi += 65536
    return TupleScore(scored=scored + pending, met=met, pending=pending)


def score_batches(
    spans: Sequence[BatchSpan],
    emit_time: EmitTime,
    *,
    target_s: float,
    window: tuple[float, float],
) -> tuple[int, int]:
    """``(batches, met)``: batches holding a tuple emitted in ``window``, and those whose
    p99 latency (over all their tuples) met ``target_s``."""
    n = ok = 0
    for s in spans:
        if s.rows == 0:
            continue
        seqs = np.arange(s.start_seq, s.end_seq, dtype=np.int64)
        emit = np.asarray(emit_time(seqs), dtype=float)
        if not _window_mask(emit, window).any():
            continue
        n += 1
        ok += int(float(np.percentile(s.end_s - emit, 99)) <= target_s)
    return n, ok


def bill(
    executors: Iterable[ExecutorSpan],
    requests: Sequence[Request],
    *,
    window: tuple[float, float],
) -> Billing:
    """Core-seconds the executors cost within ``window``, each billed from its request.

    Requests raise or lower the total the run asked for; every raise opens as many
    pending requests, a lowering withdraws the newest pending ones beyond the executors
    alive. Each executor, in order of arrival, takes the oldest pending request opened
    at or before its arrival: its bill starts there (else at its own arrival).
    """
    exs = sorted(executors, key=lambda e: (e.added_s, e.executor))
    events: list[tuple[float, int, int]] = []  # (time, kind 0 request / 1 add / 2 remove, i)
    for i, r in enumerate(requests):
        events.append((r.t_s, 0, i))
    for i, e in enumerate(exs):
        events.append((e.added_s, 1, i))
        if e.removed_s is not None:
            events.append((e.removed_s, 2, i))
    events.sort(key=lambda x: (x[0], x[1]))
    pending: deque[float] = deque()
    alive = 0
    total = 0
    starts: dict[int, float] = {}
    for t, kind, i in events:
        if kind == 0:
            new_total = requests[i].total
            if new_total > total:
                pending.extend([t] * (new_total - total))
            else:
                while pending and alive + len(pending) > new_total:
                    pending.pop()
            total = new_total
        elif kind == 1:
            starts[i] = pending.popleft() if pending else t
            alive += 1
        else:
            alive -= 1
    a, b = window
    core_s = 0.0
    for i, e in enumerate(exs):
        lo = max(starts[i], a)
        hi = min(b if e.removed_s is None else e.removed_s, b)
        core_s += e.cores * max(0.0, hi - lo)
    return Billing(
        core_seconds=core_s, starts=tuple((exs[i].executor, starts[i]) for i in range(len(exs)))
    )
