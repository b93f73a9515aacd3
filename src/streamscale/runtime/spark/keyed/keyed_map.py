"""The map side of the keyed stage, as Spark column expressions, and its dead letters.

:func:`route` adds to an operator's input, with Spark's own expressions (no Python
runs on the map side; Spark code-generates them into the scan of the input):

* ``__ss_dead``: why a row cannot be routed (``None``: routable), the reasons and
  their precedence of :func:`dead_letter_reasons`: the key column is missing, the
  key is null, empty or NaN, a required field is missing, or it is not a finite
  number (text is parsed with ``try_cast(... as double)``);
* ``__ss_shard``: the global shard ``e·Z + s`` of the key
  (:func:`~streamscale.runtime.spark.routing.routing.global_shard_column`: Spark's
  ``xxhash64`` and ``hash`` of ``cast(key as string)``);
* ``__ss_part``: the partition of the unit serving that shard, looked up in a literal
  table of the plan's routing table
  (:attr:`~streamscale.runtime.spark.routing.routing.PartitionMap.shard_partition`, one
  string literal of fixed-width entries: ``E·Z`` may be 8,192);
* ``__ss_pk``: a *native partition key* that Spark's hash partitioning sends to
  exactly that partition (:func:`~streamscale.runtime.spark.routing.hashing.partition_keys`),
  looked up the same way;
* ``__ss_order``: arrival order, ``seq`` when the input has it, else
  ``monotonically_increasing_id()`` (input partition, then position in it);
* ``__ss_num_<i>``: each required field that arrives as text, parsed to ``double``
  (the raw column stays as it arrived, for the dead letters).

Dead letters travel through the same shuffle as the routed rows (one Spark job per
batch, the input scanned once), spread over the partitions by arrival order; the
reduce task of each partition writes its own to one file per batch, operator and
partition (``batch-<b>-<operator>-part-<p>.jsonl``), so a retried task or a replayed
batch overwrites instead of duplicating (:func:`write_dead_letters`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from streamscale.runtime.spark.routing.hashing import partition_keys
from streamscale.runtime.spark.routing.routing import PartitionMap, global_shard_column

__all__ = [
    "DEAD",
    "INTERNAL",
    "ORDER",
    "PART",
    "PK",
    "SHARD",
    "clear_dead_letters",
    "count_dead_letters",
    "dead_letter_file",
    "dead_letter_reasons",
    "prefixed",
    "route",
    "split_dead_letters",
    "write_dead_letters",
]

SHARD, PART, PK, ORDER, DEAD = "__ss_shard", "__ss_part", "__ss_pk", "__ss_order", "__ss_dead"
INTERNAL = (SHARD, PART, PK, ORDER, DEAD)
_PARSED = "__ss_num_"


def dead_letter_file(batch_id: int, operator: str, partition: int) -> str:
    """Name of the dead-letter file of one batch, operator and reduce partition."""
    return f"batch-{batch_id}-{operator}-part-{partition}.jsonl"


def write_jsonl(path: str, records: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line, written to a temporary file and renamed into place."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        for r in records:
            f.write(json.dumps(r, default=str) + "\n")
    os.replace(tmp, path)


def prefixed(directory: str, prefix: str, suffix: str = "") -> list[str]:
    """Paths of the files in ``directory`` named ``prefix…suffix`` (none if it is missing).

    A prefix test, not a glob: a per-batch glob pattern is compiled into a regex that
    ``fnmatch`` caches (32,768 patterns), a driver heap that grew with every batch."""
    try:
        with os.scandir(directory) as it:
            return [e.path for e in it if e.name.startswith(prefix) and e.name.endswith(suffix)]
    except FileNotFoundError:
        return []


def count_dead_letters(directory: str, batch_id: int | None = None, operator: str = "") -> int:
    """Dead letters written for ``batch_id`` (or every batch), of ``operator`` (or all)."""
    if batch_id is None:
        pattern = f"batch-*-{operator}-part-*.jsonl" if operator else "batch-*-*.jsonl"
        files = glob.glob(os.path.join(directory, pattern))  # one pattern for the run
    else:
        prefix = f"batch-{batch_id}-{operator}-part-" if operator else f"batch-{batch_id}-"
        files = prefixed(directory, prefix, ".jsonl")
    n = 0
    for f in files:
        with open(f) as fh:
            n += sum(1 for _ in fh)
    return n


def clear_dead_letters(directory: str, batch_id: int, operator: str) -> None:
    """Remove what an earlier attempt at this batch wrote (its partitioning may differ)."""
    for f in prefixed(directory, f"batch-{batch_id}-{operator}-part-"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f)


def dead_letter_reasons(df: pd.DataFrame, key: str, required: tuple[str, ...]) -> pd.Series:
    """Per row, why it cannot be routed (``None``: routable); pandas' reading of the rules
    :func:`route` applies in Spark (the first reason that applies wins)."""
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


def _not_finite(c: Any) -> Any:
    from pyspark.sql import functions as F

    return c.isNull() | F.isnan(c) | (F.abs(c) == F.lit(float("inf")))


def _reason(types: Mapping[str, Any], key: str, required: tuple[str, ...]) -> tuple[
    Any, dict[str, Any]
]:  # fmt: skip
    """The ``__ss_dead`` column of :func:`route` for an input of column ``types`` (name
    -> Spark type), and the parsed form of each required text column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rules: list[tuple[Any, str]] = []
    if key not in types:
        rules.append((F.lit(True), f"missing key field {key!r}"))
    else:
        k, kt = F.col(key), types[key]
        bad = k.isNull()
        if isinstance(kt, T.StringType):
            bad = bad | (k == F.lit(""))
        elif isinstance(kt, T.FloatType | T.DoubleType):
            bad = bad | F.isnan(k)
        rules.append((bad, f"missing key {key!r}"))
    parsed: dict[str, Any] = {}
    for col in dict.fromkeys(required):
        if col not in types:
            rules.append((F.lit(True), f"missing field {col!r}"))
            continue
        c, ct = F.col(col), types[col]
        if isinstance(ct, T.FloatType | T.DoubleType):
            bad = _not_finite(c)
        elif isinstance(ct, T.IntegralType | T.DecimalType):
            bad = c.isNull()
        else:
            parsed[col] = c.try_cast("double")
            bad = _not_finite(parsed[col])
        rules.append((bad, f"unparsable field {col!r}"))
    reason = F.when(rules[0][0], F.lit(rules[0][1]))
    for cond, why in rules[1:]:
        reason = reason.when(cond, F.lit(why))
    return reason, parsed


