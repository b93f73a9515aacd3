"""Performance-model building (paper 004, §5): real tasks, Algorithm 1, trials on Spark.

:mod:`~streamscale.profiling.profiler` is backend-free;
:mod:`~streamscale.profiling.spark_trial` runs the trials on Spark (import it
only where pyspark is wanted).
"""

from __future__ import annotations

from streamscale.profiling.profiler import ProfileResult, TrialResult, latency_slope, profile
from streamscale.profiling.tasks import TASKS, make_task

__all__ = ["TASKS", "ProfileResult", "TrialResult", "latency_slope", "make_task", "profile"]
