"""One micro-batch of a linear job (:class:`~streamscale.runtime.spark.driver.job.Job`) on Spark.

A linear job, ``source → [stateless…] → keyed → [stateless…] → sinks``, runs on
the same DataFrame/Arrow keyed stage as every keyed operator of a DAG
(:func:`~streamscale.runtime.spark.keyed.keyed.run_keyed`, paper 000, §3 on
micro-batches): the stateless operators before the keyed one are ``mapInPandas``
stages over the micro-batch (:func:`~streamscale.runtime.spark.driver.graph.map_stateless`);
the keyed stage tags each tuple with its shard by the plan's routing table, lets
Spark's hash partitioning bring every unit exactly its shards, and runs the keyed
function per shard against that shard's state version, inside ``mapInPandas`` on
columnar batches. In the same reduce task the stateless operators after the
keyed one run over the unit's outputs, and the file sinks write them as
``<path>/batch_id=<b>/part-<p>.<json|parquet>`` (:class:`TaskSinks`; JSON Lines for
``jsonl``), the layout every job's sinks have (a DAG's are written by Spark's writer):
a file is named by batch and unit partition, and an earlier attempt's files of the
batch are removed first, so a retried task or a replayed batch overwrites instead of
duplicating. The driver commits the state version only after the whole batch
succeeded (see :mod:`streamscale.runtime.spark.state.state`).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from streamscale.runtime.spark.driver.graph import map_stateless
from streamscale.runtime.spark.keyed.keyed import (
    BatchStats,
    KeyedSpec,
    Stateless,
    TaskStats,
    count_dead_letters,
    run_keyed,
)
from streamscale.runtime.spark.keyed.keyed_map import prefixed
from streamscale.runtime.spark.state.state import BatchVersion

__all__ = [
    "BatchStats",
    "LinearStage",
    "TaskSinks",
    "TaskStats",
    "batch_dir",
    "count_dead_letters",
    "linear_stage",
    "percentile",
    "run_batch",
    "sink_file",
]


@dataclass(frozen=True, slots=True)
class TaskSinks:
    """File sinks written by each keyed reduce task: ``(format, directory)`` pairs.

    Called as ``sinks(outputs, batch_id, partition)`` in the task; ``format`` is
    ``jsonl`` or ``parquet``; the file is :func:`sink_file`. Each file is written under
    a temporary name and renamed into place, so a reader never sees half a file.
    """

    files: tuple[tuple[str, str], ...]

    def __call__(self, out: pd.DataFrame, batch_id: int, partition: int) -> None:
        for fmt, path in self.files:
            os.makedirs(path, exist_ok=True)
            if out.empty:
                continue
            name = sink_file(path, fmt, batch_id, partition)
            os.makedirs(os.path.dirname(name), exist_ok=True)
            tmp = f"{name}.{os.getpid()}.tmp"
            if fmt == "jsonl":
                out.to_json(tmp, orient="records", lines=True, date_format="iso")
            else:
                out.to_parquet(tmp, index=False)
            os.replace(tmp, name)


@dataclass(slots=True)
class LinearStage:
    """What a linear job's batches share for a run (built once by the runner).

    ``spec`` is the keyed operator with the stateless operators after it
    (:attr:`~streamscale.runtime.spark.keyed.keyed.KeyedSpec.after`) and the file sinks
    (:attr:`~streamscale.runtime.spark.keyed.keyed.KeyedSpec.task_sink`); ``before`` the
    named stateless operators before it; ``schemas`` their output schemas, derived on
    the first batch and kept.
    """

    spec: KeyedSpec
    before: tuple[tuple[str, Stateless], ...]
    dead_letter_dir: str
    #: every sink: its name and, for a file sink, its directory
    sinks: tuple[tuple[str, str | None], ...] = ()
    schemas: dict[str, Any] = field(default_factory=dict)

    @property
    def sink_dirs(self) -> tuple[str, ...]:
        """The file sinks' directories."""
        return tuple(d for _, d in self.sinks if d is not None)


def batch_dir(path: str, batch_id: int) -> str:
    """Where a sink writes a batch: ``<path>/batch_id=<b>``, as Spark's writer partitions."""
    return os.path.join(path, f"batch_id={batch_id}")


