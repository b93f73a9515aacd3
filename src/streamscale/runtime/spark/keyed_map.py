"""The map side of the keyed stage: dead letters, shard, unit partition, native partition key.

One ``mapInArrow`` task per input partition routes Arrow record batches (paper 000,
§3: a key's executor and shard are fixed hashes; the shard's unit is the plan's
routing table). Only the key, the required fields and ``seq`` become pandas; every
other column stays Arrow. A malformed tuple (no key, a required field missing or not a
finite number) goes to the dead-letter file of its batch, operator and map partition
(``batch-<b>-<operator>-map-<i>.jsonl``), so a retried task or a replayed batch
overwrites instead of duplicating. Every other tuple leaves with its global shard
``e·Z + s``, its unit's partition, a *native partition key* that Spark's hash
partitioning sends to exactly that partition
(:func:`~streamscale.runtime.spark.hashing.partition_keys`) and its arrival order.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from streamscale.runtime.spark.hashing import partition_keys
from streamscale.runtime.spark.routing import PartitionMap, executor_of, shard_of

__all__ = [
    "INTERNAL",
    "ORDER",
    "PART",
    "PK",
    "SHARD",
    "count_dead_letters",
    "dead_letter_reasons",
    "map_side",
    "route_batch",
    "shards_of_keys",
]

SHARD, PART, PK, ORDER = "__ss_shard", "__ss_part", "__ss_pk", "__ss_order"
INTERNAL = (SHARD, PART, PK, ORDER)

# Global shard of every key this worker process has hashed, per (E, Z): a reused Python
# worker sees the same keys batch after batch, and BLAKE2b per key is the map side's cost.
_SHARD_CACHE: dict[tuple[int, int], dict[Any, int]] = {}
_CACHE_KEYS = 1 << 20


def shards_of_keys(keys: Iterable[Any], executors: int, shards: int) -> np.ndarray:
    """Global shard ``e·Z + s`` of each key (int64), as
    :func:`~streamscale.runtime.spark.routing.global_shards`, remembered per process."""
    cache = _SHARD_CACHE.setdefault((executors, shards), {})
    seq = keys if isinstance(keys, list) else list(keys)
    if len(cache) + len(seq) > _CACHE_KEYS:
        cache.clear()
    got = [cache.get(k) for k in seq]
    if None in got:
        for i, k in enumerate(seq):
            if got[i] is None:
                got[i] = cache[k] = executor_of(k, executors) * shards + shard_of(k, shards)
    return np.array(got, dtype=np.int64)


def write_jsonl(path: str, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, written to a temporary file and renamed into place."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        for r in records:
            f.write(json.dumps(r, default=str) + "\n")
    os.replace(tmp, path)


def count_dead_letters(directory: str, batch_id: int | None = None, operator: str = "") -> int:
    """Dead letters written for ``batch_id`` (or every batch), of ``operator`` (or all)."""
    b = "*" if batch_id is None else str(batch_id)
    pattern = f"batch-{b}-{operator}-map-*.jsonl" if operator else f"batch-{b}-*.jsonl"
    n = 0
    for f in glob.glob(os.path.join(directory, pattern)):
        with open(f) as fh:
            n += sum(1 for _ in fh)
    return n


def clear_dead_letters(directory: str, batch_id: int, operator: str) -> None:
    """Remove what an earlier attempt at this batch wrote (its partitioning may differ)."""
    for f in glob.glob(os.path.join(directory, f"batch-{batch_id}-{operator}-map-*")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f)


def _unusable(
    rb: Any, key: str, required: tuple[str, ...], numeric: tuple[str, ...]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Rows that are dead letters, computed on the Arrow columns without naming why (the
    common case has none), and the ``numeric`` columns parsed to ``float64``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = rb.schema.names
    if key not in names or any(c not in names for c in required):
        return np.ones(rb.num_rows, dtype=bool), {}
    k = rb.column(key)
    bad = pc.is_null(k, nan_is_null=True)
    if pa.types.is_string(k.type) or pa.types.is_large_string(k.type):
        bad = pc.or_(bad, pc.fill_null(pc.equal(k, ""), False))
    mask = bad.to_numpy(zero_copy_only=False)
    parsed: dict[str, np.ndarray] = {}
    for col in dict.fromkeys(required):
        c = rb.column(col)
        if col not in numeric and pa.types.is_floating(c.type):
            mask |= pc.fill_null(pc.invert(pc.is_finite(c)), True).to_numpy(zero_copy_only=False)
        elif col not in numeric and (pa.types.is_integer(c.type) or pa.types.is_decimal(c.type)):
            mask |= pc.is_null(c).to_numpy(zero_copy_only=False)
        else:
            num = pd.to_numeric(c.to_pandas(), errors="coerce").to_numpy(
                dtype=float, na_value=np.nan
            )
            mask |= ~np.isfinite(num)
            if col in numeric:
                parsed[col] = num
    return mask, parsed


def dead_letter_reasons(df: pd.DataFrame, key: str, required: tuple[str, ...]) -> pd.Series:
    """Per row, why it cannot be routed (``None``: routable)."""
    reasons = pd.Series(None, index=df.index, dtype=object)
    if key not in df.columns:
        reasons[:] = f"missing key field {key!r}"
    else:
        k = df[key]
        empty = k.eq("") if k.dtype == object or pd.api.types.is_string_dtype(k) else False
        reasons[k.isna() | empty] = f"missing key {key!r}"
    for col in required:
        if col not in df.columns:
            reasons[reasons.isna()] = f"missing field {col!r}"
            continue
        num = pd.to_numeric(df[col], errors="coerce").astype(float)
        reasons[reasons.isna() & (num.isna() | ~np.isfinite(num))] = f"unparsable field {col!r}"
    return reasons


def route_batch(
    rb: Any,
    *,
    key: str,
    required: tuple[str, ...],
    executors: int,
    shards: int,
    pmap: PartitionMap,
    batch_id: int,
    index: int,
    offset: int,
    numeric: tuple[str, ...] = (),
) -> tuple[Any | None, list[dict[str, Any]]]:
    """Route one Arrow record batch of map partition ``index``.

    Parameters
    ----------
    rb
        A ``pyarrow.RecordBatch``: the operator's input columns.
    key, required, executors, shards
        The keyed operator (its key column, required numeric fields, ``E`` and ``Z``).
    pmap
        The partition of every global shard this batch.
    batch_id
        The micro-batch (written into each dead letter).
    index, offset
        The map partition and the position of ``rb``'s first row in it: without a
        ``seq`` column, arrival order is ``index·2⁴⁰ + position``.
    numeric
        Required columns that arrive as text and leave parsed as ``float64``.

    Returns
    -------
    The routed rows (the input columns, ``numeric`` parsed, then shard, partition,
    native partition key and arrival order), ``None`` when none is routable, and the
    dead letters (``batch``, ``reason``, ``tuple`` as it arrived).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    names = rb.schema.names
    pos = offset + np.arange(rb.num_rows, dtype=np.int64)
    letters: list[dict[str, Any]] = []
    bad, parsed = _unusable(rb, key, required, numeric)
    if bad.any():
        small = rb.select([c for c in dict.fromkeys((key, *required)) if c in names])
        reasons = dead_letter_reasons(small.to_pandas(), key, required)
        # Dead letters keep the tuple as it arrived, not its parsed form.
        full = rb.filter(pa.array(bad)).to_pandas()
        for i, why in enumerate(reasons[bad].tolist()):
            tup = {c: (None if pd.isna(v) else v) for c, v in full.iloc[i].items()}
            letters.append({"batch": batch_id, "reason": why, "tuple": tup})
        rb = rb.filter(pa.array(~bad))
        pos = pos[~bad]
        parsed = {c: v[~bad] for c, v in parsed.items()}
    if rb.num_rows == 0:
        return None, letters
    cols = list(rb.columns)
    for col, values in parsed.items():
        cols[names.index(col)] = pa.array(values)
    order = (
        rb.column("seq").to_numpy(zero_copy_only=False).astype(np.int64)
        if "seq" in names
        else (index << 40) + pos
    )
    # Hash each distinct key once (a batch repeats keys many times).
    enc = pc.dictionary_encode(rb.column(key))
    codes = enc.indices.to_numpy(zero_copy_only=False)
    g = shards_of_keys(enc.dictionary.to_pylist(), executors, shards)[codes]
    parts = np.asarray(pmap.shard_partition, dtype=np.int64)[g]
    pkeys = np.asarray(partition_keys(pmap.partitions), dtype=np.int64)
    routed = pa.RecordBatch.from_arrays(
        [*cols, pa.array(g), pa.array(parts.astype(np.int32)), pa.array(pkeys[parts]),
         pa.array(order)],
        names=[*names, *INTERNAL],
    )  # fmt: skip
    return routed, letters


def map_side(
    key: str,
    required: tuple[str, ...],
    executors: int,
    shards: int,
    *,
    operator: str,
    batch_id: int,
    pmap: PartitionMap,
    dead_dir: str,
    numeric: tuple[str, ...],
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of one batch: :func:`route_batch` over every record batch,
    then the partition's dead letters in one file."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        index = TaskContext.get().partitionId()
        letters: list[dict[str, Any]] = []
        offset = 0
        for rb in batches:
            routed, bad = route_batch(
                rb, key=key, required=required, executors=executors, shards=shards,
                pmap=pmap, batch_id=batch_id, index=index, offset=offset, numeric=numeric,
            )  # fmt: skip
            offset += rb.num_rows
            letters.extend(bad)
            if routed is not None:
                yield routed
        if letters:
            os.makedirs(dead_dir, exist_ok=True)
            write_jsonl(
                os.path.join(dead_dir, f"batch-{batch_id}-{operator}-map-{index}.jsonl"), letters
            )

    return run
