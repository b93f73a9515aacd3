"""Building a SparkSession that works on a clean machine with PySpark 4."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import RUN_SETTINGS

__all__ = ["build_session", "check_java", "java_binary", "require_classic"]


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
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
