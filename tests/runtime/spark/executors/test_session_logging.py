"""Spark's console through streamscale's log4j2 configuration, on a real loopback cluster.

One application (a subprocess: this test session already owns a local SparkContext) on
the suite's loopback cluster (two workers) with two 1-core executors. It runs a shuffle
on both, releases one executor the way
:class:`~streamscale.runtime.spark.executors.resources.ExecutorResources` does between batches,
runs on, then — at build_session's default ERROR level — runs a task that
raises and SIGKILLs the remaining executor. The driver's stderr is the witness: the
release is logged (INFO) and leaves no ERROR/WARN line from the loggers the
configuration filters, while the failed task and the really lost executor still print.
The lines Spark printed for released executors in ``make demo`` runs are then logged
through the same loggers of the same JVM: denied, while other messages of those loggers
pass (so a filter that stopped matching, or matched too much, fails here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.runtime.spark.cluster.cluster import ClusterInfo
from streamscale.runtime.spark.executors.session import LOG4J2_CONFIG, quiet_logging_conf

_JOB = r"""
import json, os, signal, sys, time
from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.executors.session import build_session

def phase(name):
    time.sleep(0.5)  # the JVM's lines so far are out before the marker
    print(f"PHASE {name}", file=sys.stderr, flush=True)

conf = executor_conf(1, 2, pin=False, quick_start=True)  # sets executor extraJavaOptions
conf["spark.driver.extraJavaOptions"] = "-Dstreamscale.test.driver=kept"
conf["spark.executor.extraJavaOptions"] += " -Dstreamscale.test.executor=kept"
conf["spark.task.maxFailures"] = "2"
spark = build_session(sys.argv[1], app_name="streamscale-logging-test", conf=conf,
                      log_level="INFO")
sc = spark.sparkContext
app = sc.applicationId
res = ExecutorResources(sc, cores_per_executor=1, max_executors=2, initial_executors=2,
                        pin=False)
assert res.settle(120)

def executor_jvms():
    out = {}
    for d in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app in cmd:
            out[cmd[cmd.index("--executor-id") + 1]] = (int(d), cmd)
    return out

before = res.alive()
jvms = executor_jvms()
phase("release")
pairs = sc.parallelize(range(400), 4).map(lambda x: (x % 7, x)).reduceByKey(
    lambda a, b: a + b).collect()
released = res.scale_to(1)
settled = res.settle(60)
after = res.alive()
total = sc.parallelize(range(100), 2).sum()  # runs on after the release
time.sleep(2)
still = sorted(e for e in released if e in executor_jvms())

sc.setLogLevel("ERROR")  # build_session's default from here on
phase("failure")
def fail(x):
    raise ValueError("streamscale-test-failure")
try:
    sc.parallelize([1], 1).map(fail).collect()
    failed = ""
except Exception as exc:
    failed = type(exc).__name__
phase("kill")
victim = after[0]
os.kill(executor_jvms()[victim][0], signal.SIGKILL)
end = time.monotonic() + 60
while victim in res.alive() and time.monotonic() < end:
    time.sleep(0.25)
time.sleep(1)

sc.setLogLevel("INFO")  # a denied WARN line must be the filter's doing, not the level's
phase("replay")
log = spark._jvm.org.apache.logging.log4j.LogManager
closed = spark._jvm.java.io.IOException("io.netty.channel.StacklessClosedChannelException")
for name, level, msg in json.loads(sys.argv[2]):
    getattr(log.getLogger(name), level)(msg, closed)
phase("end")
print("RESULT " + json.dumps({
    "before": before, "released": released, "settled": settled, "after": after,
    "still_running": still, "pairs": sorted(pairs), "total": total, "failed": failed,
    "victim": victim,
    "driver": [spark._jvm.System.getProperty(k)
               for k in ("streamscale.test.driver", "log4j2.configurationFile")],
    "executors": {e: cmd for e, (_, cmd) in jvms.items()}}), flush=True)
