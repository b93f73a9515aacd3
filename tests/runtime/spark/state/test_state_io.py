"""Concurrent state I/O: a task's shards written and read together, bounded, failing loudly."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state.state import LocalStateBackend, VersionIndex, state_backend
from streamscale.runtime.spark.state.state_log import TrackedDict


class _SlowStore(LocalStateBackend):
    """A local backend whose PUTs take a while and record how many ran at once."""

    def __init__(self, root: Path, *, io_threads: int, fail: str | None = None) -> None:
        super().__init__(root, io_threads=io_threads)
        self.fail = fail
        self.active = 0
        self.peak = 0
        self.finished: list[str] = []
        self.mu = threading.Lock()

    def _put(self, path: str, name: str, data: bytes) -> None:
        with self.mu:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(0.1)
            if self.fail is not None and path.endswith(self.fail) and name != "_committed":
                raise OSError("connection reset by peer")
            super()._put(path, name, data)
            with self.mu:
                self.finished.append(path)
        finally:
            with self.mu:
                self.active -= 1


def _states(n: int, tag: str) -> dict[int, dict[Any, Any]]:
    return {g: TrackedDict({f"k{g}": tag, "g": g}) for g in range(n)}


@pytest.mark.parametrize("threads", [1, 4])
def test_write_many_overlaps_puts_up_to_io_threads(tmp_path: Path, threads: int) -> None:
    be = _SlowStore(tmp_path, io_threads=threads)
    sizes = be.write_many("op", 0, _states(8, "v0"))
    be.commit("op", 0)
    assert be.peak == threads  # bounded, and concurrent when allowed
    assert sorted(sizes) == list(range(8)) and all(n > 0 for n in sizes.values())
    assert LocalStateBackend(tmp_path).load_all("op") == {
        g: {f"k{g}": "v0", "g": g} for g in range(8)
    }


def test_a_failed_put_names_the_shard_and_leaves_nothing_in_flight(tmp_path: Path) -> None:
    ok = _SlowStore(tmp_path, io_threads=4)
    ok.write_many("op", 0, _states(8, "v0"))
    ok.commit("op", 0)
    be = _SlowStore(tmp_path, io_threads=4, fail="/op/3")
    states = {g: s for g, (s, _) in be.read_many("op", range(8), 0).items()}
    for g, s in states.items():
        s[f"k{g}"] = "v1"
    with pytest.raises(StreamscaleError) as err:
        be.write_many("op", 1, states)
    msg = str(err.value)
    assert "operator 'op' shard 3" in msg and "connection reset" in msg
    assert str(tmp_path / "op" / "3" / "1.pkl") in msg
    assert be.active == 0 and len(be.finished) == 7  # every other PUT ended first
    # batch 1 never committed: a fresh reader sees version 0 everywhere
    assert LocalStateBackend(tmp_path).load_all("op") == {
        g: {f"k{g}": "v0", "g": g} for g in range(8)
    }


def test_a_missing_changelog_fails_a_concurrent_chain_read(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path, io_threads=4)
    state: dict[Any, Any] = TrackedDict({i: i for i in range(200)})
    be.write("op", 0, 0, state)
    for b in (1, 2, 3):
        state, _ = be.read("op", 0, b - 1)
        state[b] = -b
        be.write("op", 0, b, state)
        be.commit("op", b)
    assert be.versions("op", 0) == [0, 1, 2, 3]  # a snapshot and three changelogs
    fresh = LocalStateBackend(tmp_path, io_threads=4)
    hints, _ = VersionIndex(fresh, "op", 1).hints(3)
    assert fresh.read_many("op", [0], 3, dict(enumerate(hints)))[0][0] == {
        **{i: i for i in range(200)},
        1: -1,
        2: -2,
        3: -3,
    }
    (tmp_path / "op" / "0" / "2.pkl").unlink()
    with pytest.raises(StreamscaleError) as err:
        LocalStateBackend(tmp_path, io_threads=4).read_many("op", [0], 3, dict(enumerate(hints)))
    assert "shard 0: committed version 2 is missing" in str(err.value)
    assert str(tmp_path / "op" / "0" / "2.pkl") in str(err.value)


def test_io_threads_from_the_url(tmp_path: Path) -> None:
    be = state_backend(f"file://{tmp_path}?io_threads=3")
    assert isinstance(be, LocalStateBackend) and be.io_threads == 3
    assert state_backend(str(tmp_path)).io_threads == 1  # type: ignore[attr-defined]
    with pytest.raises(StreamscaleError, match="io_threads must be a number"):
        state_backend(f"file://{tmp_path}?io_threads=many")


def test_a_state_that_cannot_be_encoded_fails_after_the_started_puts_ended(
    tmp_path: Path,
) -> None:
    be = _SlowStore(tmp_path, io_threads=4)
    states = _states(6, "v0")
    states[4]["bad"] = lambda: None  # not picklable
    with pytest.raises(StreamscaleError) as err:
        be.write_many("op", 0, states)
    assert "operator 'op' shard 4: encoding version 0 failed" in str(err.value)
    assert str(tmp_path / "op" / "4" / "0.pkl") in str(err.value)
    assert be.active == 0 and len(be.finished) == 4  # shards 0-3 started, and ended
