"""A processor's initial state (``transformWithStateInPandas(..., initialState=...)``).

Spark reads the initial state, a static DataFrame grouped by the operator's key,
in the query's first batch only (batch 0, ``IncrementalExecution``:
``hasInitialState = currentBatchId == 0``) and cogroups it with that batch's
input: per key, ``handleInitialState(key, rows, timerValues)`` runs once per
chunk of the key's initial rows (a pandas DataFrame; one ``Row`` at a time in
``transformWithState``), before ``handleInputRows`` of the key's input; a key
present only in the initial state gets ``handleInitialState`` alone; timers fire
after both. The state it writes is the operator's state of batch 0, committed
with it: a restarted query does not apply the initial state again.

streamscale does the same on its keyed stage. In batch 0 the initial state is
packed by Spark (``mapInPandas``: one pickled pandas frame per key and input
chunk, as Spark's own Arrow conversion hands it to Python) into one binary
column :data:`INIT` and unioned with the batch's input, so it is routed by the
same key hashes to the shard that owns the key and reaches the same reduce task
as the key's rows (:func:`with_initial_state`). The task splits the packed rows
off before anything else sees them (:func:`split_initial`) and hands each shard's
frames to the keyed function as ``initial_state``. Batch 0 is committed (or
replayed) as a whole, so the initial state is applied exactly once.

Columns of the input that pandas would widen when they hold nulls (integers,
booleans) are filled with a typed zero in the packed rows, so the batch's own
rows reach the function with the dtypes they have in every other batch.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from streamscale.errors import StreamscaleError

__all__ = ["INIT", "DriverOnly", "split_initial", "with_initial_state"]

INIT = "__ss_init"
_KEY = "__ss_init_key"


class DriverOnly:
    """A value kept in the driver: pickled (to a Spark task) it travels as ``None``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (DriverOnly, (None,))


def _frame_and_key(initial: Any) -> tuple[Any, str]:
    """The initial state's DataFrame and its grouping column (a ``GroupedData`` of one
    column, as ``transformWithStateInPandas`` takes)."""
    jgd = getattr(initial, "_jgd", None)
    df = getattr(initial, "_df", None)
    if jgd is None or df is None:
        raise StreamscaleError(
            "initialState must be a grouped DataFrame (df.groupBy(key))",
            item=type(initial).__name__,
        )
    exprs = jgd.groupingExprs()
    if exprs.size() != 1:
        raise StreamscaleError(
            "initialState must be grouped by exactly one column (the operator's key)",
            item=f"{exprs.size()} grouping columns",
        )
    return df, str(exprs.apply(0).name())


def check_initial_state(initial: Any) -> None:
    """Refuses, before the query starts, an initial state that is not a grouped
    DataFrame of one column."""
    df, _ = _frame_and_key(initial)
    if getattr(df, "isStreaming", False):
        raise StreamscaleError("initialState must be a static DataFrame", item="initialState")


def _packer(key: str) -> Any:
    def run(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in frames:
            if not len(pdf):
                continue
            ks = pdf.pop(_KEY)
            keys, blobs = [], []
            for k, grp in pdf.groupby(ks, sort=False, dropna=False):
                keys.append(k)
                blobs.append(pickle.dumps(grp.reset_index(drop=True)))
            yield pd.DataFrame({key: keys, INIT: blobs})

    return run


def _placeholder(dtype: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.BooleanType):
        return F.lit(False)
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return F.lit(0).cast(dtype)
    return F.lit(None).cast(dtype)


def with_initial_state(df: Any, initial: Any, key: str) -> Any:
    """``df`` (a batch's input) with the initial state's rows packed into :data:`INIT`.

    Raises
    ------
    StreamscaleError
        The initial state is not grouped by one column, or lacks it.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    init_df, init_key = _frame_and_key(initial)
    key_type = {f.name: f.dataType for f in df.schema.fields}[key]
    packed = init_df.withColumn(_KEY, F.col(init_key).cast(key_type)).mapInPandas(
        _packer(key),
        T.StructType([T.StructField(key, key_type), T.StructField(INIT, T.BinaryType())]),
    )
    cols = [
        F.col(key) if f.name == key else _placeholder(f.dataType).alias(f.name)
        for f in df.schema.fields
    ]
    return df.withColumn(INIT, F.lit(None).cast("binary")).unionByName(
        packed.select(*cols, F.col(INIT))
    )


def split_initial(
    rows: pd.DataFrame, shards: np.ndarray, key: str
) -> tuple[pd.DataFrame, np.ndarray, dict[int, list[tuple[Any, pd.DataFrame]]]]:
    """A task's rows without the packed initial state, their shards, and per shard the
    initial state as ``(key, frame)`` pairs (one frame per key, in arrival order)."""
    if INIT not in rows.columns:
        return rows, shards, {}
    packed = rows[INIT].notna().to_numpy()
    by_shard: dict[int, dict[Any, list[pd.DataFrame]]] = {}
    for g, k, blob in zip(shards[packed], rows[key][packed], rows[INIT][packed], strict=True):
        by_shard.setdefault(int(g), {}).setdefault(k, []).append(pickle.loads(blob))
    rest = rows[~packed].drop(columns=[INIT]).reset_index(drop=True)
    out = {
        g: [(k, pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0]) for k, fs in m.items()]
        for g, m in by_shard.items()
    }
    return rest, shards[~packed], out
