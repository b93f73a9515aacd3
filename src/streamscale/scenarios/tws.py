"""The calculator under Spark's own stateful Python API: ``transformWithStateInPandas``.

What a Spark 4 user writes for paper 000's calculator (running count and sum per key,
one output row per input row): a ``StatefulProcessor`` whose value state holds the key's
``(count, sum)``, on the RocksDB state store provider with changelog checkpointing —
Spark's recommended setup for this API. Each key's rows run through the very function
streamscale's keyed operator runs (:func:`~streamscale.runtime.spark.keyed.functions.calculator`,
rows in arrival order ``seq``), so both spend the same per-tuple cost and give the same
outputs; only the state store, the partitioning and the scaling differ.

:func:`calculator_query` builds the query's DataFrame; :data:`ROCKSDB_CONF` holds the
session settings, which Spark fixes when a query first starts on a checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import DoubleType, LongType, StructField, StructType

from streamscale.runtime.spark.keyed.functions import COST_KINDS, calculator

__all__ = [
    "OUTPUT_SCHEMA",
    "ROCKSDB_CONF",
    "CalculatorProcessor",
    "calculator_group_state",
    "calculator_query",
    "group_state_query",
]

#: Spark's RocksDB state store with changelog checkpointing (Spark ≥ 3.4)
ROCKSDB_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
OUTPUT_SCHEMA = "key string, count long, sum double"
_ACC = StructType([StructField("count", LongType()), StructField("sum", DoubleType())])


class CalculatorProcessor(StatefulProcessor):
    """Paper 000's calculator as a ``StatefulProcessor`` (value state ``acc``: count, sum).

    ``cost_kind`` as for :func:`~streamscale.runtime.spark.keyed.functions.calculator`:
    ``cpu`` burns each tuple's ``cost_ms``, ``wall`` waits it. ``busy``: a Spark
    accumulator that adds up the seconds spent in the calculator (the busy time a DS2
    controller divides rows by).
    """

    def __init__(self, cost_kind: str = "cpu", busy: Any = None) -> None:
        if cost_kind not in COST_KINDS:
            raise ValueError(f"cost_kind must be one of {', '.join(COST_KINDS)}")
        self.cost_kind = cost_kind
        self.busy = busy

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.acc = handle.getValueState("acc", _ACC)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        df = pd.concat(list(rows), ignore_index=True)
        if "seq" in df.columns:
            df = df.sort_values("seq", kind="stable", ignore_index=True)
        k = key[0]
        state: dict[Any, Any] = {}
        if self.acc.exists():
            count, total = self.acc.get()
            state[k] = [int(count), float(total)]
        t = time.perf_counter()
        out = calculator(df, state, cost_kind=self.cost_kind)
        if self.busy is not None:
            self.busy.add(time.perf_counter() - t)
        count, total = state[k]
        self.acc.update((int(count), float(total)))
        yield out

    def close(self) -> None:
        return None


def calculator_query(
    stream: Any, *, cost_kind: str = "cpu", key: str = "key", busy: Any = None
) -> Any:
    """``stream.groupBy(key).transformWithStateInPandas(CalculatorProcessor)`` in update
    mode, no timers: one ``key, count, sum`` row per input row."""
    return stream.groupBy(key).transformWithStateInPandas(
        statefulProcessor=CalculatorProcessor(cost_kind, busy),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Update",
        timeMode="None",
    )


def calculator_group_state(cost_kind: str = "cpu") -> Any:
    """The calculator as a user writes it for ``applyInPandasWithState``: the key's
    ``(count, sum)`` in the group state, one output row per input row."""

    def run(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        df = pd.concat(list(frames), ignore_index=True)
        if "seq" in df.columns:
            df = df.sort_values("seq", kind="stable", ignore_index=True)
        k = key[0]
        acc: dict[Any, Any] = {}
        if state.exists:
            count, total = state.get
            acc[k] = [int(count), float(total)]
        out = calculator(df, acc, cost_kind=cost_kind)
        state.update((int(acc[k][0]), float(acc[k][1])))
        yield out

    return run


def group_state_query(stream: Any, *, cost_kind: str = "cpu", key: str = "key") -> Any:
    """``stream.groupBy(key).applyInPandasWithState`` of the calculator, update mode, no
    timeout (Spark's default state store)."""
    return stream.groupBy(key).applyInPandasWithState(
        calculator_group_state(cost_kind),
        OUTPUT_SCHEMA,
        "count long, sum double",
        "update",
        "NoTimeout",
    )
