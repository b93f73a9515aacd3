"""The same job runs on a Spark standalone cluster by master URL (a master and two workers).

The cluster is started from the installed pyspark on loopback; the job runs in
a subprocess because this test session already owns a local SparkContext and a
process may hold only one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_JOB = r"""
import json, sys
from pathlib import Path
from streamscale.runtime.spark.functions import calculator
from streamscale.runtime.spark.job import Job
from streamscale.runtime.spark.runner import run_job
from streamscale.runtime.spark.session import build_session
from streamscale.runtime.spark.state import LocalStateBackend

master, work = sys.argv[1], Path(sys.argv[2])
opts = json.loads(sys.argv[3])
spark = build_session(master, app_name="streamscale-cluster-test", shuffle_partitions=2)
sc = spark.sparkContext
job = Job.simple("calc", calculator, source_options=opts, instances=2, shards=4, trigger_s=0)
res = run_job(spark, job, policy="static", duration_s=240, checkpoint=work / "ckpt", max_batches=2)
state = {}
for shard_state in LocalStateBackend(work / "ckpt" / "state").load_all("calc").values():
    state.update(shard_state)
executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
print("RESULT " + json.dumps({
    "master": sc.master,
    "executors": executors,
    "rows": [r.rows for r in res.records],
    "state": {k: list(v) for k, v in state.items()},
}))
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(pred, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists() or (shutil.which("java") is None and "JAVA_HOME" not in os.environ):
        pytest.skip("spark-class or Java not available")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, *args: str) -> None:
        log = (logs / f"{name}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [str(spark_class), *args], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        )

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", "0")  # fmt: skip
        _wait_for(lambda: _port_open(port), 120, "the master")
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host",
                  "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", "0")  # fmt: skip
        master_log = logs / "master.log"
        _wait_for(
            lambda: master_log.read_text(errors="replace").count("Registering worker") >= 2,
            120,
            "two workers to register",
        )
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def test_job_runs_on_a_standalone_cluster_by_master_url(standalone: str, tmp_path: Path) -> None:
    from streamscale.runtime.spark.sources import generate

    opts = {
        "keys": "40",
        "alpha": "1.0",
        "cost_ms": "0.0",
        "start_time": "0",
        "total": "600",
        "max_rows_per_batch": "300",
        "seed": "5",
    }
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    proc = subprocess.run(
        [sys.executable, str(script), standalone, str(tmp_path), json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT ") :])
    assert got["master"] == standalone
    assert got["executors"] == 2
    assert got["rows"] == [300, 300]
    want = generate(opts, 0, 600).groupby("key")["value"].agg(["count", "sum"])
    assert set(got["state"]) == set(want.index)
    for key, (count, total) in got["state"].items():
        assert count == want.loc[key, "count"]
        assert total == pytest.approx(want.loc[key, "sum"])
