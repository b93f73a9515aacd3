"""The watch on real Spark: the live admission limit never drops or repeats a tuple, the
running batch's offsets are read from Spark's own offset log, and on a loopback cluster a
surge gets executors requested *while a batch runs* with every key's state exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamscale.runtime.spark.cluster.cluster import ClusterInfo
from streamscale.runtime.spark.driver.watch import admitted_offset, write_admission

pytestmark = pytest.mark.spark


def test_the_live_admission_limit_never_drops_a_tuple(spark: Any, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources.sources import register_sources

    register_sources(spark)
    cap = tmp_path / "admission"
    limits = [150, 40, 300, 0, 75]  # 0: the file is emptied (no limit)
    write_admission(cap, limits[0])
    seen: list[tuple[int, int, int, int]] = []  # batch, rows, min seq, max seq

    def on_batch(df: Any, batch_id: int) -> None:
        rows = df.select("seq").toPandas()["seq"]
        if len(rows):
            seen.append((batch_id, len(rows), int(rows.min()), int(rows.max())))
        nxt = limits[min(len(seen), len(limits) - 1)]
        write_admission(cap, nxt or None)
        all_seqs.extend(int(s) for s in rows)

    all_seqs: list[int] = []
    opts = {"keys": "20", "total": "1000", "start_time": "0", "seed": "1",
            "admission_file": str(cap)}  # fmt: skip
    q = (
        spark.readStream.format("streamscale_generator").options(**opts).load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )  # fmt: skip
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(all_seqs) == list(range(1000))  # every tuple once, none lost
    for i, (_, rows, lo, hi) in enumerate(seen):
        limit = limits[min(i, len(limits) - 1)]
        assert hi - lo + 1 == rows  # a batch is one contiguous range
        if limit:
            assert rows <= limit
    assert seen[0][1] == 150 and seen[1][1] == 40 and seen[2][1] == 300
    assert admitted_offset(tmp_path / "ck") == {"seq": 1000, "t0": 0.0}
    assert admitted_offset(tmp_path / "nowhere") is None


_JOB = r"""
import json, sys, time
from pathlib import Path
from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.executors.session import build_session
from streamscale.runtime.spark.state.state import LocalStateBackend
from streamscale.scenarios.spark_log import ProgressLog

master, work, opts = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
spark = build_session(master, app_name="streamscale-watch-test",
                      conf=executor_conf(1, 4, pin=False, separate_hosts=False, quick_start=True))
sc = spark.sparkContext
res = ExecutorResources(sc, cores_per_executor=1, max_executors=4, initial_executors=1,
                        pin=False)
res.settle(120)
initial = res.alive()
log = ProgressLog().attach(spark)
params = {"latency_target_ms": 1000.0, "catch_up_s": 3.0, "startup_s": 3.0,
          "watch_period_s": 0.1, "rate_window_s": 0.5}
# a caller's DataFrame that declares the generator and turns a tuple into 2 rows (a job's
# own source, with its admission limit, runs under the watch in bench_autoscale's smoke test)
import streamscale
from pyspark.sql import functions as F
from streamscale.runtime.spark.sources.source_registry import register_all
register_all(spark, "streamscale_generator")
df = spark.readStream.format("streamscale_generator").options(**opts).load()
df = df.withColumn("copy", F.explode(F.array(F.lit(0), F.lit(1))))
s = streamscale.stream(df, trigger_s=1.0, source=("streamscale_generator", opts))
s = s.key_by("key", instances=2, shards=8).process(calculator, name="calc",
                                                   cost_kind="wall")
s.to("none", name="out")
out = s.run(checkpoint=work / "ckpt", duration_s=float(sys.argv[4]), spark=spark,
            policy="elastic", params=params, resources=res, out=work / "out")
records, fan = out.records, 2
spans = [(b.end_s, b.start_seq, b.end_seq) for b in log.seq_spans()]
state = {}
for shard_state in LocalStateBackend(work / "ckpt" / "state").load_all("calc").values():
    state.update(shard_state)
mid = [r.extra.get("mid_batch_requests") for r in records]
# where the warm-up jobs' last stages ran, read from Spark's own status store
store = sc._jsc.sc().statusStore()
jobs = store.jobsList(None)
warm_ran, warm_done = [], []
for i in range(jobs.size()):
    job = jobs.apply(i)
    if job.description().isDefined() and job.description().get() == "streamscale warm-up":
        if job.completionTime().isDefined():
            warm_done.append(job.completionTime().get().getTime() / 1000.0)
        ids = job.stageIds()
        stage = max(ids.apply(k) for k in range(ids.size()))
        tasks = store.taskList(stage, store.lastStageAttempt(stage).attemptId(), 1 << 20)
        warm_ran += [str(tasks.apply(k).executorId()) for k in range(tasks.size())]
