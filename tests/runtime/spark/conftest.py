"""Fixtures of the Spark runtime tests: a local S3-compatible server and a loopback cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamscale.runtime.spark.cluster.cluster import (
    ClusterInfo,
    cluster_down,
    cluster_status,
    cluster_up,
    java_available,
    master_json,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the whole run, with bucket ``state``."""
    import pyarrow.fs as pafs

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{port}"
        fs = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}",
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir("state")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def _loopback_2x2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterInfo]:
    if not java_available():
        pytest.skip("Java is not available")
    d = tmp_path_factory.mktemp("cluster")
    info = cluster_up(2, 2, memory="2g", directory=d)
    try:
        yield info
    finally:
        cluster_down(d)
    assert not cluster_status(d)["running"]  # cluster down stopped every process


@pytest.fixture(scope="module")
def loopback_2x2(_loopback_2x2: ClusterInfo) -> ClusterInfo:
    """A standalone cluster of two workers × two cores (2 GB each) on 127.0.0.1, started
    once per test process for the modules that run one application on it at a time
    (each application gets its own executors and work directories); handed over once
    no earlier module's application holds a core."""
    deadline = time.monotonic() + 60
    while master_json(_loopback_2x2.webui_port)["activeapps"]:
        assert time.monotonic() < deadline, "an earlier application still holds the cluster"
        time.sleep(0.5)
    return _loopback_2x2
