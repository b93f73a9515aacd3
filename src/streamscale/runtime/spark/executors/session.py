"""Building a SparkSession that works on a clean machine with PySpark 4."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import RUN_SETTINGS

__all__ = [
    "LOG4J2_CONFIG",
    "build_session",
    "check_java",
    "java_binary",
    "quiet_logging_conf",
    "require_classic",
]

#: streamscale's log4j2 configuration for Spark's JVMs (package data): Spark's defaults plus
#: filters for the lines an executor released on purpose leaves behind.
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
_LOG4J2_PROPERTY = "-Dlog4j2.configurationFile="


def require_classic(spark: object) -> None:
    """Refuse a Spark Connect session with one line: the keyed stages, executor requests
    and placement all need the driver's SparkContext."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        raise StreamscaleError(
            "Spark Connect is not supported (the keyed stages need the driver's "
            "SparkContext); use a classic SparkSession",
            item="session",
        )


def java_binary() -> str:
    """The ``java`` Spark will run (``JAVA_HOME`` first); a one-line error when missing."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise StreamscaleError(
            "Java 17+ is required by Spark and was not found; install it "
            "(e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME",
            item="java",
        )
    return java


def check_java() -> str:
    """Return ``java -version``'s first line; raise a one-line, actionable error when Java is missing."""
    java = java_binary()
    try:
        res = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StreamscaleError(f"cannot run {java}: {exc}", item="java") from None
    return (
        (res.stderr or res.stdout).strip().splitlines()[0] if (res.stderr or res.stdout) else java
    )


def quiet_logging_conf(
    conf: Mapping[str, str] | None, *, executors: bool, config: Path = LOG4J2_CONFIG
) -> dict[str, str]:
    """``conf`` with ``-Dlog4j2.configurationFile=<config>`` appended to the driver's (and,
    if ``executors``, the executors') ``extraJavaOptions``.

    A user's own options stay as they were, first; a user who names a log4j2
    configuration of their own keeps it (nothing is added to that option).

    Parameters
    ----------
    conf
        The session's settings as given (not modified).
    executors
        Also the executors' option: only where their JVMs can read ``config`` (local and
        loopback masters).
    config
        The log4j2 configuration file (default: the one shipped with streamscale).

    >>> quiet_logging_conf({"spark.driver.extraJavaOptions": "-Xss4m"}, executors=False,
    ...                    config=Path("/q.properties"))["spark.driver.extraJavaOptions"]
    '-Xss4m -Dlog4j2.configurationFile=/q.properties'
    """
    out = dict(conf or {})
    keys = ["spark.driver.extraJavaOptions"]
    if executors:
        keys.append("spark.executor.extraJavaOptions")
    option = f"{_LOG4J2_PROPERTY}{config}"
    if any(c.isspace() for c in option):
        option = f'"{option}"'  # Spark splits these options like a shell
    for key in keys:
        own = out.get(key, "").strip()
        if _LOG4J2_PROPERTY in own:
            continue
        out[key] = f"{own} {option}".strip()
    return out


def build_session(
    master: str = RUN_SETTINGS["master"].default,
    *,
    app_name: str = "streamscale",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    ui: bool = False,
):  # -> pyspark.sql.SparkSession (typed loosely so importing this module stays cheap)
    """A SparkSession for streamscale jobs.

    Python workers must run the same interpreter as the driver, or they time
    out at start-up; logs are quiet so a terminal stays readable, and Spark's web UI is
    off unless ``ui`` (``streamscale run`` turns it on; tests leave it off). ``master``
    may be ``local[N]`` or a cluster URL (``spark://…``).

    Spark's JVMs log through :data:`LOG4J2_CONFIG` (see :func:`quiet_logging_conf`): the
    driver always, executors when the master is local or on loopback (a remote
    executor's host may not have this file; its log goes to its worker, not to this
    console). The driver JVM reads it when it starts, i.e. at the first session of the
    Python process. ``log_level`` is the root level on top of it; Spark's console
    progress bar stays off (streamscale shows its own progress) unless ``conf`` turns
    ``spark.ui.showConsoleProgress`` on.
    """
    check_java()
    # Local and loopback masters bind the driver to loopback (no hostname warning, no
    # exposure); a remote cluster must reach the driver, so Spark picks the address there.
    loopback = master.startswith("local") or any(
        h in master for h in ("//127.0.0.1", "//localhost")
    )
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if loopback:
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    for k, v in quiet_logging_conf(conf, executors=loopback).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
