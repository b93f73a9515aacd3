"""Versioned shard state: exactly-once through idempotent versions (no Spark needed)."""

from __future__ import annotations

import pickle
from pathlib import Path

from streamscale.runtime.spark.state import LocalStateBackend, StateBackend, VersionIndex


def _process(be: LocalStateBackend, batch: int, keys: list[str], *, commit: bool = True) -> None:
    """What a batch does to one shard: read the input version, apply, write, commit."""
    upto = min(batch - 1, be.committed("op"))
    state, _ = be.read("op", 0, upto)
    for k in keys:
        state[k] = state.get(k, 0) + 1
    be.write("op", 0, batch, state)
    if commit:
        be.commit("op", batch)


def test_empty_shard_reads_as_empty(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    assert be.read("op", 3, 10) == ({}, None)
    assert be.committed("op") == -1
    assert be.load_all("op") == {}
    assert isinstance(be, StateBackend)


def test_reads_newest_version_not_above_upto(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    be.write("op", 1, 2, {"a": 1})
    be.write("op", 1, 5, {"a": 2})
    assert be.read("op", 1, 4) == ({"a": 1}, 2)
    assert be.read("op", 1, 5) == ({"a": 2}, 5)
    assert be.read("op", 1, 1) == ({}, None)


def test_replaying_a_committed_batch_does_not_double_apply(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    _process(be, 0, ["a", "b"])
    _process(be, 1, ["a"])
    _process(be, 2, ["a", "c"])
    before = be.load_all("op")
    assert before == {0: {"a": 3, "b": 1, "c": 1}}
    _process(be, 2, ["a", "c"])  # Spark re-runs batch 2 after a crash before its commit log
    assert be.load_all("op") == before


def test_failed_batch_is_not_visible_and_its_retry_applies_once(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    _process(be, 0, ["a"])
    _process(be, 1, ["a"], commit=False)  # tasks wrote version 1, the batch then failed
    assert be.load_all("op") == {0: {"a": 1}}
    _process(be, 1, ["a"])
    _process(be, 2, ["a"])
    assert be.load_all("op") == {0: {"a": 3}}


def test_old_versions_are_collected_but_the_replay_input_is_kept(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    for b in range(6):
        _process(be, b, ["a"])
    files = sorted(p.name for p in (tmp_path / "op" / "0").iterdir())
    assert files == ["4.pkl", "5.pkl"]
    _process(be, 5, ["a"])  # the replay of the last batch still finds version 4
    assert be.load_all("op") == {0: {"a": 6}}


def test_backend_pickles_by_root(tmp_path: Path) -> None:
    be = pickle.loads(pickle.dumps(LocalStateBackend(tmp_path)))
    be.write("op", 0, 0, {"x": 1})
    be.commit("op", 0)
    assert LocalStateBackend(tmp_path).load_all("op") == {0: {"x": 1}}


def test_version_index_hints_the_input_version_and_what_to_drop(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    for b in (0, 2, 3):
        be.write("op", 1, b, {"b": b})
    idx = VersionIndex(be, "op", 3)
    hints, drops = idx.hints(2)  # a replay of batch 3 reads version 2
    assert hints == ((-1, None), (2, None), (-1, None))
    assert drops[1] == (0,)
    be.write("op", 1, 3, {"b": 3}, attempt="att", drop=drops[1])
    be.write("op", 2, 3, {"b": 3}, attempt="att", drop=drops[2])
    assert be.versions("op", 1) == [2, 3]
    idx.committed(3, "att", [1, 2], hints)
    hints, drops = idx.hints(3)
    assert hints == ((-1, None), (3, "att"), (3, "att"))
    assert drops[1] == (2,)
    assert be.read("op", 1, 3, hints[1]) == ({"b": 3}, 3)
    be.write("op", 1, 4, {"b": 4}, attempt="n", drop=drops[1])
    assert be.versions("op", 1) == [3, 4]


def test_worker_cache_is_used_only_for_the_exact_attempt(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    be.write("op", 0, 1, {"n": 1}, attempt="failed")
    LocalStateBackend(tmp_path).write("op", 0, 1, {"n": 2})  # the retry, in another worker
    assert be.read("op", 0, 1, (1, "retry")) == ({"n": 2}, 1)
    be.write("op", 0, 2, {"n": 3}, attempt="a")
    state, _ = be.read("op", 0, 2, (2, "a"))
    state["n"] = 99  # a function mutates the state, then the batch fails
    assert be.read("op", 0, 2, (2, "a")) == ({"n": 3}, 2)