spark.stop()
"""

# Lines a released executor left on the driver's console in `make demo` (Spark 4), and
# lines of the same loggers that must still print.
_DENIED = [
    ("org.apache.spark.scheduler.TaskSchedulerImpl", "error",
     "Lost an executor 7 (already removed): Executor killed by driver."),
    ("org.apache.spark.network.client.TransportClient", "error",
     "Failed to send RPC RPC 6212479716370815384 to /127.0.0.1:39084: "
     "io.netty.channel.StacklessClosedChannelException"),
    ("org.apache.spark.network.client.TransportResponseHandler", "error",
     "Still have 1 requests outstanding when connection from /127.0.0.1:39084 is closed"),
    ("org.apache.spark.rpc.netty.Dispatcher", "warn",
     "Message RemoteProcessDisconnected(127.0.0.1:39084) dropped. "
     "Could not find CoarseGrainedScheduler."),
]  # fmt: skip
_KEPT = [
    ("org.apache.spark.scheduler.TaskSchedulerImpl", "error",
     "Lost executor 3 on 127.0.0.1: Command exited with code 137"),
    ("org.apache.spark.network.client.TransportClient", "error",
     "Failed to fetch chunk 0 of stream 1 from /127.0.0.1:39084"),
    ("org.apache.spark.network.client.TransportResponseHandler", "error",
     "Connection from /127.0.0.1:39084 closed with a broken pipe"),
]  # fmt: skip

# the loggers whose lines the configuration filters (log4j2.properties)
_FILTERED = (
    "TaskSchedulerImpl", "TransportClient", "TransportResponseHandler", "Inbox", "Dispatcher",
    "NettyRpcEnv", "HeartbeatReceiver", "BlockManagerMasterEndpoint", "NativeCodeLoader",
)  # fmt: skip
_LINE = re.compile(
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?P<level>[A-Z]+) (?P<logger>\S+): (?P<msg>.*)$"
)


def _phases(stderr: str) -> dict[str, list[tuple[str, str, str]]]:
    """The driver's log lines (level, logger, message) between the script's markers; a
    line that is not a log line (a stack or traceback line) is added to the message of
    the log line before it."""
    out: dict[str, list[tuple[str, str, str]]] = {"start": []}
    cur = "start"
    for line in stderr.splitlines():
        if line.startswith("PHASE "):
            cur = line.split()[1]
            out[cur] = []
        elif m := _LINE.match(line):
            out[cur].append((m["level"], m["logger"], m["msg"]))
        elif out[cur]:
            level, logger, msg = out[cur][-1]
            out[cur][-1] = (level, logger, f"{msg}\n{line}")
    return out


@pytest.fixture(scope="module")
def run(loopback_2x2: ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    tmp = tmp_path_factory.mktemp("logging")
    (tmp / "job.py").write_text(_JOB)
    proc = subprocess.run(
        [sys.executable, str(tmp / "job.py"), loopback_2x2.master_url, json.dumps(_DENIED + _KEPT)],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :]), _phases(proc.stderr)


@pytest.mark.spark
@pytest.mark.slow
def test_a_released_executor_is_logged_at_info_and_leaves_no_error(run) -> None:
    got, phases = run
    # Spark's scheduler: two executors, one released, the other kept; its JVM exited
    assert len(got["before"]) == 2 and got["settled"]
    assert len(got["released"]) == 1 and got["after"] == [
        e for e in got["before"] if e not in got["released"]
    ]
    assert got["still_running"] == []
    # the job ran exactly, before and after the release
    want = {k: sum(x for x in range(400) if x % 7 == k) for k in range(7)}
    assert dict(map(tuple, got["pairs"])) == want and got["total"] == sum(range(100))
    lines = phases["start"] + phases["release"]
    (gone,) = got["released"]
    assert any(
        lg == "TaskSchedulerImpl" and re.match(rf"Executor {gone} on \S+ killed by driver", m)
        for _, lg, m in lines
    ), lines
    noisy = [ln for ln in lines if ln[0] in ("ERROR", "WARN") and ln[1] in _FILTERED]
    assert noisy == []


@pytest.mark.spark
@pytest.mark.slow
def test_a_failed_task_and_a_really_lost_executor_still_print(run) -> None:
    got, phases = run
    assert got["failed"]  # the job raised in the driver
    fail = phases["failure"]
    assert any(
        lv == "WARN"
        and lg == "TaskSetManager"
        and m.startswith("Lost task")
        and "ValueError: streamscale-test-failure" in m
        for lv, lg, m in fail
    ), fail
    assert any(
        lv == "ERROR" and lg == "TaskSetManager" and "failed 2 times; aborting job" in m
        for lv, lg, m in fail
    ), fail
    kill = phases["kill"]
    victim = got["victim"]
    assert any(
        lv == "ERROR" and lg == "TaskSchedulerImpl" and m.startswith(f"Lost executor {victim} ")
        for lv, lg, m in kill
    ), kill


@pytest.mark.spark
@pytest.mark.slow
def test_the_filters_deny_the_release_lines_and_pass_the_others(run) -> None:
    _, phases = run
    printed = {(lg, m.split("\n")[0]) for _, lg, m in phases["replay"]}
    for name, _, msg in _DENIED:
        assert (name.rsplit(".", 1)[1], msg) not in printed
    for name, _, msg in _KEPT:
        assert (name.rsplit(".", 1)[1], msg) in printed, phases["replay"]


@pytest.mark.spark
@pytest.mark.slow
def test_the_users_java_options_are_kept_and_the_configuration_added(run) -> None:
    got, _ = run
    option = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}"
    assert got["driver"] == ["kept", str(LOG4J2_CONFIG)]
    assert len(got["executors"]) == 2
    for cmd in got["executors"].values():
        # executor_conf's quick-start flags and the user's property, in order, then ours
        i = cmd.index("-XX:+UseSerialGC")
        assert cmd[i + 1 : i + 3] == ["-Dstreamscale.test.executor=kept", option], cmd


def test_quiet_logging_conf_appends_and_leaves_a_users_own_configuration() -> None:
    cfg = Path("/etc/quiet.properties")
    option = f"-Dlog4j2.configurationFile={cfg}"
    assert quiet_logging_conf(None, executors=False, config=cfg) == {
        "spark.driver.extraJavaOptions": option
    }
    user = {
        "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/mine.xml -Xss4m",
        "spark.executor.extraJavaOptions": " -XX:+UseG1GC ",
        "spark.app.name": "x",
    }
    got = quiet_logging_conf(user, executors=True, config=cfg)
    assert got == {
        "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/mine.xml -Xss4m",
        "spark.executor.extraJavaOptions": f"-XX:+UseG1GC {option}",
        "spark.app.name": "x",
    }
    assert user["spark.executor.extraJavaOptions"] == " -XX:+UseG1GC "  # not changed
    spaced = quiet_logging_conf({}, executors=False, config=Path("/a b/q.properties"))
    assert (
        spaced["spark.driver.extraJavaOptions"] == '"-Dlog4j2.configurationFile=/a b/q.properties"'
    )