def _lookup(values: Iterable[int], index: Any, kind: str) -> Any:
    """``values[index]`` (non-negative integers) as a Spark expression.

    The same as ``element_at(array(<values>), index + 1)``, with the table as one
    string literal of fixed-width decimal entries: the plan stays one literal for any
    ``E·Z`` (an array of 8,192 literals costs Spark about half a second to analyse on
    every batch).
    """
    from pyspark.sql import functions as F

    vals = [str(int(v)) for v in values]
    width = max(len(v) for v in vals)
    table = F.lit("".join(v.rjust(width, "0") for v in vals))
    return F.substring(table, (index * F.lit(width) + F.lit(1)).cast("int"), width).cast(kind)


def route(
    df: Any, *, key: str, required: tuple[str, ...], instances: int, shards: int,
    pmap: PartitionMap, cache: dict[tuple[Any, ...], tuple[Any, ...]] | None = None,
) -> tuple[Any, dict[str, str]]:  # fmt: skip
    """The input of one batch with its routing columns (see the module docstring).

    Parameters
    ----------
    df
        The operator's input (a Spark DataFrame).
    key, required, instances, shards
        The keyed operator: key column, required numeric fields, ``E`` and ``Z``.
    pmap
        The partition of every global shard this batch.

    Returns
    -------
    The DataFrame (every input column as it arrived, then ``__ss_shard``,
    ``__ss_part``, ``__ss_pk``, ``__ss_order``, ``__ss_dead`` and the parsed text
    fields), and the name of each parsed column by the field it parses.
    """
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in df.schema.fields}
    # The routing columns depend on the input's types, the operator and the plan only:
    # built once and reused by every batch with the same (a batch builds none, each
    # costs py4j round trips).
    sig = (key, required, instances, shards, pmap.partitions, tuple(pmap.shard_partition),
           tuple((c, t.simpleString()) for c, t in types.items()))  # fmt: skip
    routes = {} if cache is None else cache  # the run's (KeyedSpec.routes), or none
    cols = routes.get(sig)
    if cols is None:
        if len(routes) >= _ROUTES_KEPT:  # plans and inputs change: keep the recent ones
            routes.clear()
        cols = routes[sig] = _route_columns(types, key, required, instances, shards, pmap)
    shard, seq, reason, parsed, part, pk = cols
    order = seq if seq is not None else F.monotonically_increasing_id().alias(ORDER)
    routed = df.select("*", shard, order, reason, *parsed.values())
    routed = routed.withColumn(PART, part)
    routed = routed.withColumn(PK, pk)
    return routed, dict(_parsed_names(parsed))


