"""The Spark application a job runs in: its session and the executors it may hold.

One :class:`Executors` value says how big a run's Spark executors are and how many it
may hold; :func:`session` builds the session with the settings those executors need,
and :meth:`~streamscale.runtime.spark.api.Stream.run` requests and releases them as the
plan asks, from the same value::

    import streamscale

    executors = streamscale.Executors(cores=1, max=8)
    spark = streamscale.session("spark://127.0.0.1:7077", executors=executors)
    ...
    job.run(checkpoint="/abs/ck", executors=executors)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamscale.errors import StreamscaleError
from streamscale.runtime.run_config import RUN_SETTINGS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamscale.runtime.spark.executors.resources import ExecutorResources

__all__ = ["Executors", "session"]


@dataclass(frozen=True, slots=True)
class Executors:
    """The Spark executors a run may hold: ``cores`` each, between ``min`` and ``max``.

    Given once, to :func:`session` (the session's executor settings) and to
    :meth:`~streamscale.runtime.spark.api.Stream.run` (the executors requested and
    released at batch boundaries as the plan's cores change). Needs a cluster master
    (``spark://…``): on ``local[N]`` every task runs in the driver's process.

    Parameters
    ----------
    cores
        Cores of one executor (``spark.executor.cores``).
    max
        The most executors the run may hold (``spark.cores.max`` is ``cores × max``).
    min
        The fewest it holds, also when the plan needs none.
    ready_s
        How long :meth:`resources` waits for the first ``min`` executors.

    Examples
    --------
    >>> import streamscale
    >>> streamscale.Executors(cores=2, max=4)
    Executors(cores=2, max=4, min=1, ready_s=120.0)
    >>> streamscale.Executors(cores=0)
    Traceback (most recent call last):
    ...
    streamscale.errors.StreamscaleError: Executors: cores must be a whole number >= 1, not 0
    """

    cores: int = 1
    max: int = 8
    min: int = 1
    ready_s: float = 120.0

    def __post_init__(self) -> None:
        for what in ("cores", "max", "min"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise StreamscaleError(
                    f"{what} must be a whole number >= 1, not {v!r}", item="Executors"
                )
        if self.min > self.max:
            raise StreamscaleError(
                f"min ({self.min}) must not exceed max ({self.max})", item="Executors"
            )

    def conf(self) -> dict[str, str]:
        """The Spark settings of a session whose executors these are (dynamic allocation
        off, ``spark.executor.cores``, ``spark.cores.max``, placement and Python workers:
        :func:`~streamscale.runtime.spark.executors.resources.executor_conf`)."""
        from streamscale.runtime.spark.executors.resources import executor_conf

        return executor_conf(self.cores, self.max)

    def resources(self, spark: SparkSession) -> ExecutorResources:
        """The executors of ``spark`` that follow the plan, once ``min`` of them are up.

        Raises
        ------
        StreamscaleError
            ``spark`` is not on a cluster master, or was not built with these executors'
            settings (:func:`session` with ``executors=``).
        """
        from streamscale.runtime.spark.executors.resources import ExecutorResources

        sc = spark.sparkContext
        _check_master(str(sc.master))
        have = spark.conf.get("spark.executor.cores", None)
        dynamic = spark.conf.get("spark.dynamicAllocation.enabled", "false")
        if have != str(self.cores) or str(dynamic).lower() == "true":
            raise StreamscaleError(
                f"the session's spark.executor.cores is {have} (dynamic allocation "
                f"{dynamic}), not {self.cores}: build it with "
                "streamscale.session(master, executors=...)",
                item="executors",
            )
        res = ExecutorResources(
            sc, cores_per_executor=self.cores, min_executors=self.min, max_executors=self.max
        )
        res.wait_for(self.min, self.ready_s)
        return res


def _check_master(master: str) -> None:
    from streamscale.runtime.spark.executors.resources import is_cluster_master

    if not is_cluster_master(master):
        raise StreamscaleError(
            f"executors need a cluster master (spark://…), not {master}", item="executors"
        )


def session(
    master: str = RUN_SETTINGS["master"].default,
    *,
    executors: Executors | None = None,
    app_name: str = "streamscale",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    ui: bool = False,
) -> SparkSession:
    """A SparkSession for streamscale jobs (the active one when it exists).

    Python workers run the driver's interpreter, logs are quiet and Spark's web UI is off
    unless ``ui`` (:func:`~streamscale.runtime.spark.executors.session.build_session`).
    Java 17+ is checked first, with a one-line error. The registered Python sources (the
    bundled generator and trace replay, ``streamscale_generator``; Nexmark,
    ``streamscale_nexmark``; any other module's) are registered with it, so
    ``spark.readStream.format(name)`` reads them.

    Parameters
    ----------
    master
        ``local[N]`` or a cluster URL (``spark://…``).
    executors
        The run's executors (cluster masters only): their settings go into the session;
        give the same value to :meth:`~streamscale.runtime.spark.api.Stream.run`.
    app_name, shuffle_partitions, log_level, ui
        Spark's application name, ``spark.sql.shuffle.partitions``, the root log level,
        Spark's web UI.
    conf
        More Spark settings, applied last.

    Examples
    --------
    >>> import streamscale
    >>> spark = streamscale.session("local[2]", shuffle_partitions=2)  # doctest: +SKIP
    >>> streamscale.session("local[2]", executors=streamscale.Executors())
    Traceback (most recent call last):
    ...
    streamscale.errors.StreamscaleError: executors: executors need a cluster master (spark://…), not local[2]
    """
    from streamscale.runtime.spark.executors.session import build_session
    from streamscale.runtime.spark.sources.sources import register_sources

    settings: dict[str, str] = {}
    if executors is not None:
        _check_master(master)
        settings.update(executors.conf())
    settings.update(conf or {})
    spark: SparkSession = build_session(
        master, app_name=app_name, shuffle_partitions=shuffle_partitions,
        conf=settings or None, log_level=log_level, ui=ui,
    )  # fmt: skip
    register_sources(spark)
    return spark
