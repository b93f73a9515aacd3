"""The chaos run's bookkeeping: what a fault hit, the recovery per kind, the backlog's
recovery, the spread of the faults over the replay and the driver restart's steps, on
hand-checked cases (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.scenarios.chaos import (
    IDLE,
    IN_FLIGHT,
    KINDS,
    RELEASE_EVERY,
    RELEASING,
    ChaosConfig,
    _restart_steps,
    backlog_recovery_s,
    committed_series,
    fault_plan,
    fault_times,
    hit,
    recovery_by_kind,
)

MID, WARM, DRIVER, WORKER = KINDS


def test_what_a_fault_hit_comes_from_what_was_recorded_at_it() -> None:
    assert hit({"kind": DRIVER}) == IN_FLIGHT
    assert hit({"kind": WORKER, "executors": ["3"]}) == IN_FLIGHT
    assert hit({"kind": WORKER, "executors": []}) == IDLE
    assert hit({"kind": WORKER}) == IDLE
    assert hit({"kind": MID, "active_tasks": 2, "releasing": False}) == IN_FLIGHT
    assert hit({"kind": WARM, "phase": "warming", "active_tasks": 1}) == IN_FLIGHT
    assert hit({"kind": WARM, "phase": "warming", "active_tasks": 0}) == IDLE
    # released: whatever runs on it, Spark was already removing it
    assert hit({"kind": WARM, "phase": "releasing", "active_tasks": 1}) == RELEASING
    assert hit({"kind": MID, "active_tasks": 3, "releasing": True}) == RELEASING
    # a record written before the tasks were recorded: its phase says it was released
    assert hit({"kind": WARM, "phase": "releasing (already warm)"}) == RELEASING
    assert hit({"kind": WARM, "phase": "warming (already warm)"}) == IDLE


def test_recovery_per_kind_counts_only_the_faults_that_hit_work_in_flight() -> None:
    faults = [
        {"kind": MID, "active_tasks": 1, "recovery_s": 4.0},
        {"kind": MID, "active_tasks": 2, "recovery_s": 10.0},
        {"kind": MID, "active_tasks": 1, "recovery_s": 5.0},
        {"kind": WARM, "phase": "releasing", "recovery_s": 0.03},
        {"kind": WARM, "phase": "releasing", "recovery_s": 0.07},
        {"kind": WARM, "phase": "warming", "active_tasks": 1, "recovery_s": 1.8},
        {"kind": WARM, "phase": "warming", "active_tasks": 0, "recovery_s": 0.5},
        {"kind": DRIVER, "recovery_s": 38.8},
        {"kind": DRIVER, "recovery_s": 31.7},
        {"kind": DRIVER, "recovery_s": None},  # never recovered: counted, not timed
        {"kind": WORKER, "executors": [], "recovery_s": 1.1},
    ]
    got = recovery_by_kind(faults)
    assert got == {
        MID: {"in_flight": 3, "median_s": 5.0, "max_s": 10.0, "not_in_flight": 0},
        WARM: {"in_flight": 1, "median_s": 1.8, "max_s": 1.8, "not_in_flight": 3},
        DRIVER: {"in_flight": 3, "median_s": 35.25, "max_s": 38.8, "not_in_flight": 0},
        WORKER: {"in_flight": 0, "median_s": None, "max_s": None, "not_in_flight": 1},
    }
    assert sum(v["in_flight"] + v["not_in_flight"] for v in got.values()) == len(faults)


def test_committed_tuples_follow_the_highest_seq_committed_so_far() -> None:
    commits = [
        {"wall": 12.0, "seq_hi": 99},
        {"wall": 10.0, "seq_hi": None},  # an empty first batch (out of order in the file)
        {"wall": 14.0, "seq_hi": None},
        {"wall": 16.0, "seq_hi": 49},  # a batch run again after a restart
        {"wall": 18.0, "seq_hi": 149},
    ]
    assert committed_series(commits) == [(10.0, 0), (12.0, 100), (14.0, 100), (16.0, 100),
                                         (18.0, 150)]  # fmt: skip


def test_the_backlog_recovers_at_the_first_commit_back_at_its_level_before_the_fault() -> None:
    # 10 tuples/s offered from t = 0; commits every 2 s keep the backlog at 10 (one batch
    # being processed) until a fault at 21 s; the backlog then rises to 60 and drains
    def offered(w: float) -> int:
        return int(10 * w)

    done = {14.0: 130, 16.0: 150, 18.0: 170, 20.0: 190,  # backlog 10 each
            30.0: 240, 32.0: 300, 34.0: 320, 36.0: 345}  # fmt: skip
    series = sorted(done.items())
    # backlogs after the fault: 30 → 60, 32 → 20, 34 → 20, 36 → 15; level 10: never back
    assert backlog_recovery_s(21.0, series, offered, lookback_s=10.0) is None
    series.append((38.0, 372))  # backlog 8
    assert backlog_recovery_s(21.0, series, offered, lookback_s=10.0) == 17.0
    # the level is the largest backlog in the look-back: one commit at 17 (backlog 20)
    # before the fault raises it, and the commit at 32 s (backlog 20) is back to it
    series.append((17.0, 150))
    assert backlog_recovery_s(21.0, sorted(series), offered, lookback_s=10.0) == 11.0
    # with no commit in the look-back, the last one before the fault sets the level
    assert backlog_recovery_s(21.0, series[:2], offered, lookback_s=0.5) is None
    far = [(2.0, 0), (30.0, 300)]  # backlog 20, then 0
    assert backlog_recovery_s(21.0, far, offered, lookback_s=1.0) == 9.0
    # no commit before the fault: no level to come back to
    assert backlog_recovery_s(1.0, far, offered, lookback_s=10.0) is None


@pytest.mark.parametrize("n, start, end", [(24, 40.0, 1890.0), (3, 25.0, 108.0), (1, 0.0, 5.0)])
def test_every_slice_of_the_replay_gets_one_fault(n: int, start: float, end: float) -> None:
    got = fault_times(n, start, end, seed=7)
    assert len(got) == n
    width = (end - start) / n
    for i, (lo, hi, t) in enumerate(got):
        assert lo == pytest.approx(start + i * width) and hi == pytest.approx(lo + width)
        assert lo <= t < hi
    assert fault_times(n, start, end, seed=7) == got  # deterministic for a seed
    if n > 1:
        assert [t for *_, t in fault_times(n, start, end, seed=8)] != [t for *_, t in got]
    assert fault_times(0, start, end, seed=7) == []


def test_the_plan_cycles_through_the_kinds_and_aims_most_warm_release_faults_at_warm_ups() -> None:
    cfg = ChaosConfig(faults=24, seed=7)
    plan = fault_plan(cfg, 40.0, 1890.0)
    assert len(plan) == 24
    for i in range(0, 24, len(KINDS)):  # every round of four holds each kind once
        assert sorted(p.kind for p in plan[i : i + len(KINDS)]) == sorted(KINDS)
    assert [p.at_s for p in plan] == [round(t, 3) for *_, t in fault_times(24, 40.0, 1890.0, 7)]
    warm = [p.phase for p in plan if p.kind == WARM]
    assert warm == ["warming"] * (RELEASE_EVERY - 1) + ["releasing"] + ["warming"] * 2
    assert {p.phase for p in plan if p.kind != WARM} == {None}
    assert fault_plan(cfg, 40.0, 1890.0) == plan
    # the first round's order is the seed's (the smoke test's seed 9 puts the driver last
    # of mid-batch, worker and driver)
    three = ChaosConfig(faults=3, seed=9, kinds=(MID, DRIVER, WORKER))
    assert [p.kind for p in fault_plan(three, 25.0, 108.0)] == [MID, WORKER, DRIVER]


def test_where_a_driver_restart_went() -> None:
    events = [
        {"ev": "commit", "wall": 99.0, "incarnation": 1, "duration_s": 2.0},
        {"ev": "proc", "wall": 100.5, "incarnation": 2},
        {"ev": "main", "wall": 103.0, "incarnation": 2},
        {"ev": "session", "wall": 110.0, "incarnation": 2},
        {"ev": "start", "wall": 118.0, "incarnation": 2},
        {"ev": "query", "wall": 124.5, "incarnation": 2},
        {"ev": "commit", "wall": 135.0, "incarnation": 2, "duration_s": 9.0},
        {"ev": "commit", "wall": 137.0, "incarnation": 2, "duration_s": 2.0},
    ]
    got = _restart_steps(events, {"kind": DRIVER, "wall": 100.0, "incarnation": 2})
    assert got == {"spawn_s": 0.5, "imports_s": 2.5, "session_s": 7.0, "executors_s": 8.0,
                   "setup_s": 6.5, "query_s": 1.5, "first_batch_s": 9.0}  # fmt: skip
    assert sum(got.values()) == pytest.approx(135.0 - 100.0)  # the fault's recovery
    # a process killed before its session: the steps it reached
    short = _restart_steps(events[:3], {"kind": DRIVER, "wall": 100.0, "incarnation": 2})
    assert short == {"spawn_s": 0.5, "imports_s": 2.5}


def test_an_armed_fault_fires_only_at_the_moment_it_aims_at(tmp_path: Path) -> None:
    from streamscale.scenarios.chaos_driver import MID_BATCH, WARM_RELEASE, FaultAgent

    agent = FaultAgent(sc=None, work=tmp_path, incarnation=0, seed=1)
    (tmp_path / "arm.json").write_text('{"kind": "executor-warm-release", "phase": "warming"}')
    agent.armed, agent._arm_id = (WARM_RELEASE, "warming"), 5
    assert not agent.take(WARM_RELEASE, "releasing")
    assert not agent.take(MID_BATCH)
    assert agent.take(WARM_RELEASE, "warming")
    assert not agent.take(WARM_RELEASE, "warming")  # one fault per arming
    assert agent.spent == {5} and not (tmp_path / "arm.json").exists()
    assert agent.armed is None and not agent.is_armed(WARM_RELEASE, "warming")


class _Executor:
    def __init__(self, eid: str, tasks: int, active: bool = True) -> None:
        self._id, self._tasks, self._active = eid, tasks, active

    def id(self) -> str:
        return self._id

    def activeTasks(self) -> int:
        return self._tasks

    def isActive(self) -> bool:
        return self._active


class _StatusStore:
    """Spark's status store as the agent reads it: a list of executors (a Scala Seq)."""

    def __init__(self, executors: list[_Executor]) -> None:
        self.executors = executors

    def executorList(self, active_only: bool) -> _StatusStore:
        return self

    def size(self) -> int:
        return len(self.executors)

    def apply(self, i: int) -> _Executor:
        return self.executors[i]


