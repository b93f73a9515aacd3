"""The data path of a declarative keyed operator: Spark's partials, merged per shard on Arrow.

One batch of ``key_by(keys).agg(*aggs)`` is one Spark job:

* map side (Spark SQL, no Python): every row gets its global shard ``e·Z + s``
  (:func:`shard_column`, the hashes of every keyed operator), and Spark aggregates
  the batch's rows per (shard, group) into the accumulators' partial values
  (:func:`~streamscale.runtime.spark.keyed.agg.spec.partials`: ``count``, ``sum``,
  ``min``, ``max``, ``sum`` and ``count`` for ``avg`` …) with its own partial and
  final hash aggregation; only those partial rows go on;
* each partial row gets the partition of the unit serving its shard (the plan's
  routing table) and the native partition key that lands it there, exactly as the
  rows of a ``process`` operator (:mod:`~streamscale.runtime.spark.keyed.keyed_map`), and
  ``repartition(n, key)`` routes them;
* reduce side (``mapInArrow``, no pandas): the task reads the state of the shards its
  partials reach (every shard of the unit in ``complete`` mode) — one Arrow table
  per shard, stored in the shard's versioned state as hash buckets of Arrow IPC bytes
  (:mod:`~streamscale.runtime.spark.keyed.agg.buckets`) — merges state and partials with
  :func:`~streamscale.runtime.spark.keyed.agg.kernels.merge` (one hash aggregation for all
  its shards), writes version ``batch_id`` of every changed shard, setting only the
  buckets whose rows changed (never commits), and emits the changed groups
  (``update``) or every group (``complete``) with their final values, typed as Spark
  types ``df.groupBy(keys).agg(*aggs)``.

Shards, routing tables, state versions, placement and the statistics the planners
read are those of every keyed operator, so the controller moves these shards between
tasks and executors as it moves a ``process`` operator's.
"""

from __future__ import annotations

import os
import pickle
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.executors.pinning import job_group, pin_units, reduce_runs
from streamscale.runtime.spark.keyed.agg.accumulators import finish
from streamscale.runtime.spark.keyed.agg.buckets import (
    BUCKET_BYTES,
    LEGACY_KEY,
    read_pieces,
    store,
    tables_of,
)
from streamscale.runtime.spark.keyed.agg.chain import Recipe, follower_recipe, row_partials
from streamscale.runtime.spark.keyed.agg.dedup import ROW, Dedup, DedupOp, fold_dedup
from streamscale.runtime.spark.keyed.agg.fold import fold
from streamscale.runtime.spark.keyed.agg.join import LCOL, RCOL, JoinOp, fold_join
from streamscale.runtime.spark.keyed.agg.join_spec import Join
from streamscale.runtime.spark.keyed.agg.kernels import split_by
from streamscale.runtime.spark.keyed.agg.spec import (
    LATE,
    N_ROWS,
    WE,
    WIN,
    WS,
    AggOp,
    Aggregation,
    interval_us,
)
from streamscale.runtime.spark.keyed.keyed import _LIVE, BatchStats, KeyedSpec, TaskStats, release
from streamscale.runtime.spark.keyed.keyed_map import PART, PK, SHARD, _lookup
from streamscale.runtime.spark.routing.hashing import partition_keys
from streamscale.runtime.spark.routing.routing import PartitionMap, global_shard_column
from streamscale.runtime.spark.state.state import BatchVersion, input_error

__all__ = ["STATE_KEY", "Fused", "run_agg", "run_chain", "shard_column"]

#: The one entry of a shard stored before buckets (the whole table, Arrow IPC bytes): still
#: read; a shard's table is now its buckets (:mod:`~streamscale.runtime.spark.keyed.agg.buckets`).
STATE_KEY = LEGACY_KEY
_STATS = "__ss_stats"


def shard_column(keys: tuple[str, ...], instances: int, shards: int) -> Any:
    """The global shard of a row's group: one key as a ``process`` operator hashes it,
    several keys by their string forms joined (nulls hash as a marker)."""
    from pyspark.sql import functions as F

    if len(keys) == 1:
        return global_shard_column(F.col(keys[0]), instances, shards)
    parts = [F.coalesce(F.col(k).cast("string"), F.lit("\u0000")) for k in keys]
    return global_shard_column(F.concat_ws("\u001f", *parts), instances, shards)


