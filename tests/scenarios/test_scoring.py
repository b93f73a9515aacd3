"""Tuple-weighted SLO and request-time billing against hand-computed timelines."""

from __future__ import annotations

import numpy as np
import pytest

from streamscale.scenarios.scoring import (
    BatchSpan,
    ExecutorSpan,
    Request,
    bill,
    score_batches,
    score_tuples,
)
from streamscale.scenarios.surge_score import scale_events


def one_per_second(seqs: np.ndarray) -> np.ndarray:
    return seqs.astype(float) + 1.0  # seq i emitted at i + 1 s


def test_long_batch_carries_most_tuples() -> None:
    # 10 tuples emitted at 1..10 s. Batch A takes seq 0-1 and ends at 3 s (latencies 2, 1);
    # batch B takes seq 2-9 and ends at 20 s (latencies 17..10). Target 10 s: of the ten
    # tuples, A's two and B's last (seq 9, emitted at 10 s, latency exactly 10) meet it.
    spans = [BatchSpan(0, 3.0, 0, 2), BatchSpan(1, 20.0, 2, 10)]
    s = score_tuples(spans, one_per_second, target_s=10.0, window=(0.0, 10.0), end_s=20.0)
    assert (s.scored, s.met, s.pending) == (10, 3, 0)
    assert s.fraction == pytest.approx(0.3)
    # per batch: A's p99 2 s meets the target, B's (17 s) does not: 1 of 2 batches
    assert score_batches(spans, one_per_second, target_s=10.0, window=(0.0, 10.0)) == (2, 1)


def test_window_selects_by_emit_time_and_pending_tail_counts() -> None:
    # seq 0..4 emitted 1..5 s taken by a batch ending at 6 s; the run ends at 30 s with
    # seq 5.. (emitted 6 s, 7 s, ...) never taken. Window [3, 25]: scored are seq 2..4
    # (met: latencies 3, 2, 1) and the untaken tuples emitted 6..25 s: older than the
    # 10 s target at 30 s are those emitted before 20 s, i.e. 6..19 s (14 tuples); the
    # ones emitted 20..25 s are too young to know, so they are not scored.
    spans = [BatchSpan(0, 6.0, 0, 5)]
    s = score_tuples(spans, one_per_second, target_s=10.0, window=(3.0, 25.0), end_s=30.0)
    assert (s.scored, s.met, s.pending) == (3 + 14, 3, 14)


def test_replayed_range_counts_once_at_first_commit() -> None:
    # a restart replays seq 3..5 in a later batch: they count once, in the first batch
    spans = [BatchSpan(0, 7.0, 0, 6), BatchSpan(1, 40.0, 3, 8)]
    s = score_tuples(spans, one_per_second, target_s=10.0, window=(0.0, 8.0), end_s=40.0)
    # seq 0..5 (latency 6..1) met; seq 6, 7 emitted 7, 8 s, committed at 40 s: missed
    assert (s.scored, s.met) == (8, 6)


def test_billing_from_request_not_arrival() -> None:
    # executor 1 alive from before the window; a request at 10 s raises the total to 2,
    # executor 2 arrives at 16 s (6 s of start-up billed) and is removed at 30 s.
    exs = [ExecutorSpan("1", 2, -5.0, None), ExecutorSpan("2", 2, 16.0, 30.0)]
    reqs = [Request(-6.0, 1), Request(10.0, 2), Request(30.0, 1)]
    b = bill(exs, reqs, window=(0.0, 40.0))
    assert dict(b.starts) == {"1": -6.0, "2": 10.0}
    assert b.core_seconds == pytest.approx(2 * 40 + 2 * 20)


def test_withdrawn_request_costs_nothing_and_fifo_matching() -> None:
    # at 5 s ask for 3 (two pending), at 6 s back to 2 (one withdrawn); one executor
    # arrives at 12 s: billed from 5 s. A later request at 20 s for 3 brings an executor
    # at 21 s, billed from 20 s. Without any request, an executor is billed from arrival.
    exs = [
        ExecutorSpan("1", 1, 0.0, None),
        ExecutorSpan("2", 1, 12.0, None),
        ExecutorSpan("3", 1, 21.0, None),
    ]
    reqs = [Request(0.0, 1), Request(5.0, 3), Request(6.0, 2), Request(20.0, 3)]
    b = bill(exs, reqs, window=(0.0, 30.0))
    assert dict(b.starts) == {"1": 0.0, "2": 5.0, "3": 20.0}
    assert b.core_seconds == pytest.approx(30 + 25 + 10)
    alone = bill([ExecutorSpan("9", 4, 3.0, 8.0)], [], window=(0.0, 30.0))
    assert alone.core_seconds == pytest.approx(20.0)


def test_scale_events_over_the_scored_batches_and_the_whole_run() -> None:
    # 1 executor from t=0; 7 more arrive at 3 s (a warm-up backlog); one leaves at 50 s
    exs = [ExecutorSpan("1", 2, 0.0, None)]
    exs += [ExecutorSpan(str(i), 2, 3.0, None) for i in range(2, 8)]
    exs += [ExecutorSpan("8", 2, 3.0, 50.0)]
    # batch ends 2, 5, 10 (warm-up), then 20, 40, 60 (scored)
    assert scale_events(exs, [20.0, 40.0, 60.0]) == (0, 1)
    assert scale_events(exs, [0.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0]) == (1, 1)
    assert scale_events(exs, [60.0, 0.0, 5.0]) == (1, 1)  # sorted first
