"""Spark 4 StatefulProcessors as keyed operators: typed state, timers, TTL, evolution."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat.processor import column_clock, from_processor, run_batch
from streamscale.runtime.spark.state.state import BatchVersion, LocalStateBackend
from streamscale.runtime.spark.state.state_log import is_log

BATCH_MS = 1000
IDLE_MS = 2500  # "idle" for a key after this long without input
SEEN_TTL_MS = 1500  # "returning": the key had input less than this long ago


@dataclasses.dataclass
class CountV1:
    n: int
    total: float


@dataclasses.dataclass
class CountV2:
    n: int
    total: float
    last_seq: int = -1  # added after state was written with CountV1


class IdleCounter(StatefulProcessor):
    """Running count and sum per key; 'idle' once a key had no input for IDLE_MS."""

    schema: type = CountV1

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", self.schema)
        self.seen = handle.getValueState("seen", "at long", SEEN_TTL_MS)

    def _bump(self, c: Any, pdf: pd.DataFrame) -> None:
        c.n += len(pdf)
        c.total += float(pdf["value"].sum())

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Any:
        now = timerValues.getCurrentProcessingTimeInMs()
        c = self.count.get() or self.schema(0, 0.0)
        returning = self.seen.exists()
        for pdf in rows:
            self._bump(c, pdf)
        self.count.update(c)
        self.seen.update((now,))
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        self.handle.registerTimer(now + IDLE_MS)
        yield _out(key[0], "count", c, returning, now)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        c = self.count.get()
        yield _out(key[0], "idle", c, False, expiredTimerInfo.getExpiryTimeInMs())


class IdleCounterV2(IdleCounter):
    """The same processor after its value state gained a field."""

    schema = CountV2

    def _bump(self, c: Any, pdf: pd.DataFrame) -> None:
        super()._bump(c, pdf)
        c.last_seq = int(pdf["seq"].max())


def _out(key: Any, kind: str, c: Any, returning: bool, at: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [key],
            "kind": [kind],
            "n": [c.n],
            "total": [c.total],
            "returning": [returning],
            "at": [at],
        }
    )


def _reference(frames: list[pd.DataFrame]) -> list[list[tuple[Any, ...]]]:
    """What IdleCounter must emit per batch, computed with pandas and a loop."""
    n: dict[Any, int] = {}
    total: dict[Any, float] = {}
    last: dict[Any, int] = {}
    timer: dict[Any, int] = {}
    out = []
    for b, f in enumerate(frames):
        t = b * BATCH_MS
        rows = []
        for k, at in sorted(timer.items(), key=lambda kv: kv[1]):
            if at <= t:
                rows.append(("idle", k, n[k], round(total[k], 9), False, at))
                del timer[k]
        for k, g in f.groupby("key", sort=False):
            returning = k in last and t < last[k] + SEEN_TTL_MS
            n[k] = n.get(k, 0) + len(g)
            total[k] = total.get(k, 0.0) + float(g["value"].sum())
            rows.append(("count", k, n[k], round(total[k], 9), returning, t))
            last[k], timer[k] = t, t + IDLE_MS
        out.append(sorted(rows))
    return out


def _rows(out: pd.DataFrame | None) -> list[tuple[Any, ...]]:
    if out is None or out.empty:
        return []
    return sorted(
        (r.kind, r.key, int(r.n), round(float(r.total), 9), bool(r.returning), int(r.at))
        for r in out.itertuples()
    )


def _frame(keys: list[str], b: int) -> pd.DataFrame:
    return pd.DataFrame({"key": keys, "value": [1.0] * len(keys), "seq": range(len(keys))})


def test_timers_fire_first_for_keys_with_and_without_input() -> None:
    fn = from_processor(IdleCounter(), "key", timer_order="first")
    state: dict[Any, Any] = {}
    got = [_rows(fn(_frame(["a", "b"], 0), state, batch_time_ms=0))]
    got.append(_rows(fn(_frame(["a"], 1), state, batch_time_ms=2000)))
    # b is idle at 2500 (no input since 0); a is idle at 4500 and has input at 5000 too.
    got.append(_rows(fn(_frame(["a"], 2), state, batch_time_ms=5000)))
    assert got == [
        [("count", "a", 1, 1.0, False, 0), ("count", "b", 1, 1.0, False, 0)],
        [("count", "a", 2, 2.0, False, 2000)],
        [
            ("count", "a", 3, 3.0, False, 5000),
            ("idle", "a", 2, 2.0, False, 4500),
            ("idle", "b", 1, 1.0, False, 2500),
        ],
    ]
    # a shard called without rows (a runner that calls every shard) fires its timers too
    assert _rows(fn(_frame([], 3), state, batch_time_ms=9000)) == [
        ("idle", "a", 3, 3.0, False, 7500)
    ]
    assert not [k for k in state if k[0] == "__timers__"]  # no timer left behind


def test_after_input_order_lets_input_cancel_a_due_timer_as_in_spark() -> None:
    fn = from_processor(IdleCounter(), "key", timer_order="after_input")
    state: dict[Any, Any] = {}
    fn(_frame(["a", "b"], 0), state, batch_time_ms=0)
    got = _rows(fn(_frame(["a"], 1), state, batch_time_ms=3000))
    assert got == [("count", "a", 2, 2.0, False, 3000), ("idle", "b", 1, 1.0, False, 2500)]


class EventTimer(StatefulProcessor):
    def init(self, handle: Any) -> None:
        self.handle = handle

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        for pdf in rows:
            for t in pdf["ts"]:
                self.handle.registerTimer(int(t) + 100)
        return iter(())

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        wm = timerValues.getCurrentWatermarkInMs()
        yield pd.DataFrame(
            {"key": [key[0]], "at": [expiredTimerInfo.getExpiryTimeInMs()], "wm": [wm]}
        )


def test_event_time_timers_follow_the_watermark_from_the_rows() -> None:
    clock = column_clock("now", watermark="wm")
    fn = from_processor(EventTimer(), "key", time_mode="EventTime", clock=clock)
    state: dict[Any, Any] = {}

    def batch(ts: list[int], wm: int) -> list[tuple[Any, ...]]:
        df = pd.DataFrame({"key": ["k"] * len(ts), "ts": ts, "now": [10**6] * len(ts)})
        out = fn(df.assign(wm=wm), state)
        return [] if out is None else list(out.itertuples(index=False, name=None))

    assert batch([1000, 1050], wm=900) == []
    assert batch([1200], wm=1120) == [("k", 1100, 1120)]  # 1150 is not due yet
    assert batch([1350], wm=1400) == [("k", 1150, 1400), ("k", 1300, 1400)]
    with pytest.raises(StreamscaleError, match="not later than the watermark"):
        batch([1000], wm=1500)  # 1100 <= watermark


def test_timers_need_a_time_mode_and_options_are_checked_early() -> None:
    # TTL in processing time only: refused at the driver's pre-init, as Spark refuses it
    with pytest.raises(StreamscaleError, match="TTL needs time mode ProcessingTime"):
        from_processor(IdleCounter(), "key", time_mode="None")
    fn = from_processor(EventTimer(), "key", time_mode="None")
    with pytest.raises(StreamscaleError, match="timers need time mode"):
        fn(_frame(["a"], 0).assign(ts=5), {}, batch_time_ms=0)
    with pytest.raises(StreamscaleError, match="unknown time mode"):
        from_processor(IdleCounter(), "key", time_mode="wall")
    with pytest.raises(StreamscaleError, match="not a StatefulProcessor"):
        from_processor(lambda rows, state: None, "key")


class Tuples(StatefulProcessor):
    """Spark-style tuple values with a struct schema (DDL), list and map state."""

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def init(self, handle: Any) -> None:
        self.v = handle.getValueState("v", self.schema)
        self.log = handle.getListState("log", "x long")
        self.m = handle.getMapState("m", "page string", "hits long")

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        n = sum(len(f) for f in rows)
        self.log.appendValue((n,))
        self.m.updateValue(("home",), ((self.m.getValue(("home",)) or (0,))[0] + n,))
        yield pd.DataFrame(
            {
                "key": [key[0]],
                "v": [self.v.get()],
                "log": [list(self.log.get())],
                "m": [dict(self.m.iterator())],
            }
        )
        self.v.update((n, "x")[: len(self.schema.split(","))])


def test_struct_values_restore_across_an_added_field(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    state, _ = be.read("op", 0, -1)
    run_batch(Tuples("n long"), "key", _frame(["a", "a"], 0), state, (0, None))
    be.write("op", 0, 0, state)
    be.commit("op", 0)
    state, _ = LocalStateBackend(tmp_path).read("op", 0, 0)
    out = run_batch(Tuples("n long, tag string"), "key", _frame(["a"], 1), state, (1, None))
    assert out is not None
    row = out.iloc[0]
    assert row["v"] == (2, None)  # written as (2,) before the field existed
    assert row["log"] == [(2,), (1,)] and row["m"] == {("home",): (3,)}


def test_changelog_holds_only_the_typed_entries_of_the_keys_touched(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    fn = from_processor(IdleCounter(), "key")
    state, _ = be.read("op", 0, -1)
    fn(_frame([f"k{i}" for i in range(5000)], 0), state, batch_time_ms=0)
    be.write("op", 0, 0, state)
    be.commit("op", 0)
    touched = [f"k{i}" for i in range(0, 5000, 250)]  # 20 keys
    state, _ = be.read("op", 0, 0)
    fn(_frame(touched, 1), state, batch_time_ms=1000)
    be.write("op", 0, 1, state)
    snap, log = (tmp_path / "op" / "0" / "0.pkl"), (tmp_path / "op" / "0" / "1.pkl")
    assert log.stat().st_size * 50 < snap.stat().st_size
    record = pickle.loads(log.read_bytes())
    assert is_log(record)
    keys = {k[3] for k in record[5] if k[0] == "__typed__"} | {
        k[3] for k in record[6] if k[0] == "__typed__"
    }
    assert keys == set(touched)
    # the rest: the timer buckets they left and entered (and the bucket directory)
    assert {k[0] for k in record[5] if k[0] != "__typed__"} <= {"__timers__"}
    assert len([k for k in record[5] if k[0] != "__typed__"]) <= 3


_OPTS = {
    "keys": "60",
    "alpha": "1.2",
    "cost_ms": "0",
    "rate": "1e6",
    "start_time": "0",
    "total": "1800",
    "max_rows_per_batch": "200",
    "seed": "3",
}


def _touched(frames: list[pd.DataFrame]) -> list[set[Any]]:
    """Per batch: the keys with rows or with a timer that fires (from the reference)."""
    return [{r[1] for r in rows} for rows in _reference(frames)]


def _changelog_keys(path: Path) -> set[Any] | None:
    """The grouping keys a stored version changed, or ``None`` for a snapshot."""
    record = pickle.loads(path.read_bytes())
    if not is_log(record):
        return None
    return {k[3] for k in (*record[5], *record[6]) if k[0] == "__typed__"}


@pytest.mark.spark
def test_processor_equals_the_pandas_reference_across_moves_and_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    from streamscale.runtime.spark.compat.state_typed import StatefulHandle
    from streamscale.runtime.spark.keyed.keyed import KeyedSpec, run_keyed
    from streamscale.runtime.spark.routing.routing import PartitionMap, global_shards
    from streamscale.runtime.spark.sources.sources import generate

    frames = [generate(_OPTS, 200 * b, 200 * (b + 1)) for b in range(9)]
    gs = global_shards(map(str, range(60)), 2, 4)
    shard_of = {k: int(g) for k, g in zip(range(60), gs, strict=True)}
    # Timers fire with a shard's rows (the keyed stage calls shards with rows): every
    # shard has rows in every batch here, so the reference needs no such rule.
    assert all({shard_of[int(k)] for k in f["key"]} == set(range(8)) for f in frames)
    want = _reference(frames)
    kinds = [(r[0], r[4]) for rows in want for r in rows]
    assert kinds.count(("idle", False)) >= 10 and ("count", True) in kinds
    plans = ([0, 0, 1, 1, 0, 0, 1, 1], [1, 0, 1, 0, 2, 2, 0, 1], [2, 1, 0, 0, 1, 2, 2, 0])
    root, got, logs = tmp_path / "state", [], {}
    for b, f in enumerate(frames):
        if b in (0, 5):  # (re)start on the same directory, the processor's next version
            # no compaction in 9 batches: every version after the first is a changelog
            backend = LocalStateBackend(root, snapshot_every=100, snapshot_ratio=100.0)
            proc = IdleCounter() if b == 0 else IdleCounterV2()
            fn = from_processor(proc, "key", clock=column_clock("batch_ms"), timer_order="first")
            spec = KeyedSpec("op", "key", 2, 4, fn, {}, (), backend)
        parts = plans[b % 3]
        pmap = PartitionMap("op", 2, 4, tuple(f"u{p}" for p in range(max(parts) + 1)), parts)
        df = spark.createDataFrame(f.assign(batch_ms=b * BATCH_MS))
        out, _ = run_keyed(
            df,
            spec,
            BatchVersion(b, b - 1, pmap),
            dead_letter_dir=str(tmp_path / "dl"),
        )
        got.append(_rows(out.toPandas()))
        backend.commit("op", b)
        logs.update({(b, g): _changelog_keys(root / "op" / str(g) / f"{b}.pkl") for g in range(8)})
    assert got == want
    # Each batch's changelog of a shard holds exactly the typed state of its keys touched.
    for b, keys in enumerate(_touched(frames)):
        if b == 0:
            continue
        for g in range(8):
            assert logs[b, g] == {k for k in keys if shard_of[int(k)] == g}
    # Restored across the added field: CountV1 values read as CountV2 with its default.
    stored = {k: v for st in LocalStateBackend(root).load_all("op").values() for k, v in st.items()}
    h = StatefulHandle(stored, now_ms=9 * BATCH_MS)
    last_seq: dict[str, int] = {}
    for b, f in enumerate(frames):
        for k, g in f.groupby("key"):
            last_seq[k] = int(g["seq"].max()) if b >= 5 else -1
    full = pd.concat(frames).groupby("key")["value"].agg(["count", "sum"])
    for k, row in full.iterrows():
        c = h.setKey(k).getValueState("count", CountV2).get()
        assert (c.n, round(c.total, 9), c.last_seq) == (
            int(row["count"]),
            round(float(row["sum"]), 9),
            last_seq[k],
        )


@pytest.mark.spark
def test_keyed_stream_process_accepts_a_processor(spark: Any) -> None:
    import streamscale

    s = streamscale.stream(spark.readStream.format("rate").load())
    keyed = s.key_by("value", instances=1, shards=2)
    with pytest.raises(StreamscaleError, match=r"process\(IdleCounter\): .* needs time_mode="):
        keyed.process(IdleCounter())  # Spark requires timeMode; so does process()
    out = keyed.process(IdleCounter(), time_mode="ProcessingTime", timer_order="after_input")
    (op,) = [o for o in out.to("none").topology().operators if o.key == "value"]
    fn = out._b.functions[op.name]
    assert op.name == "IdleCounter" and op.params == {}
    assert isinstance(fn.processor, IdleCounter)
    state: dict[Any, Any] = {}
    fn(pd.DataFrame({"value": [7], "seq": [0]}), state, batch_time_ms=0)
    assert list(state) and fn(pd.DataFrame(), state, batch_time_ms=IDLE_MS) is not None


@pytest.mark.spark
def test_on_spark_a_shard_without_rows_fires_its_due_timers_in_that_batch(
    spark, tmp_path: Path
) -> None:
    """The keyed stage calls a batch-clocked processor for every shard of its unit."""
    from streamscale.runtime.spark.keyed.keyed import KeyedSpec, run_keyed
    from streamscale.runtime.spark.routing.routing import PartitionMap, global_shards

    e, z = 1, 4
    keys = [f"k{i}" for i in range(40)]
    shard = dict(zip(keys, global_shards(keys, e, z).tolist(), strict=True))
    quiet = next(k for k in keys if shard[k] != shard["k0"])  # input only in batch 0
    fn = from_processor(IdleCounter(), "key")
    assert fn.batch_clock
    spec = KeyedSpec("idle", "key", e, z, fn, {}, (), LocalStateBackend(tmp_path / "st"))
    pmap = PartitionMap("idle", e, z, ("u0",), (0,) * z)  # one unit serves every shard
    got = []
    for b, (rows, at) in enumerate([(["k0", quiet], 0), (["k0"], IDLE_MS + 1)]):
        pdf = pd.DataFrame({"key": rows, "value": [1.0] * len(rows), "seq": range(len(rows))})
        out, _ = run_keyed(
            spark.createDataFrame(pdf), spec, BatchVersion(b, b - 1, pmap, f"a{b}"),
            dead_letter_dir=str(tmp_path / "dl"),
            batch_time_ms=at,
        )  # fmt: skip
        spec.backend.commit("idle", b)
        got.append(sorted((r["key"], r["kind"], r["at"]) for r in out.collect()))
    assert got[0] == [("k0", "count", 0), (quiet, "count", 0)]
    # batch 1: 'quiet' has no row and its shard none either; its timer (0 + IDLE_MS) fired
    assert (quiet, "idle", IDLE_MS) in got[1] and ("k0", "count", IDLE_MS + 1) in got[1]