@dataclass(frozen=True, slots=True)
class _Batch:
    """What one batch's reduce tasks are given (picklable)."""

    operator: str
    op: AggOp | DedupOp | JoinOp
    backend: Any
    version: BatchVersion
    out_schema: pa.Schema  # the output columns (Arrow types of Spark's)
    late_ms: int | None = None  # windows ending at or before it: late partials dropped
    evict_ms: int | None = None  # windows ending at or before it close
    bucket_bytes: int = BUCKET_BYTES  # Arrow bytes per stored bucket of a shard's table


def _table_of(batches: list[pa.RecordBatch]) -> pa.Table | None:
    nonempty = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(nonempty) if nonempty else None


def _states(
    b: _Batch, shards: list[int]
) -> tuple[dict[int, dict[Any, Any]], dict[int, dict[Any, pa.Table]], list[pa.Table]]:
    """The shards' state dicts, their stored pieces (buckets) as read, and their tables
    with the shard as a column."""
    if not shards:
        return {}, {}, []
    hint_of = {g: b.version.hints[g] for g in shards} if b.version.hints else None
    try:
        got = b.backend.read_many(b.operator, shards, b.version.upto, hint_of)
    except StreamscaleError as e:  # lost or damaged input state: the batch stops
        raise input_error(e, b.version.batch_id) from None
    dicts = {g: st for g, (st, _) in got.items()}
    pieces = {g: read_pieces(dicts[g]) for g in shards}
    tables = []
    for g in shards:
        for t in tables_of(pieces[g]):
            tables.append(t.append_column(SHARD, pa.array(np.full(t.num_rows, g, np.int64))))
    return dicts, pieces, tables


def _output(b: _Batch, table: pa.Table) -> pa.RecordBatch:
    """Final values of ``table``'s groups (the kept rows of a deduplication) as a record
    batch of the output schema."""
    if isinstance(b.op, JoinOp):
        return _join_output(b, table)
    if isinstance(b.op, DedupOp):
        row = table.column(ROW).combine_chunks()
        fin = {f.name: row.field(i) for i, f in enumerate(row.type)}
        cols = [fin[f.name].cast(f.type) for f in b.out_schema]
        return pa.RecordBatch.from_arrays(cols, schema=b.out_schema)
    fin = finish(table, b.op.calls)
    if b.op.window is not None and b.op.bounds is not None:
        fin[b.op.bounds[0]] = table.column(WS).combine_chunks()
        fin[b.op.bounds[1]] = table.column(WE).combine_chunks()
    elif b.op.window is not None:
        bounds = [table.column(WS).combine_chunks(), table.column(WE).combine_chunks()]
        wtype = b.out_schema.field(b.op.window).type
        fin[b.op.window] = pa.StructArray.from_arrays(
            [a.cast(wtype.field(i).type) for i, a in enumerate(bounds)],
            fields=[wtype.field(0), wtype.field(1)],
        )
    cols = []
    for f in b.out_schema:
        arr = fin[f.name] if f.name in fin else table.column(f.name).combine_chunks()
        cols.append(arr.cast(f.type) if arr.type != f.type else arr)
    return pa.RecordBatch.from_arrays(cols, schema=b.out_schema)


def _join_output(b: _Batch, table: pa.Table) -> pa.RecordBatch:
    """A join's emitted rows (keys, the left row, the right row) as the output schema."""
    assert isinstance(b.op, JoinOp)
    fin = {k: table.column(k).combine_chunks() for k in b.op.keys}
    for col in (LCOL,) if b.op.how == "left_semi" else (LCOL, RCOL):
        arr = table.column(col).combine_chunks()
        fin.update(zip((f.name for f in arr.type), arr.flatten(), strict=True))
    cols = [fin[f.name] if fin[f.name].type == f.type else fin[f.name].cast(f.type)
            for f in b.out_schema]  # fmt: skip
    return pa.RecordBatch.from_arrays(cols, schema=b.out_schema)


@dataclass(frozen=True, slots=True)
class _Follower:
    """An aggregation fused into a leader's reduce tasks (picklable): its batch, how its
    partial rows are made from the previous operator's output rows, and its partition
    for each of the leader's (its units name the tasks in its statistics)."""

    batch: _Batch
    recipe: Recipe
    remap: tuple[int, ...]


