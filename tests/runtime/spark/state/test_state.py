"""Versioned shard state: exactly-once through idempotent versions (no Spark needed)."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.routing.routing import PartitionMap
from streamscale.runtime.spark.state.state import (
    LocalStateBackend,
    StateBackend,
    VersionIndex,
    state_backend,
)
from streamscale.runtime.spark.state.state_log import is_log


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


def _pmap(shards: int) -> PartitionMap:
    """Every shard of one instance on one unit."""
    return PartitionMap("op", 1, shards, ("op[0]#0",), (0,) * shards)


def test_a_batch_version_reads_the_last_commit_and_a_replay_gets_a_new_attempt(
    tmp_path: Path,
) -> None:
    be = LocalStateBackend(tmp_path)
    idx = VersionIndex(be, "op", 2)
    pmap = PartitionMap("op", 1, 2, ("op[0]#0",), (0, 0))
    v0 = idx.version(0, pmap)
    assert (v0.batch_id, v0.upto, v0.pmap, v0.hints) == (0, -1, pmap, ((-1, None),) * 2)
    be.write("op", 1, 0, {"n": 1}, attempt=v0.attempt)
    idx.commit(v0, [1])
    assert be.committed("op") == 0
    v1 = idx.version(1, pmap)
    assert v1.upto == 0 and v1.hints == ((-1, None), (0, v0.attempt))
    be.write("op", 1, 1, {"n": 2}, attempt=v1.attempt)  # batch 1 fails before its commit
    again = idx.version(1, pmap)  # its replay reads the same input under a new attempt
    assert again.upto == 0 and again.hints == v1.hints and again.attempt != v1.attempt
    assert len({v0.attempt, v1.attempt, again.attempt}) == 3
    later = idx.version(5, pmap)  # a batch after a gap reads the last commit, not b - 1
    assert later.upto == 0


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


def test_the_commit_marker_names_each_shards_newest_version(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    idx = VersionIndex(be, "op", 3)
    for b in range(3):
        v = idx.version(b, _pmap(3))
        be.write("op", 0, b, {"b": b}, attempt=v.attempt, drop=v.drops[0])
        written = [0, 1] if b == 1 else [0]
        if b == 1:
            be.write("op", 1, b, {"b": b}, attempt=v.attempt)
        idx.commit(v, written)
    assert be.committed_versions("op") == (2, [2, 1, -1])
    assert be.committed("op") == 2
    again = VersionIndex(LocalStateBackend(tmp_path), "op", 3)  # a restart: from the store
    assert again.hints(2)[0] == ((2, None), (1, None), (-1, None))


def test_a_version_no_commit_named_is_not_an_input(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    idx = VersionIndex(be, "op", 2)
    v = idx.version(0, _pmap(2))
    be.write("op", 0, 0, {"n": 1}, attempt=v.attempt)
    idx.commit(v, [0])
    be.write("op", 1, 1, {"n": 9}, attempt="failed")  # batch 1 failed before its commit
    be.write("op", 0, 1, {"n": 9}, attempt="failed")
    idx = VersionIndex(LocalStateBackend(tmp_path), "op", 2)  # the restart
    v = idx.version(1, _pmap(2))
    assert v.upto == 0
    be.write("op", 0, 1, {"n": 2}, attempt=v.attempt)  # batch 1 again: only shard 0 this time
    idx.commit(v, [0])
    assert be.committed_versions("op") == (1, [1, -1])
    assert idx.hints(1)[0] == ((1, v.attempt), (-1, None))  # shard 1's failed one is no input


def test_a_lost_version_the_commit_marker_names_is_refused_at_start(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    idx = VersionIndex(be, "op", 1)
    for b in range(3):
        v = idx.version(b, _pmap(1))
        be.write("op", 0, b, {"b": b}, attempt=v.attempt)  # older versions kept: 0, 1, 2
        idx.commit(v, [0])
    lost = tmp_path / "op" / "0" / "2.pkl"
    lost.unlink()  # version 1 is still there: it must not be read in its place
    with pytest.raises(StreamscaleError) as err:
        VersionIndex(LocalStateBackend(tmp_path), "op", 1)
    msg = str(err.value)
    assert str(lost) in msg and "commit of batch 2" in msg and "\n" not in msg


def test_a_commit_marker_of_the_batch_number_alone_still_reads(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    _process(be, 0, ["a"])
    assert (tmp_path / "op" / "_committed").read_text() == "0"
    assert be.committed_versions("op") == (0, None)
    assert VersionIndex(be, "op", 1).hints(0)[0] == ((0, None),)


def test_an_unreadable_commit_marker_is_one_line_naming_it(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    _process(be, 0, ["a"])
    (tmp_path / "op" / "_committed").write_text('{"batch": 3')
    with pytest.raises(StreamscaleError) as err:
        be.committed("op")
    assert str(tmp_path / "op" / "_committed") in str(err.value)
    assert "\n" not in str(err.value)


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
import json, os, signal, sys
from streamscale.runtime.spark.state.state import VersionIndex, state_backend
url, kill_batch, point, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
out = sys.argv[5]
be, shards = state_backend(url), 3
def die(at, b):
    if b == kill_batch and at == point:
        os.kill(os.getpid(), signal.SIGKILL)
index = VersionIndex(be, "op", shards)
for b in range(be.committed("op") + 1, batches):
    upto = min(b - 1, be.committed("op"))
    hints, drops = index.hints(upto)
    die("before_write", b)
    changed = {}
    for g in range(shards):
        state, _ = be.read("op", g, upto, hints[g])
        for i in range(10):
            k = (b * 7 + i * 3 + g) % 17
            state[k] = state.get(k, 0) + b + i
            changed.setdefault(g, {})[k] = state[k]
        be.write("op", g, b, state, attempt=str(b), drop=drops[g])
        if g == 0:
            die("mid_write", b)
            die("mid_compaction", b)
    die("after_write", b)
    # outputs: one file per shard under batch=<b>/, each written whole then renamed, so a
    # replayed batch overwrites its own files (the sinks' per-batch-id idempotence)
    d = os.path.join(out, f"batch={b}")
    os.makedirs(d, exist_ok=True)
    for g in range(shards):
        tmp = os.path.join(d, f".part-{g}.tmp")
        with open(tmp, "w") as f:
            json.dump({str(k): v for k, v in sorted(changed[g].items())}, f)
        os.replace(tmp, os.path.join(d, f"part-{g}.json"))
        if g == 0:
            die("mid_output", b)
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


def _reference_outputs(batches: int, shards: int = 3) -> dict[tuple[int, int], dict[str, int]]:
    """Per (batch, shard): each changed key's new value, computed from scratch."""
    out = {}
    for b in range(batches):
        before = _reference(b, shards)
        after = _reference(b + 1, shards)
        for g in range(shards):
            out[(b, g)] = {str(k): v for k, v in sorted(after[g].items()) if before[g].get(k) != v}
    return out