def sink_file(path: str, fmt: str, batch_id: int, partition: int) -> str:
    """The file a reduce task writes for a sink: ``<path>/batch_id=<b>/part-<p>.<ext>``,
    where Spark's writer would put the batch's rows (``json`` for JSON Lines)."""
    ext = "json" if fmt == "jsonl" else fmt
    return os.path.join(batch_dir(path, batch_id), f"part-{partition:05d}.{ext}")


def _clear_sink_files(stage: LinearStage, batch_id: int) -> None:
    """Remove what an earlier attempt at this batch wrote (its partition count may differ)."""
    for d in stage.sink_dirs:
        for f in prefixed(batch_dir(d, batch_id), "part-"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f)


def run_batch(
    batch_df: Any,
    stage: LinearStage,
    version: BatchVersion,
    *,
    placed: Mapping[str, tuple[str, str]] | None = None,
) -> BatchStats:
    """Run one micro-batch of a linear job (its caller commits the keyed state:
    :meth:`~streamscale.runtime.spark.state.state.VersionIndex.commit`).

    Parameters
    ----------
    batch_df
        The source's micro-batch.
    stage
        The job's keyed stage, stateless operators and sinks.
    version
        The keyed operator's batch version
        (:meth:`~streamscale.runtime.spark.state.state_api.VersionIndex.version`).
    placed
        Unit → (executor id, Spark location): those units' tasks are pinned, and where
        every reduce task ran is read back (see
        :func:`~streamscale.runtime.spark.keyed.keyed.run_keyed`).

    Returns
    -------
    The batch's statistics; its wall duration covers the stateless operators before
    the keyed one (Spark runs them in the keyed stage's job).

    An exception in an operator function fails the Spark job, so nothing is
    committed and the batch is retried when the query restarts.
    """
    _clear_sink_files(stage, version.batch_id)
    df = batch_df
    for name, (fn, params) in stage.before:
        df = map_stateless(df, fn, params, stage.schemas, name)
    _, stats = run_keyed(
        df,
        stage.spec,
        version,
        dead_letter_dir=stage.dead_letter_dir,
        placed=placed,
    )
    return stats


def _sink_dir(sink: Any, base: Path) -> str | None:
    """A file sink's directory (relative paths under ``base``); ``None`` for the others."""
    if sink.format in ("jsonl", "parquet") and sink.path:
        return str((base / sink.path).resolve())
    return None


def linear_stage(job: Any, backend: Any, base: Path) -> LinearStage:
    """The keyed stage of ``job`` for a run: the keyed function with the stateless
    operators after it and the file sinks in its reduce tasks, the ones before it as
    ``mapInPandas`` stages (``job``: a :class:`~streamscale.runtime.spark.driver.job.Job`);
    relative sink paths and ``dead_letters/`` under ``base``."""
    op = job.operator

    def side(names: tuple[str, ...]) -> tuple[tuple[Any, Mapping[str, Any]], ...]:
        return tuple((job.functions[n], dict(job.topology.operator(n).params)) for n in names)

    files = tuple((s.format, d) for s in job.sinks if (d := _sink_dir(s, base)) is not None)
    spec = KeyedSpec(
        operator=job.keyed,
        key=str(op.key),
        instances=op.instances,
        shards=op.shards,
        fn=job.functions[job.keyed],
        fn_params=dict(op.params),
        required=tuple(getattr(job.functions[job.keyed], "required_fields", ())),
        backend=backend,
        after=side(job.after),
        task_sink=TaskSinks(files) if files else None,
        sample_rows=max((s.rows for s in job.sinks if s.format == "console"), default=0),
        emit=False,
    )
    return LinearStage(
        spec=spec,
        before=tuple(zip(job.before, side(job.before), strict=True)),
        dead_letter_dir=str((base / "dead_letters").resolve()),
        sinks=tuple((s.name, _sink_dir(s, base)) for s in job.sinks),
    )


def percentile(values: np.ndarray, q: float) -> float:
    """``q``-th percentile, NaN when empty."""
    return float(np.percentile(values, q)) if len(values) else math.nan