def _step(
    b: _Batch, index: int, unit: str, part: pa.Table | None
) -> tuple[pa.RecordBatch | None, TaskStats, np.ndarray]:
    """One operator's work in a reduce task: its partials ``part`` merged into its shards'
    state, the changed shards written (never committed); its output rows, statistics,
    and the shard of each output row."""
    op = b.op
    t_task, cpu0 = time.perf_counter(), time.process_time()
    read0 = getattr(b.backend, "bytes_read", 0)
    rows_of: dict[int, int] = {}
    if part is not None and part.num_rows:
        uniq, inv = np.unique(part.column(SHARD).to_numpy(), return_inverse=True)
        n_rows = np.bincount(inv, weights=part.column(N_ROWS).to_numpy())
        rows_of = {int(g): int(n) for g, n in zip(uniq, n_rows, strict=True)}
    targets = set(rows_of)
    closing = b.evict_ms is not None and b.evict_ms > (b.late_ms or 0)
    if getattr(op, "mode", None) == "complete" or closing:  # every group, or closing windows
        targets |= set(b.version.pmap.shards_of(index))
    dicts, pieces, tables = _states(b, sorted(targets))
    if isinstance(op, JoinOp):
        f = fold_join(tables, part, op, shard=SHARD, late_ms=b.late_ms, evict_ms=b.evict_ms)
    elif isinstance(op, DedupOp):
        f = fold_dedup(tables, part, op, shard=SHARD, evict_ms=b.evict_ms)
    else:
        f = fold(tables, part, op, shard=SHARD, late_ms=b.late_ms, evict_ms=b.evict_ms)
    wait_ms = getattr(op, "wait_ms", 0.0)
    if wait_ms > 0 and rows_of:  # an emulated cost (benchmarks): waited, not burnt
        time.sleep(wait_ms * sum(rows_of.values()) / 1000.0)
    parts = split_by(f.state, SHARD) if f.state is not None else {}
    written: dict[int, dict[Any, Any]] = {}
    for g in f.changed:  # only the buckets whose rows changed are set
        store(dicts[g], parts.get(g), op.keys, pieces[g], bucket_bytes=b.bucket_bytes)
        written[g] = dicts[g]
    sizes: dict[int, int] = {}
    if written:
        sizes = b.backend.write_many(
            b.operator, b.version.batch_id, written, attempt=b.version.attempt,
            drops={g: b.version.drops[g] for g in written} if b.version.drops else None,
        )  # fmt: skip
    emit = f.emit
    out = _output(b, emit) if emit is not None and emit.num_rows else None
    shard_of = emit.column(SHARD).to_numpy() if out is not None else np.empty(0, np.int64)
    busy = time.perf_counter() - t_task
    total = max(1, sum(rows_of.values()))
    outs = dict(zip(*np.unique(shard_of, return_counts=True), strict=True))
    stats = TaskStats(
        partition=index,
        unit=unit,
        host=socket.gethostname(),
        busy_s=busy,
        rows=sum(rows_of.values()),
        out_rows=0 if out is None else out.num_rows,
        shards={
            g: (
                rows_of.get(g, 0),
                busy * rows_of.get(g, 0) / total,
                int(sizes.get(g, 0)),
                int(outs.get(g, 0)),
            )
            for g in written
        },
        latencies_ms=np.empty(0, np.float32),
        cpu_s=time.process_time() - cpu0,
        executor=f"{socket.gethostname()}:{os.getppid()}",
        state_read_bytes=getattr(b.backend, "bytes_read", 0) - read0,
        late_rows=f.late_rows,
    )
    return out, stats, shard_of


