"""The elastic keyed operator inside ``foreachBatch`` (paper 000, §3, on micro-batches).

One batch runs as two Spark stages. The map side (one task per source
partition) applies the stateless operators before the keyed one, sends
malformed tuples to the dead-letter files, tags every tuple with its global
shard and looks up, in the plan's routing table, the partition of the unit
serving that shard; it emits one chunk per target partition.
``RDD.partitionBy(Σk, …)`` on those partition ids then gives each reduce task
exactly the shards the plan routes to its unit. The task sorts its rows by
(shard, arrival order) — a shuffle fetches map outputs in no fixed order —
runs the keyed function per shard against that shard's state version,
writes the new version, runs the stateless operators after it and writes
the sinks. Every file a task writes is named by batch and partition, so a
retried task or a replayed batch overwrites instead of duplicating; the
driver commits the state version only after the whole batch succeeded (see
:mod:`streamscale.runtime.spark.state`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from streamscale.runtime.spark.keyed import (
    BatchStats,
    TaskStats,
    _write_jsonl,
    count_dead_letters,
)
from streamscale.runtime.spark.pinning import job_group, pin_rdd, reduce_runs
from streamscale.runtime.spark.routing import PartitionMap, global_shards
from streamscale.runtime.spark.state import Hint, StateBackend

__all__ = ["BatchContext", "BatchStats", "TaskStats", "run_batch", "warm_up"]

_LATENCY_SAMPLE = 4000


@dataclass(frozen=True, slots=True)
class BatchContext:
    """Everything a task needs for one batch (pickled and shipped with the closure)."""

    batch_id: int
    operator: str
    key: str
    executors: int
    shards: int
    upto: int
    backend: StateBackend
    fn: Callable[..., Any]
    fn_params: Mapping[str, Any]
    before: tuple[tuple[Callable[..., Any], Mapping[str, Any]], ...]
    after: tuple[tuple[Callable[..., Any], Mapping[str, Any]], ...]
    required: tuple[str, ...]
    columns: tuple[str, ...]
    units: tuple[str, ...]
    shard_partition: tuple[int, ...]
    file_sinks: tuple[tuple[str, str], ...]
    console_rows: int
    dead_letter_dir: str
    attempt: str | None = None
    hints: tuple[Hint, ...] = ()
    drops: tuple[tuple[int, ...], ...] = ()


def _apply(
    df: pd.DataFrame, ops: tuple[tuple[Callable[..., Any], Mapping[str, Any]], ...]
) -> pd.DataFrame:
    for fn, params in ops:
        res = fn(df, **params)
        df = res if res is not None else df.iloc[0:0]
    return df


def _dead_letters(ctx: BatchContext, df: pd.DataFrame) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Split ``df`` into routable rows and dead letters (with the reason)."""
    reasons = pd.Series(None, index=df.index, dtype=object)
    if ctx.key not in df.columns:
        reasons[:] = f"missing key field {ctx.key!r}"
    else:
        k = df[ctx.key]
        reasons[k.isna() | (k.astype(str).str.len() == 0)] = f"missing key {ctx.key!r}"
    parsed: dict[str, pd.Series] = {}
    for col in ctx.required:
        if col not in df.columns:
            reasons[reasons.isna()] = f"missing field {col!r}"
            continue
        num = pd.to_numeric(df[col], errors="coerce")
        bad = reasons.isna() & (num.isna() | ~np.isfinite(num.astype(float)))
        reasons[bad] = f"unparsable field {col!r}"
        if num.dtype != df[col].dtype:
            parsed[col] = num
    mask = reasons.notna()
    # Dead letters keep the tuple as it arrived, not its parsed form.
    letters = [
        {"batch": ctx.batch_id, "reason": reasons[i], "tuple": df.loc[i].to_dict()}
        for i in df.index[mask]
    ]
    good = df[~mask] if letters else df
    if parsed:
        good = good.assign(**{c: v[~mask] for c, v in parsed.items()})
    return good, letters


