"""A Spark standalone cluster on loopback, started from the installed pyspark.

``streamscale cluster up`` starts one master and N workers (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) as background
processes bound to 127.0.0.1 on free ports, and records them in
``DIR/cluster.json`` (pids, ports, log files); ``status`` reads the master's JSON
endpoint (workers, cores, running applications); ``down`` stops workers, then the
master (SIGTERM, then SIGKILL after a grace period) and removes the record.

Workers may declare more cores than the machine has: with the per-tuple cost
``cost_kind: wall`` (waited, like I/O), N executor slots behave like N cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError

__all__ = [
    "ClusterInfo",
    "cluster_down",
    "cluster_status",
    "cluster_up",
    "default_dir",
    "java_available",
]

_RECORD = "cluster.json"


def default_dir() -> Path:
    """Where the loopback cluster keeps its record and logs (``$STREAMSCALE_HOME/cluster``)."""
    home = os.environ.get("STREAMSCALE_HOME") or str(Path.home() / ".streamscale")
    return Path(home) / "cluster"


def java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@dataclass(frozen=True)
class ClusterInfo:
    """A running loopback cluster as recorded in ``cluster.json``."""

    master_url: str
    master_port: int
    webui_port: int
    workers: int
    cores: int
    memory: str
    pids: dict[str, int] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    directory: str = ""

    @property
    def total_cores(self) -> int:
        return self.workers * self.cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as gone
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def _wait(pred: Callable[[], bool], timeout: float, what: str, logs: Path) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.25)
    raise StreamscaleError(f"timed out after {timeout:.0f} s waiting for {what} (logs: {logs})")


def _spark_home() -> Path:
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise StreamscaleError("the installed pyspark has no bin/spark-class", item=str(home))
    return home


def master_json(webui_port: int, *, timeout: float = 5.0) -> dict[str, Any]:
    """The master's ``/json/`` status: workers, cores, cores used, applications."""
    url = f"http://127.0.0.1:{webui_port}/json/"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data: dict[str, Any] = json.loads(resp.read().decode())
    return data


def read_record(directory: Path | None = None) -> ClusterInfo | None:
    path = (directory or default_dir()) / _RECORD
    if not path.exists():
        return None
    try:
        return ClusterInfo(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise StreamscaleError(f"unreadable cluster record ({exc})", item=str(path)) from None


def cluster_up(
    workers: int,
    cores: int,
    *,
    memory: str = "1g",
    directory: Path | None = None,
    timeout_s: float = 120.0,
) -> ClusterInfo:
    """Start a master and ``workers`` workers of ``cores`` cores each on 127.0.0.1.

    Raises :class:`StreamscaleError` (one line) when Java is missing, a cluster is
    already recorded in ``directory`` and alive, or the processes do not come up.
    """
    if workers < 1 or cores < 1:
        raise StreamscaleError("workers and cores must be >= 1", item="cluster up")
    if not java_available():
        raise StreamscaleError(
            "Java 17+ is required by Spark and was not found (install a JRE or set JAVA_HOME)",
            item="java",
        )
    d = (directory or default_dir()).resolve()
    existing = read_record(d)
    if existing is not None and any(_alive(p) for p in existing.pids.values()):
        raise StreamscaleError(
            f"a cluster is already running at {existing.master_url} (cluster down first)",
            item=str(d),
        )
    logs = d / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    home = _spark_home()
    port, webui = _free_port(), _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(d / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    pids: dict[str, int] = {}
    log_paths: dict[str, str] = {}

    def start(name: str, *args: str) -> None:
        log_paths[name] = str(logs / f"{name}.log")
        with open(log_paths[name], "wb") as out:
            proc = subprocess.Popen(
                [str(home / "bin" / "spark-class"), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        pids[name] = proc.pid

    url = f"spark://127.0.0.1:{port}"
    info = ClusterInfo(url, port, webui, workers, cores, memory, pids, log_paths, str(d))
    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(webui))  # fmt: skip
        _wait(lambda: _port_open(port) and _port_open(webui), timeout_s, "the master", logs)
        for i in range(workers):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url,
                  "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                  "--webui-port", "0")  # fmt: skip

        def registered() -> bool:
            try:
                alive = [w for w in master_json(webui)["workers"] if w.get("state") == "ALIVE"]
            except (OSError, ValueError):
                # ValueError: an HTML page, not JSON — the UI answers while it is still
                # attaching its handlers (seen once in CI, right after its port opened)
                return False
            return len(alive) >= workers

        _wait(registered, timeout_s, f"{workers} workers to register", logs)
    except BaseException:
        _stop(pids)
        raise
    (d / _RECORD).write_text(json.dumps(asdict(info), indent=2))
    return info


def cluster_status(directory: Path | None = None) -> dict[str, Any]:
    """The recorded cluster and what its master reports now (``running`` False if down)."""
    info = read_record(directory)
    if info is None:
        return {"running": False, "directory": str(directory or default_dir())}
    out: dict[str, Any] = {"running": False, **asdict(info)}
    out["alive"] = {name: _alive(pid) for name, pid in info.pids.items()}
    try:
        m = master_json(info.webui_port)
    except OSError:
        return out
    out.update(
        running=True,
        workers_alive=sum(1 for w in m.get("workers", []) if w.get("state") == "ALIVE"),
        cores_total=m.get("cores"),
        cores_used=m.get("coresused"),
        applications=[
            {"id": a.get("id"), "name": a.get("name"), "cores": a.get("cores")}
            for a in m.get("activeapps", [])
        ],
    )
    return out


def _stop(pids: dict[str, int], grace_s: float = 15.0) -> None:
    # workers first, so the master sees them leave; each runs in its own process group
    order = sorted(pids, key=lambda n: n == "master")
    for name in order:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pids[name], signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(_alive(p) for p in pids.values()):
        time.sleep(0.2)
    for pid in pids.values():
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def cluster_down(directory: Path | None = None) -> bool:
    """Stop the recorded cluster; ``False`` when none was recorded."""
    d = directory or default_dir()
    info = read_record(d)
    if info is None:
        return False
    _stop(info.pids)
    (d / _RECORD).unlink(missing_ok=True)
    return True