def _reduce_side(
    b: _Batch, then: tuple[_Follower, ...] = ()
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    schema = (then[-1].batch if then else b).out_schema.append(pa.field(_STATS, pa.binary()))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        index = TaskContext.get().partitionId()
        part = _table_of(list(batches))
        if part is not None and not pc.all(pc.equal(part.column(PART), index)).as_py():
            raise StreamscaleError(
                "rows reached a partition other than their unit's", item=f"partition {index}"
            )
        out, stats, shard_of = _step(b, index, b.version.pmap.units[index], part)
        every = [stats]
        for f in then:  # fused followers: the previous operator's output is their input
            rows = None
            if out is not None:
                rows = row_partials(f.recipe, out, shard_of, shard_col=SHARD, n_rows=N_ROWS)
            q = f.remap[index]
            out, stats, shard_of = _step(f.batch, q, f.batch.version.pmap.units[q], rows)
            every.append(stats)
        blob = pickle.dumps(tuple(every) if then else every[0])
        cols = [pa.nulls(1, f.type) for f in schema][:-1]
        yield pa.RecordBatch.from_arrays([*cols, pa.array([blob], pa.binary())], schema=schema)
        if out is not None:
            yield pa.RecordBatch.from_arrays(
                [*out.columns, pa.nulls(out.num_rows, pa.binary())], schema=schema
            )

    return run


def _cached(agg: Any, key: Any, make: Callable[[], Any]) -> Any:
    """Spark Columns that depend on the plan only, built once per run (each costs py4j
    round trips on every batch otherwise)."""
    cache = agg.columns
    got = cache.get(key)
    if got is None:
        if len(cache) > 8:  # plans change: keep the recent ones only
            cache.clear()
        got = cache[key] = make()
    return got


def _route_columns(pmap: PartitionMap) -> tuple[Any, Any]:
    """The partition of a row's shard and the native partition key landing it there."""
    from pyspark.sql import functions as F

    keys = partition_keys(pmap.partitions)
    part = _lookup(pmap.shard_partition, F.col(SHARD), "int").alias(PART)
    pk = _lookup([keys[p] for p in pmap.shard_partition], F.col(SHARD), "long").alias(PK)
    return part, pk


def _partials(
    df: Any, spec: KeyedSpec, agg: Aggregation | Dedup | Join, late_ms: int | None
) -> tuple[Any, AggOp | DedupOp | JoinOp, Any]:
    """The batch's partial rows (Spark columns: shard, group, accumulators), what the
    tasks are given, and Spark's output schema."""
    from pyspark.sql import functions as F

    item = f"operator {spec.operator}"
    shard = _cached(
        agg,
        ("shard", spec.instances, spec.shards),
        lambda: shard_column(agg.keys, spec.instances, spec.shards).alias(SHARD),
    )
    keyed = df.select("*", shard)
    if isinstance(agg, Join):  # the tagged rows of both sides go on as they are
        return keyed, agg.op(), agg.out_schema()
    if isinstance(agg, Dedup):
        schema = agg.resolve(df, item=item)
        return agg.partial(keyed, SHARD, late_ms), DedupOp(agg.keys, tuple(df.columns)), schema
    res = agg.resolve(df, item=item)
    by = res.group
    if agg.session and late_ms is not None and agg.window is not None:
        # Spark drops a late row before sessions merge: its own session [t, t + gap) ends
        # at or before the watermark; those rows form sessions of their own, dropped.
        t, gap, _ = agg.window
        end_us = F.unix_micros(F.col(t).cast("timestamp")) + F.lit(interval_us(gap, item=t))
        keyed = keyed.withColumn(LATE, end_us <= F.lit(late_ms * 1000))
        by = (*by, F.col(LATE))
    partial = keyed.groupBy(F.col(SHARD), *by).agg(*res.partial)
    if res.flat:
        rest = [F.col(c) for c in partial.columns if c not in (SHARD, WIN)]
        partial = partial.select(F.col(SHARD), *res.flat, *rest)
    return partial, res.op, res.out_schema


@dataclass(frozen=True, slots=True)
class Fused:
    """A follower offered for fusion into a leader's stage for one batch (see
    :mod:`~streamscale.runtime.spark.keyed.agg.chain`): its operator and aggregation,
    batch version as the driver gives every keyed operator, and its
    partition for each of the leader's (:func:`~streamscale.runtime.spark.keyed.agg.chain.partition_remap`)."""

    spec: KeyedSpec
    agg: Aggregation
    version: BatchVersion
    remap: tuple[int, ...]


def _follower(spark: Any, agg: Any, in_schema: Any, item: str) -> tuple[Any, Recipe] | None:
    """A follower's resolution against its input schema and its recipe (``None``: it does
    not fuse); once per run and schema (the aggregation's plan-only cache)."""
    if not isinstance(agg, Aggregation):
        return None
    key = ("fused", in_schema.simpleString())
    if key not in agg.columns:
        res = agg.resolve(spark.createDataFrame([], in_schema), item=item)
        recipe = follower_recipe(agg, res, in_schema)
        agg.columns[key] = None if recipe is None else (res, recipe)
    return agg.columns[key]


def run_agg(
    df: Any,
    spec: KeyedSpec,
    agg: Aggregation | Dedup | Join,
    version: BatchVersion,
    *,
    placed: Mapping[str, tuple[str, str]] | None = None,
    batch_time_ms: int | None = None,
    watermark_ms: int | None = None,
    late: tuple[str, int] | None = None,
) -> tuple[Any, BatchStats]:
    """Run one batch of the aggregation ``agg`` (operator ``spec``) over ``df``; write
    state, never commit.

    Parameters are those of :func:`~streamscale.runtime.spark.keyed.keyed.run_keyed`;
    ``watermark_ms`` and ``late`` (the query's watermarks) apply to windowed
    aggregations.

    Returns
    -------
    The batch's output rows (computed and cached; released at the operator's next
    batch or by :func:`~streamscale.runtime.spark.keyed.keyed.release`) and its statistics.
    """
    outputs, stats = run_chain(
        df, spec, agg, version, placed=placed, batch_time_ms=batch_time_ms,
        watermark_ms=watermark_ms,
        late=late,
    )  # fmt: skip
    return outputs, stats[0]


def run_chain(
    df: Any,
    spec: KeyedSpec,
    agg: Aggregation | Dedup | Join,
    version: BatchVersion,
    *,
    placed: Mapping[str, tuple[str, str]] | None = None,
    batch_time_ms: int | None = None,
    watermark_ms: int | None = None,
    late: tuple[str, int] | None = None,
    then: Sequence[Fused] = (),
) -> tuple[Any, tuple[BatchStats, ...]]:
    """:func:`run_agg` of ``agg`` with the followers of ``then`` fused into its reduce
    tasks, as many of them, in order, as fuse (see
    :mod:`~streamscale.runtime.spark.keyed.agg.chain`); every operator writes its state,
    none commits.

    Returns
    -------
    The last fused operator's output rows (computed and cached, released at the
    leader's next batch) and the statistics of the leader and each fused follower, in
    order (one more than the followers fused).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    del batch_time_ms
    t0 = time.perf_counter()
    batch_id, pmap = version.batch_id, version.pmap
    release(spec.operator)
    n = pmap.partitions
    closes = agg.time_mode == "EventTime" and late is not None and watermark_ms is not None
    no_late = getattr(agg, "drops_late", closes) and late is not None and watermark_ms is not None
    late_ms = late[1] if no_late and late is not None else None
    partial, op, spark_out = _partials(df, spec, agg, late_ms)
    out_schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in spark_out])
    route = ("route", pmap.partitions, pmap.shard_partition)
    part, pk = _cached(agg, route, lambda: _route_columns(pmap))
    shuffled = partial.select("*", part, pk).repartition(n, F.col(PK))
    spark = df.sparkSession
    sc = spark.sparkContext
    batch = _Batch(
        spec.operator, op, spec.backend, version,
        to_arrow_schema(out_schema, timezone="UTC"), late_ms, watermark_ms if closes else None,
    )  # fmt: skip
    followers: list[_Follower] = []
    for f in then:
        got = _follower(spark, f.agg, out_schema, f"operator {f.spec.operator}")
        if got is None:
            break
        res, recipe = got
        release(f.spec.operator)
        out_schema = T.StructType([T.StructField(x.name, x.dataType, True)
                                   for x in res.out_schema])  # fmt: skip
        fb = _Batch(
            f.spec.operator, res.op, f.spec.backend, f.version,
            to_arrow_schema(out_schema, timezone="UTC"),
        )  # fmt: skip
        followers.append(_Follower(fb, recipe, f.remap))
    reduced_schema = T.StructType([*out_schema.fields, T.StructField(_STATS, T.BinaryType())])
    runs: tuple[Any, ...] = ()
    with job_group(
        sc, f"streamscale-{spec.operator}-{batch_id}-{version.attempt}", placed
    ) as group:
        shuffled, planned = pin_units(shuffled, pmap.units, placed)
        reduced = shuffled.mapInArrow(_reduce_side(batch, tuple(followers)), reduced_schema)
        reduced = reduced.persist()
        _LIVE[spec.operator] = [reduced]
        got_stats = [
            pickle.loads(r[0])
            for r in reduced.filter(F.col(_STATS).isNotNull()).select(_STATS).collect()
        ]
    if group is not None:
        runs = tuple(reduce_runs(sc, group, n))
    outputs = reduced.filter(F.col(_STATS).isNull()).drop(_STATS)
    per_op = [got_stats] if not followers else [list(c) for c in zip(*got_stats, strict=True)]
    duration = time.perf_counter() - t0
    pmaps = [pmap, *(f.batch.version.pmap for f in followers)]
    stats = tuple(
        BatchStats(
            batch_id=batch_id,
            duration_s=duration,
            tasks=tuple(sorted(tasks, key=lambda t: t.partition)),
            dead_letters=0,
            partitions=m.partitions,
            planned=planned if i == 0 else (),
            runs=runs if i == 0 else (),
        )
        for i, (tasks, m) in enumerate(zip(per_op, pmaps, strict=True))
    )
    return outputs, stats
