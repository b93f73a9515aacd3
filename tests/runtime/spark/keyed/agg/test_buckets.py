"""A shard's table as hash buckets: stable, every row in one bucket, only changes written,
and read back through real snapshots and changelogs equal to folding everything at once."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.runtime.spark.keyed.agg.accumulators import AggCall
from streamscale.runtime.spark.keyed.agg.buckets import (
    LEGACY_KEY,
    PIECE,
    bucket_log2,
    bucket_of,
    key_hash,
    read_pieces,
    split_buckets,
    store,
    tables_of,
)
from streamscale.runtime.spark.keyed.agg.fold import fold
from streamscale.runtime.spark.keyed.agg.kernels import split_by, to_ipc
from streamscale.runtime.spark.keyed.agg.spec import N_ROWS, AggOp
from streamscale.runtime.spark.state.state_local import LocalStateBackend
from streamscale.runtime.spark.state.state_log import TrackedDict, is_log

KEYS = ("k", "j")


def _groups(n: int, seed: int = 1) -> pa.Table:
    """``n`` groups: a string key (some null), an int key, two accumulators."""
    rng = np.random.default_rng(seed)
    k = [None if i % 97 == 0 else f"user-{i}" for i in range(n)]
    return pa.table(
        {
            "k": pa.array(k, pa.string()),
            "j": pa.array(np.arange(n) % 3, pa.int64()),
            "n": pa.array(rng.integers(1, 9, n), pa.int64()),
            "x": pa.array(rng.normal(size=n), pa.float64()),
        }
    )


def _sorted(t: pa.Table) -> pd.DataFrame:
    df = t.to_pandas()
    return df.sort_values(list(df.columns), na_position="first").reset_index(drop=True)


def test_equal_keys_hash_alike_whatever_surrounds_them() -> None:
    t = _groups(500)
    h = key_hash(t, KEYS)
    # another order, other neighbours, several chunks, a slice, large_string, dictionary
    perm = np.random.default_rng(2).permutation(500)
    shuffled = t.take(pa.array(perm))
    assert (key_hash(shuffled, KEYS) == h[perm]).all()
    chunked = pa.concat_tables([t.slice(0, 123), t.slice(123)])
    assert chunked.column("k").num_chunks == 2 and (key_hash(chunked, KEYS) == h).all()
    assert (key_hash(t.slice(40, 60), KEYS) == h[40:100]).all()
    large = t.set_column(0, "k", t.column("k").cast(pa.large_string()))
    assert (key_hash(large, KEYS) == h).all()
    dictionary = t.set_column(0, "k", t.column("k").dictionary_encode())
    assert (key_hash(dictionary, KEYS) == h).all()
    # a value hashes alike in a column with or without nulls; -0.0 is 0.0, NaNs are one
    a = pa.table({"v": pa.array([1, 2, 3], pa.int64())})
    b = pa.table({"v": pa.array([None, 2, 1], pa.int64())})
    assert (
        key_hash(a, ["v"])[0] == key_hash(b, ["v"])[2]
        and key_hash(a, ["v"])[1] == (key_hash(b, ["v"])[1])
    )
    f = key_hash(pa.table({"v": [0.0, -0.0, float("nan"), -float("nan"), None]}), ["v"])
    assert f[0] == f[1] and f[2] == f[3] and len(set(f.tolist())) == 3
    # distinct values of every kind of key get distinct hashes here
    for col in (
        pa.array(["", "a", "b", "ab", "ba", "\x00", None]),
        pa.array([b"", b"\x00", b"\x00\x00", None], pa.binary()),
        pa.array([0, 1, -1, 2**40, None], pa.int64()),
        pa.array([0, 1, -1, None], pa.int8()),
        pa.array([True, False, None]),
        pa.array([0, 10**6, None], pa.timestamp("us", tz="UTC")),
        pa.array([1, 2, None], pa.date32()),
        pa.array(["1.5", "2.25", "-1", None]).cast(pa.decimal128(10, 2)),
        pa.array([{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, None]),
        pa.array([[1, 2], [2, 1], [], None]),
        pa.array(["a", "b", "", None]).cast(pa.string_view()),
        pa.array([pa.MonthDayNano([1, 2, 3]), pa.MonthDayNano([1, 2, 4]), None]),
        pa.array(["x" * i for i in range(200)] + ["y" * 100, "x" * 99 + "y", None]),
    ):
        hs = key_hash(pa.table({"v": col}), ["v"])
        assert len(set(hs.tolist())) == len(col), col.type
    # short (as words) and long (polynomial) values: alike in any array holding them
    mixed = pa.table({"v": [f"{i:x}" * (i % 40) for i in range(2000)]})
    hm = key_hash(mixed, ["v"])
    assert (key_hash(mixed.take(pa.array(perm[perm < 2000])), ["v"]) == hm[perm[perm < 2000]]).all()
    assert (key_hash(mixed.slice(700, 50), ["v"]) == hm[700:750]).all()
    # the key's columns all count, and in their order
    two = pa.table({"a": [1, 2], "b": [2, 1]})
    ab, ba = key_hash(two, ["a", "b"]), key_hash(two, ["b", "a"])
    assert ab[0] != ab[1] and ab[0] == ba[1]


def test_the_hash_is_the_same_in_another_process() -> None:
    t = _groups(300)
    code = (
        "import pickle, sys; from streamscale.runtime.spark.keyed.agg.buckets import key_hash; "
        "t = pickle.loads(sys.stdin.buffer.read()); "
        "sys.stdout.buffer.write(pickle.dumps(key_hash(t, ['k', 'j'])))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(t), capture_output=True, env=env,
        check=True, timeout=120,
    )  # fmt: skip
    assert (pickle.loads(out.stdout) == key_hash(t, KEYS)).all()


def test_every_row_lands_in_exactly_one_bucket_with_its_key_and_round_trips() -> None:
    t = _groups(4000)
    twice = pa.concat_tables([t, t.slice(0, 1000)])  # rows sharing a key (a join's state)
    parts = split_buckets(twice, KEYS, 4)
    assert set(parts) <= set(range(16)) and len(parts) == 16
    assert sum(p.num_rows for p in parts.values()) == twice.num_rows
    ids = bucket_of(twice, KEYS, 4)
    # brute force: each bucket holds exactly the rows whose key maps to it; rows of one
    # key keep their order, and a bucket's rows do not depend on the table's row order
    distinct = t.filter(t.column("k").is_valid())  # (null k with equal j: one key)
    perm = np.random.default_rng(3).permutation(distinct.num_rows)
    shuffled = split_buckets(distinct.take(pa.array(perm)), KEYS, 4)
    alone = split_buckets(distinct, KEYS, 4)
    for i, p in parts.items():
        assert _sorted(p).equals(_sorted(twice.filter(pa.array(ids == i))))
        assert alone[i].equals(shuffled[i])
    seq = pa.table({"k": ["a", "b", "a", "a", "b"], "j": [1, 1, 1, 1, 1], "n": [1, 2, 3, 4, 5]})
    by_key = {t["k"][0].as_py(): t["n"].to_pylist() for t in split_buckets(seq, KEYS, 6).values()}
    assert by_key == {"a": [1, 3, 4], "b": [2, 5]} or set(by_key) == {"a"}  # a, b may collide
    owner = pd.DataFrame({"k": twice.column("k").to_pylist(), "j": twice.column("j").to_numpy(),
                          "b": ids}).fillna({"k": "<null>"})  # fmt: skip
    assert (owner.groupby(["k", "j"])["b"].nunique() == 1).all()
    counts = np.bincount(bucket_of(t, KEYS, 4), minlength=16)
    assert counts.min() > 4000 / 16 * 0.7 and counts.max() < 4000 / 16 * 1.3
    # round trip through a state dict: the same rows, up to their order
    state = TrackedDict()
    assert store(state, twice, KEYS, {}, bucket_bytes=4096) == len(state) > 1
    back = pa.concat_tables(tables_of(read_pieces(state)))
    assert _sorted(back).equals(_sorted(twice))
    assert split_buckets(t.slice(0, 0), KEYS, 4) == {}
    assert split_buckets(t, KEYS, 0)[0] is t


def test_bucket_count_follows_size_with_one_doubling_of_slack() -> None:
    kib = 1024
    assert bucket_log2(0) == 0 and bucket_log2(16 * kib, bucket_bytes=16 * kib) == 0
    assert bucket_log2(16 * kib + 1, bucket_bytes=16 * kib) == 1
    assert bucket_log2(48 * kib, bucket_bytes=16 * kib) == 2  # 3 buckets' worth: 4
    assert bucket_log2(48 * kib, 1, bucket_bytes=16 * kib) == 1  # kept
    assert bucket_log2(48 * kib, 3, bucket_bytes=16 * kib) == 3  # kept
    assert bucket_log2(48 * kib, 4, bucket_bytes=16 * kib) == 2  # shrunk
    assert bucket_log2(10**12, bucket_bytes=1) == 12  # capped


def test_a_batch_sets_only_the_buckets_whose_rows_changed() -> None:
    t = _groups(5000)
    state = TrackedDict()
    store(state, t, KEYS, {}, bucket_bytes=2048)
    n = len(state)
    want_n = 1 << bucket_log2(t.nbytes, bucket_bytes=2048)
    assert n == want_n >= 64 and all(k[0] == PIECE and k[1] == want_n for k in state)
    state.reset()
    pieces = read_pieces(state)
    assert not state.dirty  # reading sets nothing
    # the table read back, with two groups' values changed and one new group
    table = pa.concat_tables(tables_of(pieces))
    x = table.column("x").to_numpy().copy()
    k = table.column("k").to_pylist()
    hit = [k.index("user-10"), k.index("user-4321")]
    x[hit] += 1.0
    table = table.set_column(3, "x", pa.array(x))
    new = pa.table({"k": ["fresh"], "j": pa.array([7], pa.int64()), "n": pa.array([1], pa.int64()),
                    "x": [0.5]})  # fmt: skip
    table = pa.concat_tables([table, new])
    written = store(state, table, KEYS, pieces, bucket_bytes=2048)
    # brute force: the buckets holding the changed and the new groups, nothing else
    want = {key for key, p in pieces.items() if {"user-10", "user-4321"} & set(p["k"].to_pylist())}
    fresh = [key for key, p in read_pieces(state).items() if "fresh" in p["k"].to_pylist()]
    assert written == len(state.dirty) == len(want | set(fresh)) <= 3
    assert state.dirty == want | set(fresh) and len(state) in (n, n + 1)
    # the same table again (NaN values included) changes nothing
    with_nan = table.set_column(3, "x", pa.array(np.where(np.arange(len(x) + 1) % 7 == 0,
                                                          np.nan, table["x"].to_numpy())))  # fmt: skip
    store(state, with_nan, KEYS, read_pieces(state), bucket_bytes=2048)
    state.reset()
    assert store(state, with_nan, KEYS, read_pieces(state), bucket_bytes=2048) == 0
    assert not state.dirty


def test_emptied_buckets_and_shards_are_deleted_and_a_resize_replaces_all() -> None:
    t = _groups(3000)
    state = TrackedDict()
    store(state, t, KEYS, {}, bucket_bytes=4096)
    before = set(state)
    gone = t.filter(pa.array(bucket_of(t, KEYS, len(before).bit_length() - 1) != 0))
    store(state, gone, KEYS, read_pieces(state), bucket_bytes=4096)
    assert set(state) == before - {(PIECE, len(before), 0)}
    # shrinking to a few groups: one bucket, every old entry deleted
    store(state, t.slice(0, 5), KEYS, read_pieces(state), bucket_bytes=4096)
    assert list(state) == [(PIECE, 1, 0)]
    assert _sorted(pa.concat_tables(tables_of(read_pieces(state)))).equals(_sorted(t.slice(0, 5)))
    store(state, None, KEYS, read_pieces(state))
    assert state == {} and read_pieces(state) == {}


def test_a_shard_stored_as_one_blob_is_read_and_converted_by_its_first_write() -> None:
    t = _groups(3000)
    state = TrackedDict({LEGACY_KEY: to_ipc(t)})
    pieces = read_pieces(state)
    assert list(pieces) == [LEGACY_KEY] and pieces[LEGACY_KEY].equals(t)
    store(state, t, KEYS, pieces, bucket_bytes=4096)
    assert LEGACY_KEY not in state and len(state) > 1
    assert _sorted(pa.concat_tables(tables_of(read_pieces(state)))).equals(_sorted(t))
    # buckets written under another schema are read as their own table
    mixed = TrackedDict({(PIECE, 2, 0): to_ipc(t.slice(0, 3)),
                         (PIECE, 2, 1): to_ipc(t.slice(3, 2).cast(
                             t.schema.set(1, pa.field("j", pa.int32()))))})  # fmt: skip
    assert sorted(x.num_rows for x in tables_of(read_pieces(mixed))) == [2, 3]


# --- batches through real snapshots and changelogs -----------------------------------------

OP = AggOp(("k",), (AggCall("count", "n", 0), AggCall("max", "m", 1), AggCall("sum", "s", 2)),
           "update", None, ("k", "n", "m", "s"))  # fmt: skip
S = "__shard"


def _partial(rows: list[tuple[int, int, int]]) -> pa.Table:
    """One batch's partial aggregates of input rows (shard, key, value)."""
    df = pd.DataFrame(rows, columns=["g", "k", "v"])
    p = df.groupby(["g", "k"]).agg(n=("v", "size"), m=("v", "max"), s=("v", "sum")).reset_index()
    return pa.table(
        {
            S: pa.array(p["g"], pa.int64()),
            "k": pa.array([f"key{v}" for v in p["k"]], pa.string()),
            "__a0": pa.array(p["n"], pa.int64()),
            "__a1": pa.array(p["m"], pa.int64()),
            "__a2": pa.array(p["s"], pa.int64()),
            N_ROWS: pa.array(p["n"], pa.int64()),
        }
    )


