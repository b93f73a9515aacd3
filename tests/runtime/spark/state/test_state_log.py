"""Incremental state: changelogs on a snapshot, compaction, collection, exact replay."""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

from streamscale.runtime.spark.state.state import LocalStateBackend, VersionIndex
from streamscale.runtime.spark.state.state_log import TrackedDict


def _batch(state: dict[Any, Any], b: int, rng: random.Random, keys: int) -> None:
    """One batch of a keyed function: counters, in-place lists, deletes."""
    for _ in range(20):
        k = rng.randrange(keys)
        op = rng.random()
        if op < 0.6:
            state[k] = state.get(k, 0) + 1 if not isinstance(state.get(k), list) else [b]
        elif op < 0.8:
            acc = state.get(("list", k))
            if acc is None:
                acc = state[("list", k)] = []
            acc.append(b)  # mutated in place, never re-assigned
        elif op < 0.9:
            state.pop(k, None)
        else:
            state.setdefault(("seen", k), b)


def _run(be: LocalStateBackend, ref: dict[Any, Any], batches: range, seed: int) -> None:
    index = VersionIndex(be, "op", 1)
    for b in batches:
        upto = min(b - 1, be.committed("op"))
        hints, drops = index.hints(upto)
        state, _ = be.read("op", 0, upto, hints[0])
        assert state == ref  # every read reconstructs the reference exactly
        rng = random.Random(seed * 1000 + b)
        _batch(state, b, rng, 5000)
        _batch(ref, b, random.Random(seed * 1000 + b), 5000)
        be.write("op", 0, b, state, attempt=f"a{b}", drop=drops[0])
        be.commit("op", b)
        index.committed(b, f"a{b}", [0], hints)


def _big(n: int) -> dict[Any, Any]:
    return {k: k * 3 for k in range(n)}


def test_a_batch_writes_only_what_it_changed_and_recovers_exactly(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path, snapshot_every=8)
    ref = _big(5000)
    be.write("op", 0, 0, TrackedDict(ref), attempt="a0")
    be.commit("op", 0)
    ref = dict(ref)
    full = be.bytes_written
    _run(be, ref, range(1, 30), seed=1)
    per_batch = (be.bytes_written - full) / 29
    assert per_batch < 0.15 * full  # snapshots every 8 batches, changelogs between
    names = sorted(p.name for p in (tmp_path / "op" / "0").iterdir())
    assert len(names) <= 9  # old chains collected after commit
    # A fresh process (no cache, no index): snapshot + changelogs == the reference.
    assert LocalStateBackend(tmp_path).load_all("op") == {0: ref}


def test_replayed_batch_overwrites_its_own_changelog(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    ref = _big(3000)
    be.write("op", 0, 0, TrackedDict(ref))
    be.commit("op", 0)
    for b in (1, 2):
        state, _ = be.read("op", 0, b - 1)
        state[b] = "x"
        be.write("op", 0, b, state)
        be.commit("op", b)
    state, _ = LocalStateBackend(tmp_path).read("op", 0, 1)  # Spark replays batch 2
    state[2] = "x"
    be2 = LocalStateBackend(tmp_path)
    state2, _ = be2.read("op", 0, 1)
    state2[2] = "x"
    be2.write("op", 0, 2, state2)
    expect = {**ref, 1: "x", 2: "x"}
    assert LocalStateBackend(tmp_path).load_all("op") == {0: expect}
    header = pickle.loads((tmp_path / "op" / "0" / "2.pkl").read_bytes())
    assert isinstance(header, tuple)  # a changelog, not a full copy


def test_iterating_mutable_values_or_returning_a_new_dict_writes_a_snapshot(
    tmp_path: Path,
) -> None:
    be = LocalStateBackend(tmp_path)
    be.write("op", 0, 0, TrackedDict({k: [k] for k in range(2000)}))
    state, _ = be.read("op", 0, 0)
    for v in state.values():
        v.append(-1)  # every list changed through the view: the dirty set cannot tell
    be.write("op", 0, 1, state)
    assert isinstance(pickle.loads((tmp_path / "op" / "0" / "1.pkl").read_bytes()), dict)
    assert LocalStateBackend(tmp_path).read("op", 0, 1)[0] == {k: [k, -1] for k in range(2000)}
    state, _ = be.read("op", 0, 1)
    be.write("op", 0, 2, {"new": 1})  # the function returned another dict
    assert LocalStateBackend(tmp_path).read("op", 0, 2)[0] == {"new": 1}


def test_worker_cache_round_trip_keeps_changelogs_exact(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    ref = _big(4000)
    be.write("op", 0, 0, TrackedDict(ref), attempt="a0")
    be.commit("op", 0)
    _run(be, dict(ref), range(1, 6), seed=7)
    # the same process read its cached state; a fresh reader agrees byte for byte
    assert LocalStateBackend(tmp_path).load_all("op") == be.load_all("op")


def test_snapshot_options_come_from_the_url(tmp_path: Path) -> None:
    from streamscale.runtime.spark.state.state import state_backend

    be = state_backend(f"{tmp_path}?snapshot_every=3&snapshot_ratio=0.25")
    assert isinstance(be, LocalStateBackend)
    assert (be.snapshot_every, be.snapshot_ratio) == (3, 0.25)
    again = pickle.loads(pickle.dumps(be))
    assert (again.snapshot_every, again.snapshot_ratio) == (3, 0.25)


def test_a_moved_shard_reads_its_chain_from_the_store_a_kept_one_reads_nothing(
    tmp_path: Path,
) -> None:
    be = LocalStateBackend(tmp_path)
    be.write("op", 0, 0, TrackedDict(_big(2000)), attempt="a0")
    be.commit("op", 0)
    state, _ = be.read("op", 0, 0, (0, "a0"))
    state[1] = -1
    be.write("op", 0, 1, state, attempt="a1")
    be.commit("op", 1)
    before = be.bytes_read
    be.read("op", 0, 1, (1, "a1"))  # the same worker keeps the shard: cache hit
    assert be.bytes_read == before
    elsewhere = LocalStateBackend(tmp_path)  # the shard moved to another executor
    state, _ = elsewhere.read("op", 0, 1, (1, "a1"))
    files = sum(p.stat().st_size for p in (tmp_path / "op" / "0").glob("*.pkl"))
    assert elsewhere.bytes_read == files and state == {**_big(2000), 1: -1}