KILL_POINTS = (
    "before_write",
    "mid_write",
    "after_write",
    "mid_compaction",
    "mid_output",
    "after_commit",
)


def check_sigkill(url: str, point: str, out: Path) -> None:
    """Kill the driver loop at ``point`` of batch 3, check, restart, check again.

    ``mid_compaction``: changelogs are kept until every third version, so batch 3's
    writes are the compaction of a chain into a snapshot, and the kill falls after the
    first shard's snapshot is written and before the others'.
    """
    if point == "mid_compaction":
        sep = "&" if "?" in url else "?"
        url = f"{url}{sep}snapshot_every=3&snapshot_ratio=100"
    cmd = [sys.executable, "-c", _DRIVER, url, "3", point, "6", str(out)]
    killed = subprocess.run(cmd, check=False)
    assert killed.returncode == -signal.SIGKILL
    committed = state_backend(url).committed("op")
    assert committed == (3 if point == "after_commit" else 2)
    if point == "mid_compaction" and url.startswith("file://"):
        # the kill fell inside a compaction: shard 0's version 3 is a snapshot written
        # over a chain of changelogs, the other shards' version 3 not yet written
        root = Path(url[len("file://") :].split("?")[0]) / "op"
        with open(root / "0" / "3.pkl", "rb") as f:
            assert not is_log(pickle.load(f))
        with open(root / "0" / "2.pkl", "rb") as f:
            assert is_log(pickle.load(f))
        assert not (root / "1" / "3.pkl").exists()
    # What was committed is readable and exact; the uncommitted batch left no trace.
    assert state_backend(url).load_all("op") == _reference(committed + 1)
    subprocess.run([*cmd[:4], "-1", "never", "6", str(out)], check=True)  # restart: replay
    assert state_backend(url).load_all("op") == _reference(6)
    # every batch's output exactly once: no file lost, none left from the killed attempt
    got = {
        (int(p.parent.name.split("=")[1]), int(p.stem.split("-")[1])): json.loads(p.read_text())
        for p in out.glob("batch=*/part-*.json")
    }
    assert got == _reference_outputs(6)
    assert not list(out.glob("batch=*/.part-*"))


@pytest.mark.parametrize("point", KILL_POINTS)
def test_state_is_exact_across_sigkill_at_each_point_of_a_batch(tmp_path: Path, point: str) -> None:
    check_sigkill(f"file://{tmp_path}/state?fsync=1", point, tmp_path / "out")


def test_a_lost_commit_marker_is_refused_where_the_query_committed_the_versions(
    tmp_path: Path,
) -> None:
    be = LocalStateBackend(tmp_path)
    for b in range(3):
        _process(be, b, ["a"])
    (tmp_path / "op" / "_committed").unlink()
    # Spark committed batch 2 (its marker is written first): the marker was lost
    with pytest.raises(StreamscaleError) as err:
        VersionIndex(be, "op", 1, query_committed=2)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "op" / "_committed") in msg
    assert "batch 2" in msg and "marker is missing" in msg
    # a first batch that wrote its versions and stopped before any commit: nothing lost
    VersionIndex(be, "op", 1, query_committed=-1)


def test_an_older_commit_marker_is_refused_and_an_uncommitted_version_is_not(
    tmp_path: Path,
) -> None:
    be = LocalStateBackend(tmp_path)
    for b in range(2):
        _process(be, b, ["a"])
    marker = (tmp_path / "op" / "_committed").read_bytes()
    _process(be, 2, ["a"])
    (tmp_path / "op" / "_committed").write_bytes(marker)  # batch 1's marker
    with pytest.raises(StreamscaleError, match="marker names batch 1"):
        VersionIndex(be, "op", 1, query_committed=2)
    # Spark committed only batch 1: version 2 is a batch that never committed
    assert VersionIndex(be, "op", 1, query_committed=1).hints(1)[0] == ((1, None),)