def _run_batches(root: Path, batches: list[list[tuple[int, int, int]]], bucket_bytes: int) -> None:
    """Each batch as a reduce task runs it: read the shards' latest committed versions,
    fold, set the changed buckets, write version ``b``, commit."""
    backend = LocalStateBackend(root, snapshot_every=4)
    for b, rows in enumerate(batches):
        part = _partial(rows)
        shards = sorted({r[0] for r in rows})
        got = backend.read_many("op", shards, b - 1)
        dicts = {g: st for g, (st, _) in got.items()}
        pieces = {g: read_pieces(dicts[g]) for g in shards}
        tables = [
            t.append_column(S, pa.array(np.full(t.num_rows, g, np.int64)))
            for g in shards
            for t in tables_of(pieces[g])
        ]
        f = fold(tables, part, OP, shard=S)
        parts = split_by(f.state, S) if f.state is not None else {}
        for g in f.changed:
            store(dicts[g], parts.get(g), OP.keys, pieces[g], bucket_bytes=bucket_bytes)
        backend.write_many("op", b, {g: dicts[g] for g in f.changed})
        backend.commit("op", b)


_ROWS = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 300), st.integers(-50, 50)),
                 min_size=1, max_size=60)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(_ROWS, min_size=1, max_size=8), bucket_bytes=st.sampled_from([64, 512]))
