"""Versioned shard state: exactly-once through idempotent versions (no Spark needed)."""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state import (
    LocalStateBackend,
    StateBackend,
    VersionIndex,
    state_backend,
)


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


def test_a_deleted_committed_version_fails_naming_operator_shard_and_path(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    for b in range(3):
        _process(be, b, ["a"])
    idx = VersionIndex(be, "op", 1)
    hints, _ = idx.hints(be.committed("op"))
    (tmp_path / "op" / "0" / "2.pkl").unlink()  # the shard's committed version is lost
    with pytest.raises(StreamscaleError) as err:
        LocalStateBackend(tmp_path).read("op", 0, 2, hints[0])
    msg = str(err.value)
    assert "'op'" in msg and "shard 0" in msg and str(tmp_path / "op" / "0" / "2.pkl") in msg
    assert "\n" not in msg


def test_a_truncated_version_fails_instead_of_reading_empty(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    _process(be, 0, ["a", "b"])
    f = tmp_path / "op" / "0" / "0.pkl"
    f.write_bytes(f.read_bytes()[:5])
    with pytest.raises(StreamscaleError, match="shard 0: version 0 is unreadable"):
        LocalStateBackend(tmp_path).load_all("op")


def test_fsync_backend_by_url_round_trips_and_pickles(tmp_path: Path) -> None:
    be = state_backend(f"file://{tmp_path}?fsync=1")
    assert isinstance(be, LocalStateBackend) and be.fsync
    be = pickle.loads(pickle.dumps(be))
    assert be.fsync
    _process(be, 0, ["a"])
    _process(be, 1, ["a", "b"])
    assert state_backend(tmp_path).load_all("op") == {0: {"a": 2, "b": 1}}
    assert not list((tmp_path / "op").rglob("*.tmp"))


@pytest.mark.parametrize("url", ["s3x://bucket/p", "file:///tmp/x?nope=1", "file://"])
def test_bad_backend_urls_are_one_line_errors(url: str) -> None:
    with pytest.raises(StreamscaleError) as err:
        state_backend(url)
    assert url in str(err.value) and "\n" not in str(err.value)


# A driver loop over the backend, killed with SIGKILL at a named point of one
# batch; batches are deterministic, so the reference is a plain dict replay.
_DRIVER = r"""
import os, signal, sys
from streamscale.runtime.spark.state import VersionIndex, state_backend
url, kill_batch, point, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
be, shards = state_backend(url), 3
def die(at, b):
    if b == kill_batch and at == point:
        os.kill(os.getpid(), signal.SIGKILL)
index = VersionIndex(be, "op", shards)
for b in range(be.committed("op") + 1, batches):
    upto = min(b - 1, be.committed("op"))
    hints, drops = index.hints(upto)
    die("before_write", b)
    for g in range(shards):
        state, _ = be.read("op", g, upto, hints[g])
        for i in range(10):
            k = (b * 7 + i * 3 + g) % 17
            state[k] = state.get(k, 0) + b + i
        be.write("op", g, b, state, attempt=str(b), drop=drops[g])
        if g == 0:
            die("mid_write", b)
    die("after_write", b)
    be.commit("op", b)
    index.committed(b, str(b), range(shards), hints)
    die("after_commit", b)
"""


def _reference(batches: int, shards: int = 3) -> dict[int, dict[int, int]]:
    ref: dict[int, dict[int, int]] = {g: {} for g in range(shards)}
    for b in range(batches):
        for g in range(shards):
            for i in range(10):
                k = (b * 7 + i * 3 + g) % 17
                ref[g][k] = ref[g].get(k, 0) + b + i
    return ref


KILL_POINTS = ("before_write", "mid_write", "after_write", "after_commit")


def check_sigkill(url: str, point: str) -> None:
    """Kill the driver loop at ``point`` of batch 3, check, restart, check again."""
    cmd = [sys.executable, "-c", _DRIVER, url, "3", point, "6"]
    killed = subprocess.run(cmd, check=False)
    assert killed.returncode == -signal.SIGKILL
    committed = state_backend(url).committed("op")
    assert committed == (3 if point == "after_commit" else 2)
    # What was committed is readable and exact; the uncommitted batch left no trace.
    assert state_backend(url).load_all("op") == _reference(committed + 1)
    subprocess.run([*cmd[:4], "-1", "never", "6"], check=True)  # restart: replay, go on
    assert state_backend(url).load_all("op") == _reference(6)


@pytest.mark.parametrize("point", KILL_POINTS)
def test_state_is_exact_across_sigkill_at_each_point_of_a_batch(tmp_path: Path, point: str) -> None:
    check_sigkill(f"file://{tmp_path}?fsync=1", point)
