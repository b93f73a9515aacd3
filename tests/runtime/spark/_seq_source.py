"""A tiny deterministic streaming source for the pipeline tests.

Tuple ``i`` has key ``k{i*7919 % keys}`` (some keys hot through ``hot``), a
fixed cost, the wall clock as event time and ``seq = i``; every ``bad``-th
tuple has no key (a malformed tuple). ``latestOffset`` advances by ``step``
tuples per batch up to ``total``, so batches are small and reproducible.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import pandas as pd
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

__all__ = ["SeqSource", "expected_rows", "flaky_counter", "tally"]

SCHEMA = "key string, value double, cost_ms double, payload string, event_time timestamp, seq long"


def key_of(i: int, keys: int, bad: int) -> str | None:
    if bad and i % bad == bad - 1:
        return None
    h = (i * 7919) % (keys * 4)
    return f"k{h % keys if h < keys * 3 else h % 3}"  # a quarter of tuples go to k0..k2


def expected_rows(options: dict[str, str], n: int) -> pd.DataFrame:
    keys, bad = int(options.get("keys", "50")), int(options.get("bad", "0"))
    return pd.DataFrame({"key": [key_of(i, keys, bad) for i in range(n)], "seq": list(range(n))})


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class _Reader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.keys = int(options.get("keys", "50"))
        self.step = int(options.get("step", "200"))
        self.total = int(options.get("total", "100000"))
        self.bad = int(options.get("bad", "0"))
        self.parts = int(options.get("partitions", "2"))
        self.cost = float(options.get("cost_ms", "0"))

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        # From the start Spark passes, so a restarted query continues where it was.
        return {"offset": min(self.total, start["offset"] + self.step)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        a, b = start["offset"], end["offset"]
        cuts = [a + (b - a) * i // self.parts for i in range(self.parts + 1)]
        return [_Range(cuts[i], cuts[i + 1]) for i in range(self.parts) if cuts[i + 1] > cuts[i]]

    def read(self, partition: InputPartition) -> Any:  # type: ignore[override]
        now = dt.datetime.now(dt.UTC)
        for i in range(partition.start, partition.end):  # type: ignore[attr-defined]
            yield (key_of(i, self.keys, self.bad), float(i % 10), self.cost, "x", now, i)

    def commit(self, end: dict) -> None:
        pass


class SeqSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "streamscale_test_seq"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # type: ignore[override]
        return _Reader(dict(self.options))


def flaky_counter(rows: pd.DataFrame, state: dict, *, marker: str, at_seq: int) -> pd.DataFrame:
    """``counter`` that raises while ``marker`` exists and the batch reaches ``at_seq``."""
    import os

    from streamscale.runtime.spark.keyed.functions import counter

    if os.path.exists(marker) and int(rows["seq"].max()) >= at_seq:
        raise RuntimeError(f"injected failure at seq {at_seq}")
    return counter(rows, state)


flaky_counter.required_fields = ("seq",)  # type: ignore[attr-defined]


def tally(rows: pd.DataFrame, state: dict) -> pd.DataFrame:
    """Tuples per key, one flat entry a key (``state[key]``: an int), so that a version
    holds only the keys its batch changed (a changelog); emits each key seen, with its
    new count."""
    for k in rows["key"].dropna().tolist():
        state[k] = state.get(k, 0) + 1
    seen = rows["key"].dropna().drop_duplicates().tolist()
    return pd.DataFrame({"key": seen, "count": [state[k] for k in seen]})


# Python workers cannot import the tests package: ship this module by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
