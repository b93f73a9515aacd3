"""Enforced placement: each unit's Spark task runs on the executor the plan names.

Spark decides where a task runs from its RDD's *preferred locations*. A location
``executor_<host>_<id>`` names one executor; with ``spark.locality.wait.process``
long enough, the scheduler keeps the task for that executor instead of falling back
to any executor on the host (on a loopback cluster every executor shares one host,
so node-locality would mean "anywhere").

The reduce side of a keyed operator is a shuffled DataFrame. :func:`pin` takes its
physical RDD (``queryExecution.toRdd``), wraps it in a small JVM RDD that reports
one location per partition (``jvm/PinnedRDD.scala``, compiled once by the Scala
compiler the pyspark wheel ships — no JDK needed, only the Java runtime Spark
already requires) and turns it back into a DataFrame whose partitions are
exactly the unit partitions. Nothing else changes: same rows, same order, same
Arrow path into Python.

What ran where comes from Spark's own status store (:func:`stage_tasks`): per task
its executor, locality level and shuffle bytes read locally and remotely.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError

__all__ = [
    "PINNING_CLASS",
    "TaskRun",
    "executor_hosts",
    "jar_path",
    "job_group",
    "location",
    "pin",
    "pinning_conf",
    "placement_counts",
    "reduce_runs",
    "stage_tasks",
]

PINNING_CLASS = "streamscale.spark.Pinning"
_SOURCE = Path(__file__).with_name("jvm") / "PinnedRDD.scala"


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _cache_dir() -> Path:
    if os.environ.get("STREAMSCALE_CACHE_DIR"):
        return Path(os.environ["STREAMSCALE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamscale"


def jar_path(*, build: bool = True) -> Path:
    """The helper jar for the installed Spark, compiled on first use and cached.

    The cache key is the Spark version and the source's digest, so an upgrade or an
    edit rebuilds it. Compiling takes about ten seconds, once.
    """
    import pyspark

    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    jar = _cache_dir() / "jvm" / f"streamscale-pinning-{pyspark.__version__}-{digest}.jar"
    if jar.exists() or not build:
        return jar
    from streamscale.runtime.spark.executors.session import java_binary

    java = java_binary()
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        out = Path(tmp) / jar.name
        cmd = [
            java,
            "-cp",
            str(_spark_jars() / "*"),
            "scala.tools.nsc.Main",
            "-usejavacp",
            "-nowarn",
            "-d",
            str(out),
            str(_SOURCE),
        ]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StreamscaleError(
                f"cannot compile the placement helper: {exc}", item=str(_SOURCE)
            ) from None
        if res.returncode != 0 or not out.exists():
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise StreamscaleError(
                f"compiling the placement helper failed: {last[0]}", item=str(_SOURCE)
            )
        shutil.move(str(out), jar)  # atomic within one directory: concurrent builds agree
    return jar


def pinning_conf(*, process_wait_s: float | None = 30.0) -> dict[str, str]:
    """Session settings for enforced placement: the helper jar on driver and executors,
    and (unless ``process_wait_s`` is ``None``) a process-locality wait long enough that
    a busy executor's task waits for it rather than run elsewhere on the host.

    The jar must be on the driver's classpath when its JVM starts: later sessions in
    the same process share that JVM, so add the jar even to a session that pins nothing.
    """
    jar = str(jar_path())
    conf = {"spark.jars": jar, "spark.driver.extraClassPath": jar}
    if process_wait_s is not None:
        conf["spark.locality.wait.process"] = f"{process_wait_s:g}s"
        conf["spark.locality.wait.node"] = "0s"
    return conf


def location(host: str, executor: str) -> str:
    """Spark's preferred-location string for one executor (``ExecutorCacheTaskLocation``)."""
    return f"executor_{host}_{executor}"


def executor_hosts(sc: Any) -> dict[str, str]:
    """Executor id → host of the executors alive now (Spark's status store; driver excluded)."""
    store = sc._jsc.sc().statusStore()
    seq = store.executorList(True)
    out: dict[str, str] = {}
    for i in range(seq.size()):
        ex = seq.apply(i)
        eid = str(ex.id())
        if eid != "driver":
            out[eid] = str(ex.hostPort()).rsplit(":", 1)[0]
    return out


def _locations_array(sc: Any, locations: Sequence[str | None]) -> Any:
    arr = sc._gateway.new_array(sc._jvm.java.lang.String, len(locations))
    for i, loc in enumerate(locations):
        arr[i] = loc or ""
    return arr


def _helper(jvm: Any) -> Any:
    from py4j.java_gateway import JavaClass

    helper = getattr(jvm, PINNING_CLASS)
    if not isinstance(helper, JavaClass):  # py4j answers an unknown class with a package
        raise StreamscaleError(
            "the placement helper is not on the driver's classpath "
            "(start the session with pinning_conf())",
            item=PINNING_CLASS,
        )
    return helper


