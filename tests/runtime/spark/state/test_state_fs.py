"""Shard state on a real S3-compatible server (moto's standalone server, loopback HTTP)."""

from __future__ import annotations

import pickle
import uuid
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.state.state import VersionIndex, state_backend
from streamscale.runtime.spark.state.state_fs import FsStateBackend
from tests.runtime.spark.state.test_state import KILL_POINTS, check_sigkill


@pytest.fixture
def url(s3_endpoint: str) -> str:
    return f"s3://state/{uuid.uuid4().hex}?endpoint={s3_endpoint}"


def test_versions_replay_and_commit_over_http(url: str) -> None:
    be = state_backend(url)
    assert isinstance(be, FsStateBackend)
    assert be.read("op", 0, 5) == ({}, None) and be.committed("op") == -1
    for b in range(4):
        upto = min(b - 1, be.committed("op"))
        state, _ = be.read("op", 0, upto)
        state["n"] = state.get("n", 0) + 1
        be.write("op", 0, b, state)
        be.commit("op", b)
    assert be.versions("op", 0) == [2, 3]  # older versions collected
    state, _ = be.read("op", 0, 2)  # a replay of batch 3 reads version 2 again
    state["n"] += 1
    be.write("op", 0, 3, state)
    assert state_backend(url).load_all("op") == {0: {"n": 4}}


def test_pickles_as_its_url_without_a_client(url: str) -> None:
    be = state_backend(url)
    be.write("op", 1, 0, {"k": [1, 2]})
    be.commit("op", 0)
    assert be._client is not None
    blob = pickle.dumps(be)
    assert b"S3FileSystem" not in blob and len(blob) < 400
    other = pickle.loads(blob)
    assert other._client is None
    assert other.load_all("op") == {1: {"k": [1, 2]}}


def test_a_deleted_committed_object_fails_naming_operator_shard_and_path(url: str) -> None:
    be = state_backend(url)
    be.write("op", 2, 0, {"a": 1})
    be.commit("op", 0)
    hints, _ = VersionIndex(be, "op", 3).hints(0)
    be._remove(f"{be.root}/op/2/0.pkl")
    with pytest.raises(StreamscaleError) as err:
        state_backend(url).read("op", 2, 0, hints[2])
    msg = str(err.value)
    assert "'op'" in msg and "shard 2" in msg and f"{be.root}/op/2/0.pkl" in msg


def test_unknown_option_is_a_one_line_error(s3_endpoint: str) -> None:
    with pytest.raises(StreamscaleError, match="unknown state backend option 'acl'"):
        state_backend(f"s3://state/x?endpoint={s3_endpoint}&acl=public")


@pytest.mark.parametrize("point", KILL_POINTS)
def test_state_is_exact_across_sigkill_on_the_object_store(
    url: str, point: str, tmp_path: Path
) -> None:
    check_sigkill(url, point, tmp_path / "out")


def test_a_tasks_shards_go_to_the_store_together_and_come_back_exactly(url: str) -> None:
    be = state_backend(url)
    assert be.io_threads == 16  # type: ignore[attr-defined]
    want = {g: {f"k{i}": (g, i) for i in range(50)} for g in range(6)}
    be.write_many("op", 0, {g: dict(s) for g, s in want.items()})  # type: ignore[attr-defined]
    be.commit("op", 0)
    assert state_backend(url).load_all("op") == want
    be._remove(f"{be.root}/op/4/0.pkl")  # type: ignore[attr-defined]
    with pytest.raises(StreamscaleError) as err:
        state_backend(url).read_many(  # type: ignore[attr-defined]
            "op", range(6), 0, {g: (0, None) for g in range(6)}
        )
    assert "shard 4: committed version 0 is missing" in str(err.value)
    assert f"{be.root}/op/4/0.pkl" in str(err.value)  # type: ignore[attr-defined]
