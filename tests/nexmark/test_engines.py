"""Every query on both engines against the pandas reference, on a few thousand events."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from streamscale.nexmark.files import read_events, write_events
from streamscale.nexmark.generator import GeneratorConfig
from streamscale.nexmark.results import QUERIES, same_rows
from streamscale.nexmark.spark_sql import run_spark_sql
from streamscale.nexmark.streamscale_engine import run_streamscale
from tests.nexmark._reference import reference

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 200 events/s: 4,000 events span 20 s of event time (several windows and sessions)
    d = tmp_path_factory.mktemp("nexmark") / "events"
    write_events(GeneratorConfig.constant(200, seed=11), 4000, d, files=3)
    return d


@pytest.mark.parametrize("q", QUERIES)
def test_both_engines_equal_the_reference(spark, events: Path, tmp_path: Path, q: str) -> None:
    want = reference(q, read_events(events))
    if q in ("q0", "q3", "q5", "q6", "q7", "q8", "q11"):
        assert len(want) > 0  # the event set exercises the query
    info = run_spark_sql(spark, q, events, tmp_path / "sql")
    sql = pd.read_parquet(tmp_path / "sql" / "result.parquet")
    assert same_rows(sql, want) is None, same_rows(sql, want)
    assert info["rows_out"] == len(want)
    info = run_streamscale(spark, q, events, tmp_path / "ss")
    # one per file of each table; Q5 and Q7 (windows and joins on the 4 s watermark) one
    # more, without input, after the last file (the watermark's move closes and evicts)
    assert info["batches"] == 3 + (q in ("q5", "q7"))
    ss = pd.read_parquet(tmp_path / "ss" / "result.parquet")
    assert same_rows(ss, sql) is None, same_rows(ss, sql)


@pytest.mark.slow
@pytest.mark.parametrize("q", ["q5", "q8"])
def test_sigkilled_elastic_driver_resumes_to_the_same_result(spark, tmp_path: Path, q: str) -> None:
    ev = tmp_path / "events"
    write_events(GeneratorConfig.constant(200, seed=3), 3000, ev, files=6)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "streamscale.cli.app", "nexmark", "run", "--query", q,
           "--events", str(ev), "--policy", "elastic", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    commits = out / "checkpoint" / "spark" / "commits"
    try:
        deadline = time.monotonic() + 240
        while not (commits / "1").exists():
            assert proc.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "driver made no progress"
            time.sleep(0.05)
        time.sleep(0.3)  # most likely inside the next batch
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    done = len(list(commits.glob("[0-9]*")))
    assert 2 <= done < 6  # killed mid-run
    rest = run_streamscale(spark, q, ev, out, policy="elastic", fresh=False)
    # resumed to the end of the files (a restart may take two files in its first batch;
    # Q5 runs one batch without input after the last file, as its watermark moves)
    assert 1 <= rest["batches"] <= 6 - done + (q == "q5")
    got = pd.read_parquet(out / "result.parquet")
    want = reference(q, read_events(ev))
    assert same_rows(got, want) is None, same_rows(got, want)
