"""The keyed stage of one elastic keyed operator on a DataFrame data path (paper 000, §3).

One call runs one batch of one keyed operator as a single Spark job of two
stages, with columnar batches on both sides of the shuffle:

* map side (Spark column expressions, :func:`~streamscale.runtime.spark.keyed.keyed_map.route`;
  no Python runs there): every tuple gets its global shard ``e·Z + s`` (Spark's
  ``xxhash64`` and ``hash`` of the key, :mod:`~streamscale.runtime.spark.routing.routing`),
  the partition of the unit serving that shard (the plan's routing table,
  :class:`~streamscale.runtime.spark.routing.routing.PartitionMap`) and a *native partition
  key*: an integer chosen so that Spark's own hash partitioning,
  ``pmod(murmur3(key), n)``, sends the row to exactly that partition
  (:func:`partition_keys`). A malformed tuple is marked with the reason and spread
  over the partitions with the others;
* ``repartition(n, key)``;
* reduce side (``mapInPandas``): the task checks it runs the partition its rows were
  routed to, writes the dead letters it received to its own file (one per batch,
  operator and partition, so a retried task or a replayed batch overwrites instead of
  duplicating), and sorts its other rows by (shard, arrival order) (a shuffle fetches
  map outputs in no fixed order; ``seq`` is the arrival order when present; a stable
  sort in the task costs less than Spark's row sort); per shard, the keyed function
  runs against the shard's state version ``upto`` and writes version ``batch_id``; it
  never commits (the caller commits every keyed operator once the whole batch
  succeeded). The stateless functions of :attr:`KeyedSpec.after` then run over the
  task's outputs, and :attr:`KeyedSpec.task_sink` (a linear pipeline's file sink)
  writes them from the task.

The task emits its outputs and one statistics row; the result is cached and the
statistics are collected in the same job, so the returned outputs are already
computed. A spec with ``emit=False`` (outputs consumed by its task sink alone)
emits only the statistics and caches nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat.initial_state import split_initial, with_initial_state
from streamscale.runtime.spark.executors.pinning import job_group, pin_units, reduce_runs
from streamscale.runtime.spark.keyed.keyed_map import (
    DEAD,
    INTERNAL,
    ORDER,
    PART,
    PK,
    SHARD,
    clear_dead_letters,
    count_dead_letters,
    route,
    split_dead_letters,
    write_dead_letters,
)
from streamscale.runtime.spark.routing.hashing import murmur3_long, partition_keys
from streamscale.runtime.spark.state.state import BatchVersion, StateBackend, input_error

__all__ = [
    "BatchStats",
    "KeyedSpec",
    "Stateless",
    "TaskStats",
    "count_dead_letters",
    "murmur3_long",
    "partition_keys",
    "release",
    "run_keyed",
]

_LATENCY_SAMPLE = 4000
_STATS, _OUT = "__ss_stats", "__ss_out"

#: A stateless operator: ``fn(df, **params) -> DataFrame | None`` and its params.
Stateless = tuple[Callable[..., Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class KeyedSpec:
    """A keyed operator, static for a run (built once)."""

    operator: str
    key: str
    instances: int
    shards: int
    fn: Callable[..., Any]
    fn_params: Mapping[str, Any]
    required: tuple[str, ...]
    backend: StateBackend
    output_schema: Any | None = None  # pyspark StructType, or None: derived per batch
    after: tuple[Stateless, ...] = ()  # run over each task's outputs, in the task
    task_sink: Callable[[pd.DataFrame, int, int], None] | None = None  # (out, batch, partition)
    sample_rows: int = 0  # outputs each task returns in TaskStats.sample (console sinks)
    emit: bool = True  # outputs come back as a DataFrame; False: only the task sink sees them


@dataclass(frozen=True, slots=True)
class TaskStats:
    """What one reduce task (one unit) did in a batch."""

    partition: int
    unit: str
    host: str
    busy_s: float
    rows: int
    out_rows: int
    shards: Mapping[int, tuple[int, float, int, int]]  # shard -> (rows, busy_s, bytes, out)
    latencies_ms: np.ndarray
    sample: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: float = 0.0
    executor: str = ""  # host:pid of the executor's Python worker daemon
    state_read_bytes: int = 0  # state read from the store (not the worker's cache): moved here
    out_schema: bytes = b""  # Arrow schema of the outputs when the operator declares none
    late_rows: int = 0  # rows at or behind the late-row watermark, dropped (as Spark's operator)


@dataclass(frozen=True, slots=True)
class BatchStats:
    """One batch: per-task statistics, wall duration and dead-letter count.

    ``planned`` (executor id per partition, ``""``: unpinned) and ``runs`` (where each
    reduce task ran and the shuffle bytes it read, from Spark's status store) are
    filled when the batch ran with placement.
    """

    batch_id: int
    duration_s: float
    tasks: tuple[TaskStats, ...]
    dead_letters: int
    partitions: int
    planned: tuple[str, ...] = ()
    runs: tuple[Any, ...] = ()

    def placement(self) -> dict[str, int]:
        """Placement hits, misses and unpinned tasks, and shuffle bytes read locally and
        remotely by the reduce tasks (Spark's task metrics); empty without placement."""
        if not self.planned:
            return {}
        from streamscale.runtime.spark.executors.pinning import placement_counts

        out = placement_counts(dict(enumerate(self.planned)), self.runs)
        out["placement_unknown"] = self.partitions - len(self.runs)
        out["local_shuffle_bytes"] = sum(r.local_shuffle_bytes for r in self.runs)
        out["remote_shuffle_bytes"] = sum(r.remote_shuffle_bytes for r in self.runs)
        return out

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tasks)

    @property
    def late_rows(self) -> int:
        return sum(t.late_rows for t in self.tasks)


# --- reduce side ----------------------------------------------------------------------------


def _epoch_s(col: pd.Series, tz: str | None) -> np.ndarray:
    """Seconds since the epoch; Spark hands timestamps to pandas as naive session-local time."""
    ts = col if isinstance(col.dtype, pd.DatetimeTZDtype) else pd.to_datetime(col, errors="coerce")
    if ts.dt.tz is None:
        ts = ts.dt.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT")
    if ts.dt.unit != "ns":
        ts = ts.dt.as_unit("ns")
    ns = ts.to_numpy(dtype="datetime64[ns]").astype("int64").astype(float)
    ns[ts.isna().to_numpy()] = np.nan
    return ns / 1e9


def _arrow_blob(out: pd.DataFrame) -> bytes:
    import pyarrow as pa

    table = pa.Table.from_pandas(out, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _schema_bytes(blob: bytes | None) -> bytes:
    import pyarrow as pa

    return b"" if blob is None else pa.ipc.open_stream(blob).schema.serialize().to_pybytes()


def apply_stateless(df: pd.DataFrame, ops: tuple[Stateless, ...]) -> pd.DataFrame:
    """``df`` through each stateless function in turn (``None`` from one: no rows)."""
    for fn, params in ops:
        res = fn(df, **params)
        df = res if res is not None else df.iloc[0:0]
    return df


@dataclass(frozen=True, slots=True)
class _Batch:
    """What one batch's reduce tasks are given besides the spec."""

    version: BatchVersion
    out_cols: tuple[str, ...] | None
    batch_time_ms: int
    tz: str | None
    dead_dir: str
    parsed: Mapping[str, str]  # required text field -> its parsed column
    watermark_ms: int | None = None  # the query's watermark (evicts: timers, TTL)
    late: tuple[str, int] | None = None  # (event-time column, ms): rows at or before are late
    in_cols: tuple[str, ...] = ()  # the operator's input columns (a task without rows)


def _run_shards(
    spec: KeyedSpec,
    b: _Batch,
    index: int,
    rows_df: pd.DataFrame,
    shards: np.ndarray,
    init: Mapping[int, Any] | None = None,
) -> tuple[list[pd.DataFrame], dict[int, tuple[int, float, int, int]], np.ndarray]:
    """The keyed function over each shard of the task against its state; new versions
    written. Returns the outputs, per shard (rows, busy s, bytes, outputs) and when each
    row's shard was done (epoch s)."""
    v = b.version
    n = len(rows_df)
    shard_stats: dict[int, tuple[int, float, int, int]] = {}
    outputs: list[pd.DataFrame] = []
    done_at = np.empty(n)
    uniq, starts = np.unique(shards, return_index=True)
    ends = [*starts[1:].tolist(), n]
    spans = dict(zip(uniq.tolist(), zip(starts.tolist(), ends, strict=False), strict=False))
    kw: dict[str, Any] = dict(spec.fn_params)
    if getattr(spec.fn, "batch_clock", False):  # timers fire in every shard, rows or not
        kw.update(batch_time_ms=b.batch_time_ms, watermark_ms=b.watermark_ms)
        for g in v.pmap.shards_of(index):
            spans.setdefault(g, (0, 0))
    for g in init or {}:  # the initial state (batch 0): its shards run, rows or not
        spans.setdefault(g, (0, 0))
    backend, op = spec.backend, spec.operator
    many = hasattr(backend, "read_many") and hasattr(backend, "write_many")
    t_io = time.perf_counter()
    states: dict[int, Any] = {}
    if many:  # a task's shard requests go out together (object stores: round trips)
        hint_of = {g: v.hints[g] for g in spans} if v.hints else None
        try:
            got = backend.read_many(op, list(spans), v.upto, hint_of)
        except StreamscaleError as e:  # lost or damaged input state: the batch stops
            raise input_error(e, v.batch_id) from None
        states = {g: st for g, (st, _) in got.items()}
    io_s = time.perf_counter() - t_io
    written: dict[int, Any] = {}
    for g, (lo, hi) in spans.items():
        t0 = time.perf_counter()
        rows = rows_df.iloc[lo:hi].reset_index(drop=True)
        if many:
            state = states[g]
        else:
            try:
                state, _ = backend.read(op, g, v.upto, v.hints[g] if v.hints else None)
            except StreamscaleError as e:
                raise input_error(e, v.batch_id) from None
        res = spec.fn(
            rows, state, **kw, **({"initial_state": init[g]} if g in (init or {}) else {})
        )
        if isinstance(res, tuple):
            res, state = res
        out_n = 0 if res is None else len(res)
        if out_n:
            outputs.append(res)
        if lo == hi and not out_n and not getattr(state, "dirty", True):
            continue  # a shard without rows whose timers changed nothing: no new version
        nbytes = 0
        if many:
            written[g] = state
        else:
            nbytes = backend.write(
                op, g, v.batch_id, state, attempt=v.attempt, drop=v.drops[g] if v.drops else ()
            )
        done_at[lo:hi] = time.time()
        shard_stats[g] = (hi - lo, time.perf_counter() - t0, nbytes, out_n)
    if many and written:
        t_io = time.perf_counter()
        sizes = backend.write_many(
            op, v.batch_id, written, attempt=v.attempt,
            drops={g: v.drops[g] for g in written} if v.drops else None,
        )  # fmt: skip
        io_s += time.perf_counter() - t_io
        done_at[:] = time.time()
        total = max(1, sum(shard_stats[g][0] for g in written))
        for g in written:  # shared I/O time, attributed by rows
            r, t, _, o = shard_stats[g]
            shard_stats[g] = (r, t + io_s * r / total, int(sizes.get(g, 0)), o)
    return outputs, shard_stats, done_at


def _task_rows(
    spec: KeyedSpec, b: _Batch, index: int, df: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, Any, int]:
    """A reduce task's rows checked to be its partition's, its dead letters written and
    dropped, in (shard, arrival) order; those, the function's rows (no internal column,
    initial state or late row), their shards, the initial state and the late rows' count."""
    if len(df) and not (df[PART].to_numpy() == index).all():
        raise StreamscaleError(
            "rows reached a partition other than their unit's", item=f"partition {index}"
        )
    df, letters = split_dead_letters(df, b.parsed, b.version.batch_id)
    write_dead_letters(b.dead_dir, b.version.batch_id, spec.operator, index, letters)
    shards = df[SHARD].to_numpy(dtype=np.int64) if len(df) else np.empty(0, np.int64)
    if len(df):  # a shuffle fetches map outputs in no fixed order
        perm = np.lexsort((df[ORDER].to_numpy(dtype=np.int64), shards))
        if (np.diff(perm) != 1).any():
            df, shards = df.take(perm).reset_index(drop=True), shards[perm]
    rows_df = df.drop(columns=[c for c in INTERNAL if c in df.columns])
    rows_df, shards, init = split_initial(rows_df, shards, spec.key)
    if not len(rows_df.columns):
        rows_df = pd.DataFrame(columns=list(b.in_cols))
    late_n = 0
    if b.late is not None and getattr(spec.fn, "drops_late_rows", False) and len(rows_df):
        from streamscale.runtime.spark.compat.event_time import late_mask

        late = late_mask(rows_df[b.late[0]], b.late[1])
        late_n = int(late.sum())
        if late_n:
            rows_df, shards = rows_df[~late].reset_index(drop=True), shards[~late]
    return df, rows_df, shards, init, late_n


def _reduce_side(
    spec: KeyedSpec, b: _Batch
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    out_cols = b.out_cols

    def emit_stats(stats: TaskStats) -> pd.DataFrame:
        cols = () if not spec.emit else out_cols if out_cols is not None else (_OUT,)
        row: dict[str, Any] = {c: [None] for c in cols}
        row[_STATS] = [pickle.dumps(stats)]
        return pd.DataFrame(row)

    def run(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import TaskContext

        index = TaskContext.get().partitionId()
        chunks = [f for f in frames if len(f)]
        # The dead-letter reasons are almost all null: pandas' concat tests an all-null
        # object column value by value (0.3 s per 200,000 rows), numpy joins it at once.
        split = len(chunks) > 1 and all(DEAD in f.columns for f in chunks)
        reasons = [f.pop(DEAD).to_numpy(dtype=object) for f in chunks] if split else []
        df = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else (
            chunks[0] if chunks else pd.DataFrame()
        )  # fmt: skip
        if split:
            df[DEAD] = np.concatenate(reasons)
        t_task, cpu0 = time.perf_counter(), time.process_time()
        df, rows_df, shards, init, late_n = _task_rows(spec, b, index, df)
        read0 = getattr(spec.backend, "bytes_read", 0)
        outputs, shard_stats, done_at = _run_shards(spec, b, index, rows_df, shards, init)
        out = pd.concat(outputs, ignore_index=True) if outputs else pd.DataFrame()
        if spec.after and not out.empty:
            out = apply_stateless(out, spec.after)
        if spec.task_sink is not None:
            spec.task_sink(out, b.version.batch_id, index)
        busy = time.perf_counter() - t_task
        if "event_time" in rows_df.columns and len(df):
            lat = (done_at - _epoch_s(rows_df["event_time"], b.tz)) * 1000.0
            lat = lat[np.isfinite(lat)]
        else:
            lat = np.empty(0)
        if len(lat) > _LATENCY_SAMPLE:
            lat = np.random.default_rng(index).choice(lat, _LATENCY_SAMPLE)
        emit = spec.emit and not out.empty
        blob = _arrow_blob(out) if emit and out_cols is None else None
        sample = (
            json.loads(out.head(spec.sample_rows).to_json(orient="records", date_format="iso"))
            if spec.sample_rows and not out.empty
            else []
        )
        yield emit_stats(TaskStats(
            partition=index, unit=b.version.pmap.units[index], host=socket.gethostname(), busy_s=busy,
            rows=len(df), out_rows=len(out), shards=shard_stats,
            latencies_ms=lat.astype(np.float32), sample=sample,
            cpu_s=time.process_time() - cpu0, executor=f"{socket.gethostname()}:{os.getppid()}",
            out_schema=_schema_bytes(blob),
            state_read_bytes=getattr(spec.backend, "bytes_read", 0) - read0, late_rows=late_n,
        ))  # fmt: skip
        if not emit:
            return
        if blob is not None:
            yield pd.DataFrame({_OUT: [blob], _STATS: [None]})
            return
        assert out_cols is not None
        missing = [c for c in out_cols if c not in out.columns]
        if missing:
            raise StreamscaleError(
                f"output lacks column {missing[0]!r} of the declared schema",
                item=f"operator {spec.operator}",
            )
        yield out[list(out_cols)].assign(**{_STATS: None})

    return run


def _decoder(schema: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            for blob in batch.column(0).to_pylist():
                table = pa.ipc.open_stream(blob).read_all()
                have, n = table.column_names, table.num_rows
                cols = [table.column(f.name).cast(f.type) if f.name in have
                        else pa.nulls(n, f.type) for f in schema]  # fmt: skip
                yield from pa.Table.from_arrays(cols, schema=schema).to_batches()

    return run


# Cached frames of the last batch of each operator, released at its next batch.
_LIVE: dict[str, list[Any]] = {}


def release(operator: str) -> None:
    """Unpersist what :func:`run_keyed` cached for ``operator``'s last batch."""
    for df in _LIVE.pop(operator, []):
        with contextlib.suppress(Exception):
            df.unpersist()


def run_keyed(
    df: Any,
    spec: KeyedSpec,
    version: BatchVersion,
    *,
    dead_letter_dir: str,
    placed: Mapping[str, tuple[str, str]] | None = None,
    batch_time_ms: int | None = None,
    watermark_ms: int | None = None,
    late: tuple[str, int] | None = None,
    initial: Any = None,
    routes: dict[tuple[Any, ...], tuple[Any, ...]] | None = None,
) -> tuple[Any, BatchStats]:
    """Run one batch of ``spec``'s keyed operator over ``df``; write state, never commit.

    Parameters
    ----------
    df
        The operator's whole input for the batch (a non-streaming DataFrame).
    spec
        The operator.
    version
        The state version written and read, the partition of every global shard, the
        attempt and the shards' hints
        (:meth:`~streamscale.runtime.spark.state.state_api.VersionIndex.version`).
    dead_letter_dir
        Directory of the dead-letter files (``batch-<b>-<operator>-part-<p>.jsonl``),
        one per reduce partition with dead letters; every executor must reach it.
    placed
        Unit → (executor id, Spark location): each such unit's task is pinned to that
        executor (:func:`~streamscale.runtime.spark.executors.pinning.pin`), and where every
        reduce task ran is read back from Spark (``None``: no placement, not measured).
    batch_time_ms
        The batch's processing time, passed to functions with a ``batch_clock``
        attribute (a :func:`~streamscale.runtime.spark.compat.processor.from_processor`
        processor: its timers fire at this time in every shard of the unit, with rows
        or not). Default: now. A replayed batch runs at its replay's time; nothing of
        the interrupted attempt was committed, so the committed result is one run's.
    watermark_ms, late
        The query's watermark for the batch (passed with ``batch_time_ms``), and the
        event-time column with the late-row watermark: a function with a true
        ``drops_late_rows`` attribute does not see rows at or before it (counted in
        :attr:`TaskStats.late_rows`). See :mod:`~streamscale.runtime.spark.compat.event_time`.
    initial
        A processor's initial state (a grouped static DataFrame), given in batch 0 only:
        routed with the input and handed to the function of each shard it reaches as
        ``initial_state`` (:mod:`~streamscale.runtime.spark.compat.initial_state`).
    routes
        The run's routing columns by input schema and plan
        (:func:`~streamscale.runtime.spark.keyed.keyed_map.route`'s ``cache``), kept by the
        caller across batches; ``None``: built for this batch.

    Returns
    -------
    The function's outputs (a DataFrame already computed and cached; released at the
    operator's next batch or by :func:`release`; ``None`` when ``spec.emit`` is false)
    and the batch statistics. An exception in the keyed function fails the Spark job;
    nothing is committed.
    """
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    batch_id, pmap = version.batch_id, version.pmap
    if batch_time_ms is None:
        batch_time_ms = int(time.time() * 1000)
    release(spec.operator)
    in_cols = tuple(df.columns)
    if initial is not None:
        df = with_initial_state(df, initial, spec.key)
    clear_dead_letters(dead_letter_dir, batch_id, spec.operator)
    out_cols, reduced_schema = _reduced_schema(spec)
    mapped, parsed = route(
        df, key=spec.key, required=spec.required, instances=spec.instances,
        shards=spec.shards, pmap=pmap, cache=routes,
    )  # fmt: skip
    shuffled = mapped.repartition(pmap.partitions, F.col(PK))
    spark = df.sparkSession
    batch = _Batch(
        version, out_cols, batch_time_ms,
        spark.conf.get("spark.sql.session.timeZone", None), dead_letter_dir, parsed,
        watermark_ms, late, in_cols,
    )  # fmt: skip
    sc = spark.sparkContext
    reduced, tasks, planned, runs = _reduce(sc, spec, batch, shuffled, reduced_schema, placed)
    stats = BatchStats(
        batch_id=batch_id, duration_s=time.perf_counter() - t0,
        tasks=tuple(sorted(tasks, key=lambda t: t.partition)),
        dead_letters=count_dead_letters(dead_letter_dir, batch_id, spec.operator),
        partitions=pmap.partitions, planned=planned, runs=runs,
    )  # fmt: skip
    return _outputs(spark, spec, reduced, tasks, out_cols), stats


def _reduced_schema(spec: KeyedSpec) -> tuple[tuple[str, ...] | None, Any]:
    """The declared output columns (``None``: Arrow blobs) and the reduce tasks' schema."""
    from pyspark.sql import types as T

    declared = spec.output_schema
    out_cols = None if declared is None else tuple(declared.fieldNames())
    blob = [T.StructField(_OUT, T.BinaryType())]
    out = [] if not spec.emit else list(declared.fields) if declared is not None else blob
    return out_cols, T.StructType([*out, T.StructField(_STATS, T.BinaryType())])


def _reduce(
    sc: Any, spec: KeyedSpec, b: _Batch, shuffled: Any, schema: Any, placed: Any
) -> tuple[Any, list[TaskStats], tuple[str, ...], tuple[Any, ...]]:
    """The reduce tasks, pinned, as one Spark job (its result cached and its statistics
    collected in that job when ``spec.emit``): result, statistics, plan, where tasks ran."""
    from pyspark.sql import functions as F

    runs: tuple[Any, ...] = ()
    with job_group(
        sc, f"streamscale-{spec.operator}-{b.version.batch_id}-{b.version.attempt}", placed
    ) as group:
        shuffled, planned = pin_units(shuffled, b.version.pmap.units, placed)
        reduced = shuffled.mapInPandas(_reduce_side(spec, b), schema)
        if spec.emit:
            reduced = reduced.persist()
            _LIVE[spec.operator] = [reduced]
            stats = reduced.filter(F.col(_STATS).isNotNull()).select(_STATS).collect()
            tasks = [pickle.loads(r[0]) for r in stats]
        else:
            tasks = [pickle.loads(r[0]) for r in reduced.collect()]
    if group is not None:
        runs = tuple(reduce_runs(sc, group, b.version.pmap.partitions))
    return reduced, tasks, planned, runs


def _outputs(spark: Any, spec: KeyedSpec, reduced: Any, tasks: list[TaskStats], cols: Any) -> Any:
    """The outputs (Arrow blobs decoded without declared ``cols``; ``None``: no emit)."""
    from pyspark.sql import functions as F

    if not spec.emit:
        return None
    outputs = reduced.filter(F.col(_STATS).isNull()).drop(_STATS)
    if cols is None:
        outputs = _decode(spark, reduced, tasks)
        _LIVE[spec.operator].append(outputs)
    return outputs


def _decode(spark: Any, reduced: Any, tasks: list[TaskStats]) -> Any:
    """The outputs carried as Arrow blobs, as a DataFrame whose schema is their union."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema

    blobs = reduced.filter(F.col(_OUT).isNotNull()).select(_OUT)
    heads = [t.out_schema for t in tasks if t.out_schema]
    if not heads:
        return spark.createDataFrame([], T.StructType([]))
    schemas = [pa.ipc.read_schema(pa.py_buffer(b)).remove_metadata() for b in heads]
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    large = pa.types.is_large_string
    schema = pa.schema([pa.field(f.name, pa.string() if large(f.type) else f.type) for f in schema])
    return blobs.mapInArrow(_decoder(schema), from_arrow_schema(schema)).persist()