def _map_side(ctx: BatchContext) -> Callable[[int, Iterator[Any]], Iterator[Any]]:
    """Route one source partition: one (partition, chunk) record per target partition."""

    def run(index: int, rows: Iterator[Any]) -> Iterator[Any]:
        df = pd.DataFrame.from_records([tuple(r) for r in rows], columns=list(ctx.columns))
        df = _apply(df, ctx.before)
        df, letters = _dead_letters(ctx, df)
        path = os.path.join(ctx.dead_letter_dir, f"batch-{ctx.batch_id}-map-{index}.jsonl")
        if letters:
            os.makedirs(ctx.dead_letter_dir, exist_ok=True)
            _write_jsonl(path, letters)
        if df.empty:
            return
        df = df.reset_index(drop=True)
        # Arrival order: the source's sequence number, else position in this partition.
        order = (
            df["seq"].to_numpy(dtype=np.int64)
            if "seq" in df.columns
            else (np.int64(index) << 40) + np.arange(len(df), dtype=np.int64)
        )
        shards = global_shards(df[ctx.key].tolist(), ctx.executors, ctx.shards)
        parts = np.asarray(ctx.shard_partition, dtype=np.int64)[shards]
        for p in np.unique(parts).tolist():
            sel = np.flatnonzero(parts == p)
            yield p, (shards[sel], order[sel], df.iloc[sel].reset_index(drop=True))

    return run


def _epoch_s(col: pd.Series) -> np.ndarray:
    ts = pd.to_datetime(col, utc=True, errors="coerce")
    return (ts.astype("int64").to_numpy() / 1e9).astype(float)


def _gather(records: Iterator[Any]) -> tuple[np.ndarray, pd.DataFrame]:
    """All chunks of a partition, sorted by (shard, arrival order); stable per key."""
    chunks = [rec for _, rec in records]
    if not chunks:
        return np.empty(0, dtype=np.int64), pd.DataFrame()
    shards = np.concatenate([c[0] for c in chunks])
    order = np.concatenate([c[1] for c in chunks])
    df = pd.concat([c[2] for c in chunks], ignore_index=True)
    perm = np.lexsort((order, shards))
    return shards[perm], df.take(perm).reset_index(drop=True)


def _reduce_side(ctx: BatchContext) -> Callable[[int, Iterator[Any]], Iterator[TaskStats]]:
    def run(index: int, records: Iterator[Any]) -> Iterator[TaskStats]:
        shards, df = _gather(records)
        t_task, cpu0 = time.perf_counter(), time.process_time()
        shard_stats: dict[int, tuple[int, float, int, int]] = {}
        outputs: list[pd.DataFrame] = []
        done_at = np.empty(len(df))
        uniq, starts = np.unique(shards, return_index=True)
        ends = [*starts[1:].tolist(), len(df)] if len(uniq) else []
        read0 = getattr(ctx.backend, "bytes_read", 0)
        for g, a, b in zip(uniq.tolist(), starts.tolist(), ends, strict=True):
            t0 = time.perf_counter()
            rows = df.iloc[a:b].reset_index(drop=True)
            hint = ctx.hints[g] if ctx.hints else None
            state, _ = ctx.backend.read(ctx.operator, g, ctx.upto, hint)
            res = ctx.fn(rows, state, **ctx.fn_params)
            if isinstance(res, tuple):
                res, state = res
            nbytes = ctx.backend.write(
                ctx.operator,
                g,
                ctx.batch_id,
                state,
                attempt=ctx.attempt,
                drop=ctx.drops[g] if ctx.drops else (),
            )
            busy = time.perf_counter() - t0
            done_at[a:b] = time.time()
            out_n = 0 if res is None else len(res)
            if out_n:
                outputs.append(res)
            shard_stats[g] = (b - a, busy, nbytes, out_n)
        out = pd.concat(outputs, ignore_index=True) if outputs else pd.DataFrame()
        out = _apply(out, ctx.after) if ctx.after and not out.empty else out
        for fmt, path in ctx.file_sinks:
            _write_sink(fmt, path, ctx.batch_id, index, out)
        if "event_time" in df.columns and len(df):
            latencies = (done_at - _epoch_s(df["event_time"])) * 1000.0
            latencies = latencies[np.isfinite(latencies)]
        else:
            latencies = np.empty(0)
        if len(latencies) > _LATENCY_SAMPLE:
            latencies = np.random.default_rng(index).choice(latencies, _LATENCY_SAMPLE)
        sample = (
            json.loads(out.head(ctx.console_rows).to_json(orient="records", date_format="iso"))
            if ctx.console_rows and not out.empty
            else []
        )
        yield TaskStats(
            partition=index,
            unit=ctx.units[index],
            host=socket.gethostname(),
            busy_s=time.perf_counter() - t_task,
            rows=len(df),
            out_rows=len(out),
            shards=shard_stats,
            latencies_ms=latencies.astype(np.float32),
            sample=sample,
            cpu_s=time.process_time() - cpu0,
            state_read_bytes=getattr(ctx.backend, "bytes_read", 0) - read0,
        )

    return run


