"""Emulated start-up on a real loopback cluster: every executor is started before the
run, a request is usable only after the stated delay and billed from the request.

The witnesses are Spark's own scheduler (its executor ids: all four started, none
killed) and the clock; the job runs in a subprocess because this test session already
owns a local SparkContext.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.runtime.spark.cluster.cluster import ClusterInfo
from streamscale.scenarios.scoring import ExecutorSpan, Request, bill

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DELAY = 3.0

_SCRIPT = r"""
import json, sys, time
from streamscale.runtime.spark.executors.emulated import EmulatedStartupResources
from streamscale.runtime.spark.executors.resources import executor_conf
from streamscale.runtime.spark.executors.session import build_session

master, delay = sys.argv[1], float(sys.argv[2])
spark = build_session(master, app_name="streamscale-emulated-test",
                      conf=executor_conf(1, 4, pin=False, separate_hosts=False))
sc = spark.sparkContext
res = EmulatedStartupResources(sc, cores_per_executor=1, max_executors=4,
                               initial_executors=1, pin=False, delay_s=delay,
                               ready_when_warmed=True)
res.settle(60)
seen = {"real": sc._jsc.sc().getExecutorIds().size(), "start": res.alive()}
asked = time.time()
res.scale_to(3)
seen["just_after"] = len(res.alive())
time.sleep(delay / 2)
seen["half_way"] = len(res.alive())
while len(res.alive()) < 3 and time.time() < asked + 30:
    time.sleep(0.05)
seen["usable_after"] = time.time() - asked
seen["three"] = res.alive()
res.observe_arrivals()
seen["ready"] = res.ready_executors()
seen["learned_startup"] = res.startup_s(99.0)
time.sleep(1.0)
released = res.scale_to(2)
seen["released"] = released
seen["after_release"] = len(res.alive())
seen["real_after"] = sc._jsc.sc().getExecutorIds().size()
seen["spans"] = [[s.executor, s.cores, s.added_s, s.removed_s] for s in res.spans]
seen["requests"] = list(res.requests)
seen["end"] = time.time()
# the released executor granted again, then a fourth, new one: each start-up is the delay
for n in (3, 4):
    res.scale_to(n)
    while len(res.alive()) < n and time.time() < seen["end"] + 60:
        time.sleep(0.05)
    res.observe_arrivals()
    time.sleep(1.0)
seen["startups"] = list(res.startups)
print("RESULT " + json.dumps(seen))
spark.stop()
"""


def test_a_request_is_usable_after_the_delay_and_billed_from_the_request(
    loopback_2x2: ClusterInfo, tmp_path: Path
) -> None:
    script = tmp_path / "job.py"
    script.write_text(_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), loopback_2x2.master_url, str(DELAY)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT ") :])
    # all four executors really started; one usable at the start
    assert got["real"] == 4 and len(got["start"]) == 1
    # the request for three: still one usable right after it and half-way through the
    # delay, three once the delay has passed (and not much later)
    assert got["just_after"] == 1 and got["half_way"] == 1
    assert DELAY <= got["usable_after"] < DELAY + 2.0
    # the pool is warm: the arrivals are ready at once, and the start-up the run learns
    # is the delay (not a warm-up job queued on the host)
    assert sorted(got["ready"]) == sorted(got["three"])
    assert DELAY <= got["learned_startup"] < DELAY + 2.0
    # a released executor granted again arrives anew: no start-up is matched to the
    # wrong request (a re-grant once left its request's time for the next arrival)
    assert len(got["startups"]) == 4
    assert all(DELAY <= s < DELAY + 2.0 for s in got["startups"]), got["startups"]
    # a release is immediate for the run and kills no real executor
    assert len(got["released"]) == 1 and got["after_release"] == 2
    assert got["real_after"] == 4
    # billing from Spark-independent records: the request for 3 at t_r is billed from
    # t_r for both added executors, though they were usable only DELAY later
    spans = [ExecutorSpan(e, c, a, r) for e, c, a, r in got["spans"]]
    requests = [Request(t, n) for t, n in got["requests"]]
    t_r = next(t for t, n in got["requests"] if n == 3)
    first = spans[0]
    added = [s for s in spans[1:]]
    assert len(added) == 2 and all(s.added_s >= t_r + DELAY for s in added)
    end = got["end"]
    w = (first.added_s, end)
    want = (end - first.added_s) + sum((s.removed_s or end) - t_r for s in added)
    assert bill(spans, requests, window=w).core_seconds == pytest.approx(want, abs=0.05)
