"""Exactly-once shard state across a killed driver and a failing operator function."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.state.state import LocalStateBackend
from tests.runtime.spark._seq_source import SeqSource, expected_rows, flaky_counter

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).parents[1] / "_driver.py"


def _check_exact(state_root: Path, options: dict[str, str]) -> int:
    """Every key's committed count equals pandas over tuples 0..n-1; returns n."""
    states = LocalStateBackend(state_root).load_all("count")
    counts: dict[str, int] = {}
    last = -1
    for st in states.values():
        assert st["order_violations"] == 0
        counts.update(st["count"])
        last = max([last, *st["last_seq"].values()])
    n = last + 1
    want = expected_rows(options, n)["key"].dropna().value_counts().to_dict()
    assert counts == want
    return n


def _batches(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(x)["batch_id"] for x in path.read_text().splitlines() if x.strip()]


def test_sigkilled_driver_resumes_with_exact_state(spark, tmp_path: Path) -> None:
    from tests.runtime.spark._driver import OPTS, run

    ckpt, out1, out2 = tmp_path / "ck", tmp_path / "run1", tmp_path / "run2"
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(ckpt), str(out1), "1000"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while len(_batches(out1 / "metrics.jsonl")) < 2:
            assert proc.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "driver made no progress"
            time.sleep(0.1)
        time.sleep(0.4)  # most likely inside the next batch
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    first = _batches(out1 / "metrics.jsonl")
    run(spark, ckpt, out2, 2)  # the restarted driver (in this process, on the same checkpoint)
    second = _batches(out2 / "metrics.jsonl")
    assert len(second) >= 2
    # resumed, nothing skipped: a kill between the last metrics line and Spark's commit of
    # that batch has Spark run it again (its state, already committed, is not applied twice:
    # the exact check below), so the restart may begin with the last batch written
    assert second[0] in (first[-1], first[-1] + 1, first[-1] + 2)
    n = _check_exact(ckpt / "state", OPTS)
    # at least 150 rows per distinct batch: a batch the restart ran again counts once
    assert n >= 150 * len(set(first) | set(second))


def test_raising_operator_fails_the_batch_and_the_rerun_recovers(spark, tmp_path: Path) -> None:
    opts = {"keys": "25", "step": "120", "partitions": "2"}
    marker = tmp_path / "fail"
    marker.write_text("")
    job = Job.simple(
        "count",
        flaky_counter,
        source_options=opts,
        source_format=SeqSource.name(),
        source_class=SeqSource,
        instances=2,
        shards=4,
        trigger_s=0,
        params={"marker": str(marker), "at_seq": 300},
    )
    ckpt = tmp_path / "ck"
    with pytest.raises(StreamscaleError, match="RuntimeError: injected failure at seq 300"):
        run_job(spark, job, policy="static", duration_s=180, checkpoint=ckpt, max_batches=20)
    committed = LocalStateBackend(ckpt / "state").committed("count")
    assert committed >= 0
    assert _check_exact(ckpt / "state", opts) <= 300  # the failed batch left no trace
    marker.unlink()
    res = run_job(spark, job, policy="static", duration_s=180, checkpoint=ckpt, max_batches=1)
    assert res.records[0].batch_id == committed + 1  # the failed batch is retried
    assert _check_exact(ckpt / "state", opts) > 300