#: routing columns a run keeps (one per input schema and plan seen recently)
_ROUTES_KEPT = 16


def _parsed_names(parsed: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Each parsed field and the name of its parsed column."""
    return ((col, f"{_PARSED}{i}") for i, col in enumerate(parsed))


def _route_columns(
    types: Mapping[str, Any], key: str, required: tuple[str, ...], instances: int,
    shards: int, pmap: PartitionMap,
) -> tuple[Any, ...]:  # fmt: skip
    """:func:`route`'s columns (Spark Columns over column names, no DataFrame): the
    shard, the order (``None``: by arrival, a fresh id per batch), the reason, the
    parsed fields by name, the partition and the native partition key."""
    from pyspark.sql import functions as F

    n = pmap.partitions
    reason, parsed = _reason(types, key, required)
    seq = F.col("seq").cast("long").alias(ORDER) if "seq" in types else None
    shard = (
        global_shard_column(F.col(key), instances, shards)
        if key in types
        else F.lit(None).cast("long")
    )
    named = {col: parsed[col].alias(name) for col, name in _parsed_names(parsed)}
    # Routable rows go to their shard's unit; dead letters are spread by arrival order.
    part = F.when(
        F.col(DEAD).isNull(), _lookup(pmap.shard_partition, F.col(SHARD), "int")
    ).otherwise(F.pmod(F.coalesce(F.col(ORDER), F.lit(0)), F.lit(n)).cast("int"))
    pk = _lookup(partition_keys(n), F.col(PART), "long")
    return shard.alias(SHARD), seq, reason.alias(DEAD), named, part, pk


def split_dead_letters(
    df: pd.DataFrame, parsed: Mapping[str, str], batch_id: int
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """A reduce task's rows without its dead letters (the text fields replaced by their
    parsed form), and the dead letters (``batch``, ``reason``, ``tuple`` as it arrived)."""
    letters: list[dict[str, Any]] = []
    if DEAD not in df.columns:  # a task without rows
        return df, letters
    why = df[DEAD]
    bad = why.notna().to_numpy()
    if bad.any():
        extra = [*INTERNAL, *parsed.values()]
        raw = df.loc[bad, [c for c in df.columns if c not in extra]]
        for reason, tup in zip(why[bad].tolist(), raw.to_dict("records"), strict=True):
            clean = {c: (None if _missing(v) else v) for c, v in tup.items()}
            letters.append({"batch": batch_id, "reason": reason, "tuple": clean})
        df = df.loc[~bad].reset_index(drop=True)
    for col, name in parsed.items():
        df[col] = df.pop(name).astype(np.float64)
    return df, letters


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or array value
        return False


def write_dead_letters(
    directory: str, batch_id: int, operator: str, partition: int, letters: list[dict[str, Any]]
) -> None:
    """One partition's dead letters of a batch, replacing what an earlier attempt wrote."""
    if letters:
        os.makedirs(directory, exist_ok=True)
        write_jsonl(
            os.path.join(directory, dead_letter_file(batch_id, operator, partition)), letters
        )