print("RESULT " + json.dumps({"mid_batch": res.mid_batch, "spans": spans, "mid": mid,
                              "initial": initial, "warmed": sorted(res.warmed),
                              "arrived": [e for _, e in res.arrivals], "warm_ran": warm_ran,
                              "warm_done": warm_done, "requests": res.requests,
                              "startups": list(res.startups),
                              "rows": sum(r.rows for r in records) // fan,
                              "limits": [r.extra.get("admission_limit") for r in records],
                              "state": {k: list(v) for k, v in state.items()}}))
spark.stop()
"""


@pytest.fixture(scope="module")
def loopback(loopback_2x2: ClusterInfo) -> str:
    """The suite's loopback cluster: 4 one-core executors fit (two per worker)."""
    return loopback_2x2.master_url


@pytest.mark.slow
def test_a_surge_gets_executors_while_a_batch_runs_and_state_stays_exact(
    loopback: str, tmp_path: Path
) -> None:
    """A caller's DataFrame that declares the source it reads and makes two keyed rows of
    every tuple: the watch counts the source's tuples, the boundary plans in rows, and a
    caller's reader takes no admission limit."""
    from streamscale.runtime.spark.sources.sources import generate

    # The watch samples every 0.1 s: the boundary, which plans on the offered rate the
    # watch reads, races it to the same request, and under the suite's load it won twice
    # with the default 2 s rate window; over 0.5 s the watch sees the surge within about
    # 0.1 s of its start, where a boundary (every 1.5-2.5 s here) rarely falls.
    # 10 t/s for 45 s (the batches learn the per-core rate; under CI's own load the first
    # batches of a fresh executor take tens of seconds), then 400 t/s (20 ms each,
    # waited): one core serves 50 t/s; the query runs 90 s, and every tuple it committed
    # is in the state exactly once
    opts = {"keys": "40", "alpha": "1.0", "cost_ms": "20", "seed": "5",
            "schedule": "0:10,45:400", "total": "5000"}  # fmt: skip
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    proc = subprocess.run(
        [sys.executable, str(script), loopback, str(tmp_path), json.dumps(opts), "90"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT ") :])
    assert any(got["mid"]) and got["mid_batch"], (got["mid"], got["spans"])  # the watch asked
    # ... before the first batch that took surge tuples (seq >= 450) ended: the request did
    # not wait for that batch's boundary (batch end times are Spark's own)
    first_surge_end = min(end for end, _, hi in got["spans"] if hi > 450)
    assert got["mid_batch"][0][0] < first_surge_end, (got["mid_batch"], got["spans"])
    # every sample the watch took is in metrics.jsonl and replays to the same answer
    from streamscale.cli.replay import watch_inputs
    from streamscale.control.stimulus import replay_watch

    # the executors that arrived were warmed on themselves: each one the run counted as
    # warmed ran a warm-up task (Spark's status store; a task whose executor went away
    # runs elsewhere after the locality wait, and that executor is not counted)
    assert got["warmed"] and set(got["warmed"]) <= set(got["arrived"]) - set(got["initial"])
    assert set(got["warmed"]) <= set(got["warm_ran"]), got
    # an arrival's start-up time runs from a request to the end of its warm-up (Spark's
    # own job end time), not to its registration: nothing runs on it before
    assert got["startups"], got
    ends = [done - t for t, _ in got["requests"] for done in got["warm_done"]]
    for s in got["startups"]:
        assert any(s - 2.0 <= e <= s + 0.05 for e in ends), (s, got["requests"], got["warm_done"])
    replayed = replay_watch(watch_inputs(tmp_path / "out" / "metrics.jsonl"))
    asked = [r for r in replayed if r.run is not None]
    assert asked and all(r.match for r in replayed)
    assert all(limit is None for limit in got["limits"])
    rows = got["rows"]  # source tuples: the keyed rows over the fan-out
    # the batches streamscale committed (the last may end after Spark's last progress event)
    assert rows >= max(hi for _, _, hi in got["spans"]) > 450
    want = generate(opts, 0, rows).groupby("key")["value"].agg(["count", "sum"])
    fan = 2
    state = got["state"]
    assert set(state) == set(want.index)
    for key, (count, total) in state.items():
        assert count == fan * want.loc[key, "count"]
        assert total == pytest.approx(fan * want.loc[key, "sum"])


def test_warming_runs_one_task_per_core_through_the_keyed_path(spark: Any) -> None:
    from streamscale.runtime.spark.driver.watch import warm_keyed_path

    sc = spark.sparkContext
    sc.setJobGroup("streamscale-warm-test", "warm")
    try:
        assert warm_keyed_path(sc, 3)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup("streamscale-warm-test")]
    assert jobs and all(j is not None and j.status == "SUCCEEDED" for j in jobs)
    stages = [tracker.getStageInfo(s) for j in jobs for s in j.stageIds]
    done = [s.numCompletedTasks for s in stages if s is not None]
    # the shuffle's map side and the mapInPandas side, three tasks each
    assert done.count(3) >= 2, done
