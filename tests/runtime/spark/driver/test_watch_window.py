"""The admission window of the watch (no Spark): hand-checked cases and the bounds it
promises — a capped batch is at least 3/4 work unless the cap binds, and its run (work
plus overhead) stays within the catch-up time unless one trigger interval of work
already exceeds it."""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.driver.watch import (
    Live,
    SourceWatch,
    admission_limit,
    admission_window_s,
)


def test_hand_checked_windows() -> None:
    # 2 s trigger, no overhead measured: one trigger interval of work
    assert admission_window_s(2.0, 1.0) == 2.0
    # overhead 1.5 s: three overheads (4.5 s) of work; a 5 s catch-up caps the run at 5 s
    assert admission_window_s(2.0, 1.0, 1.5) == 4.5
    assert admission_window_s(2.0, 1.0, 1.5, cap_s=5.0) == 3.5
    # a loaded host (overhead 4 s): 12 s of work uncapped, one trigger interval capped
    assert admission_window_s(2.0, 1.0, 4.0) == 12.0
    assert admission_window_s(2.0, 1.0, 4.0, cap_s=5.0) == 2.0
    # the factor scales the window, capped or not
    assert admission_window_s(2.0, 0.5, 1.5, cap_s=5.0) == 1.75
    # 4 cores at 50 t/s each for 3.5 s
    assert admission_limit(4, 50.0, 2.0, 1.0, 1.5, cap_s=5.0) == 700
    assert admission_limit(4, None, 2.0, 1.0, 1.5, cap_s=5.0) is None
    assert admission_limit(4, 50.0, 2.0, 0.0, 1.5, cap_s=5.0) is None


@given(
    trigger=st.floats(0.1, 10.0),
    overhead=st.floats(0.0, 20.0),
    cap=st.floats(0.1, 60.0),
)
def test_bounds(trigger: float, overhead: float, cap: float) -> None:
    w = admission_window_s(trigger, 1.0, overhead, cap_s=cap)
    uncapped = admission_window_s(trigger, 1.0, overhead)
    assert trigger - 1e-9 <= w <= uncapped + 1e-9
    # the run stays within the cap, unless one trigger interval of work is already over it
    assert w + overhead <= max(cap, trigger + overhead) + 1e-9
    # when the cap does not bind, at least 3/4 of a batch is work
    if math.isclose(w, uncapped) and w + overhead > 0:
        assert w / (w + overhead) >= 0.75 - 1e-9


class _Ready:
    """The one figure the admission limit reads from the executors: ready cores."""

    def __init__(self, cores: int) -> None:
        self.cores = cores

    def ready_cores(self) -> int:
        return self.cores


def test_a_batch_admits_at_least_one_trigger_of_the_offered_load(tmp_path: Path) -> None:
    from streamscale.control.watch import WatchConfig
    from streamscale.runtime.spark.driver.watch import Live, SourceWatch

    watch = SourceWatch(
        offered=None, spark_checkpoint=tmp_path, resources=_Ready(2),
        live=Live(rates=deque([20.0])), config=WatchConfig(), trigger_s=2.0,
        latency_target_s=2.0, catch_up_s=5.0, admission_file=tmp_path / "admission",
    )  # fmt: skip
    # 2 cores x 20 t/s (a rate measured on tiny batches) x 2 s = 80; nothing offered known
    assert watch.update_admission() == 80
    assert (tmp_path / "admission").read_text() == "80"
    watch.rate = 100.0  # 100 t/s offered: one 2 s trigger of it is 200
    assert watch.update_admission() == 200
    watch.rate = 30.0  # below the cores' share: the cores' limit stands
    assert watch.update_admission() == 80