def pin(df: Any, locations: Sequence[str | None]) -> Any:
    """``df`` with partition ``i`` preferring ``locations[i]`` (``None``: anywhere).

    ``df`` must already have its final partitioning (one partition per unit); the
    result has the same schema, rows and partitions.
    """
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    sc = spark.sparkContext
    rdd = df._jdf.queryExecution().toRdd()
    pinned = _helper(sc._jvm).pin(rdd, _locations_array(sc, locations))
    jdf = spark._jsparkSession.internalCreateDataFrame(pinned, df._jdf.schema(), False)
    return DataFrame(jdf, spark)


def pin_units(
    df: Any, units: Sequence[str], placed: Mapping[str, tuple[str, str]] | None
) -> tuple[Any, tuple[str, ...]]:
    """``df`` (one partition per unit of ``units``) pinned where ``placed`` puts each
    unit (``unit -> (executor id, host)``), and the executor id planned per partition
    (``""``: unpinned; an empty tuple when nothing is placed)."""
    if placed is None:
        return df, ()
    planned = tuple(placed[u][0] if u in placed else "" for u in units)
    if any(planned):
        df = pin(df, [placed[u][1] if u in placed else None for u in units])
    return df, planned


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One successful task of a stage, as Spark's status store recorded it."""

    stage: int
    partition: int
    executor: str
    host: str
    locality: str
    local_shuffle_bytes: int
    remote_shuffle_bytes: int


def stage_tasks(sc: Any, stages: Iterable[int], *, wait_ms: int = 2000) -> list[TaskRun]:
    """The successful tasks of ``stages`` (latest attempt each), from Spark's status store.

    The store is fed by the listener bus; the bus is drained first (at most ``wait_ms``)
    so that the tasks of a job that just finished are there.
    """
    jsc = sc._jsc.sc()
    # a timeout leaves late tasks out; they are counted as unknown
    with contextlib.suppress(Exception):
        jsc.listenerBus().waitUntilEmpty(int(wait_ms))
    store = jsc.statusStore()
    out: list[TaskRun] = []
    for stage in stages:
        try:
            attempt = store.lastStageAttempt(int(stage)).attemptId()
            seq = store.taskList(int(stage), attempt, 1 << 30)
        except Exception:
            continue
        best: dict[int, TaskRun] = {}
        for i in range(seq.size()):
            t = seq.apply(i)
            if str(t.status()) != "SUCCESS":
                continue
            read = _shuffle_read(t)
            run = TaskRun(
                stage=int(stage),
                partition=int(t.index()),
                executor=str(t.executorId()),
                host=str(t.host()),
                locality=str(t.taskLocality()),
                local_shuffle_bytes=read[0],
                remote_shuffle_bytes=read[1],
            )
            best[run.partition] = run  # speculative duplicates: one success kept
        out.extend(best[p] for p in sorted(best))
    return out


def _shuffle_read(task: Any) -> tuple[int, int]:
    metrics = task.taskMetrics()
    if metrics.isEmpty():
        return 0, 0
    read = metrics.get().shuffleReadMetrics()
    return int(read.localBytesRead()), int(read.remoteBytesRead())


def job_stages(sc: Any, group: str) -> list[int]:
    """Stage ids of every job run under job group ``group``."""
    tracker = sc.statusTracker()
    stages: list[int] = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is not None:
            stages.extend(int(s) for s in info.stageIds)
    return sorted(set(stages))


def placement_counts(planned: Mapping[int, str | None], runs: Iterable[TaskRun]) -> dict[str, int]:
    """Hits, misses and unpinned tasks: partition → planned executor id against where it ran."""
    hit = miss = unpinned = 0
    for run in runs:
        want = planned.get(run.partition)
        if not want:
            unpinned += 1
        elif run.executor == want:
            hit += 1
        else:
            miss += 1
    return {"placement_hit": hit, "placement_miss": miss, "placement_unpinned": unpinned}


@contextlib.contextmanager
def job_group(sc: Any, group: str, placed: Any) -> Iterator[str | None]:
    """Run the block's Spark jobs under job group ``group`` when placement is measured
    (``placed`` is not ``None``), then restore the thread's own group (a streaming
    query cancels its batch through it)."""
    if placed is None:
        yield None
        return
    keys = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
    old = {k: sc.getLocalProperty(k) for k in keys}
    sc.setJobGroup(group, f"streamscale keyed stage {group}", interruptOnCancel=False)
    try:
        yield group
    finally:
        for k, v in old.items():
            sc.setLocalProperty(k, v)


def reduce_runs(sc: Any, group: str, partitions: int) -> list[TaskRun]:
    """Where the reduce tasks of the jobs in ``group`` ran: the newest stage with one task
    per unit partition whose tasks read shuffle data."""
    by_stage: dict[int, list[TaskRun]] = {}
    for r in stage_tasks(sc, job_stages(sc, group)):
        by_stage.setdefault(r.stage, []).append(r)
    for stage in sorted(by_stage, reverse=True):
        rs = by_stage[stage]
        if len(rs) == partitions and any(
            r.local_shuffle_bytes + r.remote_shuffle_bytes for r in rs
        ):
            return rs
    return []