class _Context:
    def __init__(self, store: _StatusStore) -> None:
        self._jsc = self
        self.store = store

    def sc(self) -> _Context:
        return self

    def statusStore(self) -> _StatusStore:
        return self.store


def test_a_warm_up_fault_waits_for_the_warm_up_tasks_on_the_cold_executor(tmp_path: Path) -> None:
    import time

    from streamscale.scenarios.chaos_driver import WARM_RELEASE, FaultAgent

    store = _StatusStore([_Executor("1", 2), _Executor("4", 0)])
    agent = FaultAgent(sc=_Context(store), work=tmp_path, incarnation=0, seed=1)
    killed: list[tuple[str, str]] = []
    agent.kill = lambda e, phase: killed.append((e, phase))  # type: ignore[method-assign]
    assert agent.status("1") == (2, False) and agent.status("9") == (0, False)
    agent.watch_warming("4")  # nothing armed: nothing watched
    assert not agent._watching
    agent.armed, agent._arm_id = (WARM_RELEASE, "releasing"), 1
    agent.watch_warming("4")  # armed for a release, not a warm-up
    assert not agent._watching
    agent.armed = (WARM_RELEASE, "warming")
    agent.watch_warming("4")
    agent.watch_warming("4")  # one watch per executor
    time.sleep(0.5)
    assert killed == [] and agent.is_armed(WARM_RELEASE, "warming")  # no task on it yet
    store.executors[1] = _Executor("4", 1)  # its warm-up job's task
    deadline = time.monotonic() + 5
    while not killed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert killed == [("4", "warming")] and agent.armed is None
    # Spark removing an executor: listed, no longer active
    store.executors[0] = _Executor("1", 1, active=False)
    assert agent.status("1") == (1, True)