def test_two_threads_rewrite_the_admission_file(tmp_path: Path) -> None:
    # the watch thread and the batch thread both rewrite it; with one shared temporary
    # name one thread's rename found the other's file already moved (a CI failure)
    import threading

    from streamscale.runtime.spark.driver.watch import write_admission

    path = tmp_path / "admission"
    errors: list[BaseException] = []

    def hammer(value: int) -> None:
        try:
            for _ in range(400):
                write_admission(path, value)
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(v,)) for v in (7, 11, 13)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_text() in {"7", "11", "13"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["admission"]


def test_the_live_service_rate_is_the_median_of_the_last_five_batches() -> None:
    from streamscale.runtime.spark.driver.watch import Live

    live = Live()
    for rows, busy in ((72, 2.0), (70, 2.0), (42, 2.0)):  # 36, 35, then 21 t/s (one slow batch)
        live.observe(rows=rows, busy_s=busy, cycle_s=2.0, longest_s=1.0, planned_cores=4)
    assert live.service_rate == 35.0  # the middle of 21, 35, 36
    live.observe(rows=0, busy_s=0.0, cycle_s=2.0, longest_s=0.0, planned_cores=4)  # empty
    assert live.service_rate == 35.0
    for _ in range(2):
        live.observe(rows=40, busy_s=2.0, cycle_s=2.0, longest_s=1.0, planned_cores=4)
    assert live.service_rate == 21.0  # 20, 20, 21, 35, 36: a lasting change is followed
    for _ in range(3):
        live.observe(rows=100, busy_s=2.0, cycle_s=2.0, longest_s=1.0, planned_cores=4)
    assert live.service_rate == 50.0  # only the last five count


def _watch(latency_slo_s: float | None) -> SourceWatch:
    from streamscale.control.watch import WatchConfig

    live = Live()
    for _ in range(3):  # 40 tuples/s of busy time a core; 0.5 s of each cycle besides
        live.observe(rows=80, busy_s=2.0, cycle_s=2.5, longest_s=2.0, planned_cores=4)
    return SourceWatch(offered=None, spark_checkpoint=Path("."), resources=None, live=live,
                       config=WatchConfig(), trigger_s=2.0, latency_target_s=0.01,
                       catch_up_s=5.0, latency_slo_s=latency_slo_s)  # fmt: skip


def test_the_reactive_sizing_counts_a_core_over_the_cycle_the_latency_target_allows() -> None:
    # no target: batches of one trigger (2 s) of work plus the 0.5 s overhead, 40 × 2/2.5
    assert _watch(None).sizing_rate() == 32.0
    # a 10 s target lets a cycle stretch to 5 s: 40 × (1 − 0.5/5)
    assert _watch(10.0).sizing_rate() == 36.0
    assert _watch(10.0).sizing_rate() == _watch(10.0).cycle_capacity()
    # a target below two triggers: the trigger's cycle, 40 × (1 − 0.5/2)
    assert _watch(3.0).sizing_rate() == 30.0
    # a 20 s target: a 10 s cycle, 0.95 of it work, but no core above max_utilization (0.9)
    assert _watch(20.0).sizing_rate() == 36.0
    # the bound is in the rate already: the reactive sizing does not divide by it again
    assert _watch(20.0).sizing_utilization() == 1.0
    assert _watch(None).sizing_utilization() == 0.9


def test_a_wait_for_the_trigger_is_not_counted_as_overhead() -> None:
    live = Live()
    # a 1.4 s batch (1 s of it its longest task) that waited for its 2 s trigger: the
    # cycle says 1 s besides the task, the batch 0.4 s
    live.observe(rows=40, busy_s=1.0, cycle_s=2.0, longest_s=1.0, planned_cores=2,
                 in_batch_s=0.4, trigger_s=2.0)  # fmt: skip
    assert live.overhead_s == 0.4
    # back to back (a 3 s cycle against the 2 s trigger): the whole cycle is the batch's
    live = Live()
    live.observe(rows=40, busy_s=1.0, cycle_s=3.0, longest_s=2.0, planned_cores=2,
                 in_batch_s=0.7, trigger_s=2.0)  # fmt: skip
    assert live.overhead_s == 1.0
    # without the batch's own figure, the cycle's
    live = Live()
    live.observe(rows=40, busy_s=1.0, cycle_s=2.0, longest_s=1.0, planned_cores=2)
    assert live.overhead_s == 1.0
