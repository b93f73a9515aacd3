"""Fixtures of the Spark runtime tests: a local S3-compatible server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


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