def test_batches_read_back_through_changelogs_equal_folding_them_all_at_once(
    batches: list[list[tuple[int, int, int]]], bucket_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _run_batches(root, batches, bucket_bytes)
        fresh = LocalStateBackend(root)  # a restart: nothing cached, versions from disk
        back = {g: st for g, st in fresh.load_all("op").items()}
        got = [t.append_column(S, pa.array(np.full(t.num_rows, g, np.int64)))
               for g, st in back.items() for t in tables_of(read_pieces(st))]  # fmt: skip
        everything = [r for rows in batches for r in rows]
        once = fold([], _partial(everything), OP, shard=S).state
        assert once is not None
        cols = [S, "k", "__a0", "__a1", "__a2"]
        assert _sorted(pa.concat_tables(got).select(cols)).equals(_sorted(once.select(cols)))
        # and against pandas over the raw rows
        df = pd.DataFrame(everything, columns=["g", "k", "v"])
        ref = df.groupby(["g", "k"])["v"].agg(["size", "max", "sum"]).reset_index()
        ref_rows = {(int(g), f"key{k}", int(n), int(m), int(s)) for g, k, n, m, s in
                    ref.itertuples(index=False)}  # fmt: skip
        rows = pa.concat_tables(got).select(cols).to_pylist()
        assert {tuple(r.values()) for r in rows} == ref_rows and len(rows) == len(ref_rows)


def test_many_batches_leave_changelogs_of_a_few_buckets_on_disk(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    first = [(0, k, 1) for k in range(20_000)]
    later = [[(0, int(k), 2) for k in rng.integers(0, 20_000, 3)] for _ in range(3)]
    _run_batches(tmp_path, [first, *later], 16 * 1024)
    shard = tmp_path / "op" / "0"
    sizes = {int(p.stem): p.stat().st_size for p in shard.glob("*.pkl")}
    kinds = {v: is_log(pickle.loads((shard / f"{v}.pkl").read_bytes())) for v in sizes}
    assert kinds == {0: False, 1: True, 2: True, 3: True}
    for v in (1, 2, 3):
        assert sizes[v] < 0.1 * sizes[0], sizes


@pytest.mark.parametrize("n", [1, 7])
def test_a_one_bucket_shard_writes_one_entry(n: int) -> None:
    state = TrackedDict()
    assert store(state, _groups(n), KEYS, {}) == 1 and list(state) == [(PIECE, 1, 0)]
