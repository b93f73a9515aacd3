"""``streamscale run`` on a DAG honours ``--cluster``, ``--metrics-port`` and ``--spark-ui``.

One real run (a subprocess: this test session owns a local SparkContext) of a job with
two keyed operators, under ``elastic``, with a cluster file of one 32-core node. The
witnesses are outside the code under test: Prometheus ``/metrics`` and Spark's own REST
API are scraped over HTTP while the job runs, and the cores the plan gives the keyed
operators exceed what the default local cluster (``local[2]``: 4 slots) could hold, so
the plan was made for the cluster file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """
name: fan
operators:
  - name: gen
    kind: source
    rate: 200
    params: {keys: 64, alpha: 0.5, cost_ms: 25, seed: 5, trigger_s: 1, max_rows_per_batch: 40}
  - {name: calc, key: key, instances: 2, shards: 8, params: {cost_kind: wall},
     function: "streamscale.runtime.spark.keyed.functions:calculator"}
  - {name: cnt, key: key, instances: 1, shards: 4,
     function: "streamscale.runtime.spark.keyed.functions:counter"}
  - {name: out, kind: sink, params: {format: none}}
  - {name: out2, kind: sink, params: {format: none}}
edges:
  - {from: gen, to: calc, grouping: key}
  - {from: gen, to: cnt, grouping: key}
  - {from: calc, to: out}
  - {from: cnt, to: out2}
"""

CLUSTER = "nodes:\n  - {name: big, cores: 32, memory_gb: 64, bandwidth_mbps: 1000}\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return None


def test_dag_run_honours_cluster_metrics_port_and_spark_ui(tmp_path: Path) -> None:
    (tmp_path / "fan.yaml").write_text(JOB)
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    metrics, ui = _free_port(), _free_port()
    out = tmp_path / "out"
    args = ["--json", "run", str(tmp_path / "fan.yaml"), "--policy", "elastic",
            "--master", "local[2]", "--cluster", str(tmp_path / "cluster.yaml"),
            "--metrics-port", str(metrics), "--spark-ui", "--max-batches", "4",
            "--duration", "150", "--out", str(out)]  # fmt: skip
    code = f"from streamscale.cli.app import main; raise SystemExit(main({args!r}))"
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"--conf spark.ui.port={ui} pyspark-shell"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    scraped: str | None = None
    apps: str | None = None
    try:
        deadline = time.monotonic() + 200
        while proc.poll() is None and time.monotonic() < deadline:
            page = _get(f"http://127.0.0.1:{metrics}/metrics")
            if page and 'streamscale_batches_total{job="fan"}' in page:
                scraped = page
            apps = _get(f"http://127.0.0.1:{ui}/api/v1/applications") or apps
            if scraped and apps:
                break
            time.sleep(0.3)
        stdout, stderr = proc.communicate(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    # --metrics-port: Prometheus served the job's series while it ran
    assert scraped is not None
    assert 'streamscale_operator_cores{job="fan",operator="calc"}' in scraped
    # --spark-ui: Spark's own UI served its REST API, naming the application
    assert apps is not None and "streamscale-fan" in apps
    # --cluster: the plan held more cores than the default 4-slot local cluster has,
    # and no more than the file's node
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == json.loads(stdout)["batches"] >= 4
    most = max(sum(r["cores"].values()) for r in rows)
    assert 4 < most <= 32, [r["cores"] for r in rows]
