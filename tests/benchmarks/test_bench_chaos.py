"""``benchmarks/bench_chaos.py`` at CI size: an executor SIGKILLed mid-batch, the driver
SIGKILLed and restarted on its checkpoint and a worker killed and restarted while a load
trace runs, then the state and the sink checked here against pandas over the generated
tuples (not against the script's own figures), and the per-kind recovery figures and
the backlog's recovery against the faults' own records and the driver's event log.

The script runs as a user runs it (a subprocess), its line recorded into a temporary
directory (``STREAMSCALE_RESULTS_DIR``); ``--keep`` leaves its checkpoint and sink.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from streamscale.runtime.spark.cluster.cluster import java_available
from streamscale.scenarios.chaos import IN_FLIGHT, KINDS
from tests.benchmarks.conftest import load

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_chaos.py"


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results"),
           "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def test_a_bad_trace_is_one_line_before_spark_starts(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--trace", "nope.csv", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("bench_chaos: nope.csv: no such trace file")
    assert proc.stdout == "" and not (tmp_path / "results").exists()


def test_the_quick_plan_spreads_its_faults_and_aims_four_of_each_kind_at_work_in_flight() -> None:
    from streamscale.scenarios.chaos import fault_plan

    bench = load("bench_chaos")
    cfg = bench._config(bench._args(["--quick"]))
    replay = cfg.minutes * 60.0
    plan = fault_plan(cfg, 40.0, replay - cfg.tail_s)  # the first commit ~40 s in
    assert len(plan) >= 20
    # a warm-release fault aimed at a release hits no work in flight; every other does
    aimed = Counter(p.kind for p in plan if p.phase != "releasing")
    assert all(aimed[k] >= bench.IN_FLIGHT_PER_KIND for k in KINDS), aimed
    # a warm-up fault needs an executor to arrive while it is armed: two spare
    assert aimed["executor-warm-release"] >= bench.IN_FLIGHT_PER_KIND + 2, aimed
    # one fault per slice, the slices covering the replay up to its last half minute
    assert plan[0].lo_s == 40.0 and plan[-1].hi_s == pytest.approx(replay - cfg.tail_s)
    assert all(a.hi_s == pytest.approx(b.lo_s) for a, b in itertools.pairwise(plan))
    assert all(p.lo_s <= p.at_s < p.hi_s for p in plan)


@pytest.mark.spark
@pytest.mark.slow
def test_executor_and_driver_kills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    if not java_available():
        pytest.skip("Java is not available")
    from streamscale.runtime.spark.sources.sources import GeneratorSpec, generate
    from streamscale.runtime.spark.state.state import LocalStateBackend
    from streamscale.scenarios.chaos import ChaosConfig

    keep = tmp_path / "keep"
    # seed 9 orders the kinds executor-mid-batch, worker, driver: the fault that recovers
    # slowest (a driver restart, up to a minute under load) comes last, and the 2-minute
    # trace still offers tuples when it comes (faults end once every tuple committed)
    proc = _run(tmp_path, "--smoke", "--minutes", "2", "--faults", "3", "--peak-rate", "60",
                "--kinds", "executor-mid-batch,driver,worker", "--seed", "9",
                "--max-executors", "2", "--keep", str(keep), timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["bench"] == "chaos"
    recorded = (tmp_path / "results" / "chaos.jsonl").read_text().splitlines()
    assert json.loads(recorded[-1])["fault_list"] == line["fault_list"]
    kinds = Counter(f["kind"] for f in line["fault_list"])
    assert sum(kinds.values()) >= 3, line["fault_list"]
    assert kinds["executor-mid-batch"] >= 1 and kinds["driver"] >= 1, line["fault_list"]
    # each fault was followed by a committed batch, which the driver logged
    events = [json.loads(x) for x in (keep / "run" / "events.jsonl").read_text().splitlines()]
    commits = [e["wall"] for e in events if e["ev"] == "commit"]
    starts = {e["incarnation"] for e in events if e["ev"] == "start"}
    assert len(starts) >= 1 + kinds["driver"]  # a new driver process per driver kill
    for f in line["fault_list"]:
        assert f["recovery_s"] is not None and f["recovery_s"] > 0
    assert max(commits) > min(commits)

    # what each fault hit, from its own record; the figures per kind count those in flight
    faults = line["fault_list"]
    by_kind = line["recovery_by_kind"]
    assert set(by_kind) == set(KINDS)
    assert sum(v["in_flight"] for v in by_kind.values()) + line["not_in_flight"] == line["faults"]
    for kind, v in by_kind.items():
        live = [f["recovery_s"] for f in faults if f["kind"] == kind and f["hit"] == IN_FLIGHT]
        assert v["in_flight"] == len(live)
        assert v["max_s"] == (max(live) if live else None)
        assert v["median_s"] == (round(statistics.median(live), 2) if live else None)
    for f in faults:
        if f["kind"] == "executor-mid-batch":  # killed while Spark showed its tasks running
            assert f["active_tasks"] > 0 and not f["releasing"] and f["hit"] == IN_FLIGHT
        if f["kind"] == "worker":  # one that ran executors of the job
            assert f["executors"] and f["hit"] == IN_FLIGHT, f
    # the driver restart's steps, from the new process's events, add up to its recovery
    (drv,) = [f for f in faults if f["kind"] == "driver"]
    assert set(drv["restart"]) == {"spawn_s", "imports_s", "session_s", "executors_s",
                                   "setup_s", "query_s", "first_batch_s"}  # fmt: skip
    assert sum(drv["restart"].values()) == pytest.approx(drv["recovery_s"], abs=0.06)
    # each fault in its own slice of the replay (or later, after the last one's recovery)
    assert len(line["plan"]) == 3
    assert all(f["replay_s"] >= p["lo_s"] for f, p in zip(faults, line["plan"], strict=False))
    # the backlog's recovery against the event log and the generator's schedule: at the
    # commit it names, offered minus committed is at most the largest backlog at the
    # commits of the 10 s before the fault, and at no commit between it is
    t0 = _t0_of(keep / "run" / "ckpt")
    spec = GeneratorSpec.from_options(ChaosConfig(minutes=2, peak_rate=60, seed=9).options())
    committed, backlog = 0, []  # (seconds of the replay, offered - committed) per commit
    for c in sorted((e for e in events if e["ev"] == "commit"), key=lambda e: e["wall"]):
        if c["seq_hi"] is not None:  # seqs commit in order; a batch run again adds none
            committed = max(committed, c["seq_hi"] + 1)
        backlog.append((c["wall"] - t0, spec.available(c["wall"] - t0) - committed))
    for f in faults:
        at = f["replay_s"]
        level = max([b for t, b in backlog if at - 10.0 <= t <= at]
                    or [b for t, b in backlog if t <= at][-1:])  # fmt: skip
        back = at + f["backlog_recovery_s"]
        assert next(b for t, b in backlog if t == pytest.approx(back, abs=0.02)) <= level
        assert all(b > level for t, b in backlog if at < t < back - 0.02)
    for f, g in itertools.pairwise(faults):  # the next fault came before it was back
        assert f["backlog_overlapped"] == (g["replay_s"] < f["replay_s"] + f["backlog_recovery_s"])
    assert not faults[-1]["backlog_overlapped"]
    live = [f for f in faults if f["hit"] == IN_FLIGHT]
    assert line["backlog_recovery_max_s"] == max(f["backlog_recovery_s"] for f in live)
    assert line["backlog_overlapped"] == sum(f["backlog_overlapped"] for f in live)
    # the driver's restart: its new process started after the kill
    assert drv["restart"]["spawn_s"] >= 0

    # the offered tuples, from the generator (deterministic): the same options the run had
    opts = ChaosConfig(minutes=2, peak_rate=60, seed=9).options()  # the bundled trace
    total = int(opts["total"])
    want = generate(opts, 0, total)
    assert total > 0
    # the sink: every offered tuple's seq exactly once, nothing else
    parts = sorted((keep / "run" / "sink").glob("batch_id=*/part-*.json"))
    sink = pd.concat([pd.read_json(p, lines=True, dtype={"key": str}) for p in parts])
    seqs = Counter(sink["seq"].tolist())
    assert set(seqs) == set(range(total))
    assert max(seqs.values()) == 1
    # each output's running count: pandas' at that tuple (a tuple applied twice shifts it)
    want["count"] = want.groupby("key").cumcount() + 1
    merged = sink.merge(want[["seq", "key", "count"]], on="seq", suffixes=("", "_pd"))
    assert (merged["key"] == merged["key_pd"]).all()
    assert (merged["count"] == merged["count_pd"]).all()
    # every key's committed state: pandas' count and sum over the offered tuples
    state: dict[str, list[float]] = {}
    for shard in LocalStateBackend(keep / "run" / "ckpt" / "state").load_all("calc").values():
        state.update(shard)
    agg = want.groupby("key")["value"].agg(["count", "sum"])
    assert set(state) == set(agg.index)
    for key, (count, total_value) in state.items():
        assert count == agg.at[key, "count"]
        assert math.isclose(total_value, agg.at[key, "sum"], rel_tol=1e-9, abs_tol=1e-6)
    assert line["lost"] == 0 and line["duplicated"] == 0 and line["state_exact"]


def _t0_of(ckpt: Path) -> float:
    """The generator's start, from the oldest offset Spark logged (each carries it)."""
    first = min((f for f in (ckpt / "spark" / "offsets").iterdir() if f.name.isdigit()),
                key=lambda f: int(f.name))  # fmt: skip
    return float(json.loads(first.read_text().splitlines()[-1])["t0"])