def _partition_id(p: int) -> int:
    return p


def _write_sink(fmt: str, path: str, batch: int, part: int, out: pd.DataFrame) -> None:
    os.makedirs(path, exist_ok=True)
    if out.empty:
        return
    name = os.path.join(path, f"batch-{batch}-part-{part}.{fmt}")
    if fmt == "jsonl":
        tmp = f"{name}.{os.getpid()}.tmp"
        out.to_json(tmp, orient="records", lines=True, date_format="iso")
        os.replace(tmp, name)
    else:
        tmp = f"{name}.{os.getpid()}.tmp"
        out.to_parquet(tmp, index=False)
        os.replace(tmp, name)


def _clear_batch_files(ctx: BatchContext) -> None:
    """Remove what an earlier attempt at this batch wrote (its partition count may differ)."""
    dirs = [ctx.dead_letter_dir] + [p for _, p in ctx.file_sinks]
    for d in dirs:
        for f in glob.glob(os.path.join(d, f"batch-{ctx.batch_id}-*")):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f)


def run_batch(
    batch_df: Any,
    ctx: BatchContext,
    pmap: PartitionMap,
    placed: Mapping[str, tuple[str, str]] | None = None,
) -> BatchStats:
    """Run one micro-batch through the elastic keyed operator and commit its state.

    ``placed`` (unit → executor id and Spark location) pins those units' tasks and has
    where every reduce task ran read back (see :func:`~streamscale.runtime.spark.keyed.run_keyed`).
    An exception in an operator function fails the Spark job, so nothing is
    committed and the batch is retried when the query restarts.
    """
    t0 = time.perf_counter()
    _clear_batch_files(ctx)
    sc = batch_df.sparkSession.sparkContext
    planned: tuple[str, ...] = ()
    runs: tuple[Any, ...] = ()
    with job_group(sc, f"streamscale-{ctx.operator}-{ctx.batch_id}-{ctx.attempt}", placed) as g:
        shuffled = batch_df.rdd.mapPartitionsWithIndex(_map_side(ctx)).partitionBy(
            pmap.partitions, _partition_id
        )
        if placed is not None:
            planned = tuple(placed[u][0] if u in placed else "" for u in pmap.units)
            if any(planned):
                shuffled = pin_rdd(
                    shuffled, [placed[u][1] if u in placed else None for u in pmap.units]
                )
        tasks = shuffled.mapPartitionsWithIndex(_reduce_side(ctx)).collect()
    if g is not None:
        runs = tuple(reduce_runs(sc, g, pmap.partitions))
    ctx.backend.commit(ctx.operator, ctx.batch_id)
    dead = count_dead_letters(ctx.dead_letter_dir, ctx.batch_id)
    return BatchStats(
        batch_id=ctx.batch_id,
        duration_s=time.perf_counter() - t0,
        tasks=tuple(sorted(tasks, key=lambda t: t.partition)),
        dead_letters=dead,
        partitions=pmap.partitions,
        planned=planned,
        runs=runs,
    )


def _warm(_: int) -> int:
    import streamscale.runtime.spark.state  # noqa: F401  (what every task imports)

    return os.getpid()


def warm_up(sc: Any, tasks: int) -> None:
    """Start the Python workers (and their imports) before a query's first batch.

    Otherwise the first batch pays for forking workers and importing pandas,
    which a duration-bound run would count against the policy it runs.
    """
    n = max(1, tasks)
    sc.parallelize(range(n), n).map(_warm).collect()


def percentile(values: np.ndarray, q: float) -> float:
    """``q``-th percentile, NaN when empty."""
    return float(np.percentile(values, q)) if len(values) else math.nan
