"""PySpark's worker daemon with the imports every streamscale task needs done once.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``)
and forks a worker from it for each concurrent task. Stock workers import pandas,
pyarrow and streamscale after the fork, about 0.8 s of CPU each: an executor that
joins under a surge forks one per core while its first batch waits, on the same
cores the batch needs. Here the daemon imports them before it forks, so each
worker starts with them loaded (copy-on-write). Set by
:func:`~streamscale.runtime.spark.executors.resources.executor_conf` as
``spark.python.daemon.module``.

The modules imported start no threads at import (pyarrow's and numpy's pools
start on first use, after the fork); numpy's BLAS is limited to one thread in the
daemon so that no BLAS thread exists when it forks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy  # noqa: F401
import pandas  # noqa: F401
import pyarrow  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import streamscale.runtime.spark.keyed.keyed  # noqa: F401

if __name__ == "__main__":
    manager()
