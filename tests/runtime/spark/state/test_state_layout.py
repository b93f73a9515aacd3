"""The layout record of an operator's state: state is never read under other key hashes,
``E`` or ``Z`` (it would silently look for keys in the wrong shards)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.keyed.functions import counter
from streamscale.runtime.spark.routing.routing import HASH_SCHEME
from streamscale.runtime.spark.state.state import LocalStateBackend, check_layout, state_backend
from tests.runtime.spark._seq_source import SeqSource


@pytest.fixture(params=["file", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "file":
        return LocalStateBackend(tmp_path / "state")
    endpoint = request.getfixturevalue("s3_endpoint")
    return state_backend(f"s3://state/{uuid.uuid4().hex}?endpoint={endpoint}")


def test_the_first_run_records_the_layout_and_the_same_layout_passes(backend: Any) -> None:
    assert backend.layout("op") is None
    check_layout(backend, "op", 2, 64)
    assert backend.layout("op") == {"hash": HASH_SCHEME, "executors": 2, "shards": 64}
    backend.write("op", 3, 0, {"k": 1})
    backend.commit("op", 0)
    check_layout(backend, "op", 2, 64)  # a restart under the same layout
    assert backend.load_all("op") == {3: {"k": 1}}  # the record is not a shard


@pytest.mark.parametrize(
    ("e", "z", "hash_", "says"),
    [
        (4, 64, HASH_SCHEME, "E 2 in the state, 4 in this run"),
        (2, 32, HASH_SCHEME, "Z 64 in the state, 32 in this run"),
        (2, 64, "blake2b", "key hashes 'blake2b' in the state"),
    ],
)
def test_another_layout_fails_in_one_line_naming_operator_and_difference(
    backend: Any, e: int, z: int, hash_: str, says: str
) -> None:
    backend.write_layout("op", {"hash": hash_, "executors": 2, "shards": 64})
    with pytest.raises(StreamscaleError) as err:
        check_layout(backend, "op", e, z)
    msg = str(err.value)
    assert err.value.item == "operator op" and says in msg and "\n" not in msg


def test_shard_state_without_a_record_fails_and_is_left_alone(backend: Any) -> None:
    backend.write("op", 5, 0, {"k": 1})  # as written before layouts were recorded
    backend.commit("op", 0)
    with pytest.raises(StreamscaleError, match="operator op: shard state has no layout record"):
        check_layout(backend, "op", 2, 64)
    assert backend.layout("op") is None and backend.load_all("op") == {5: {"k": 1}}


def _job(shards: int) -> Job:
    return Job.simple(
        "count", counter, source_options={"keys": "10", "step": "50", "partitions": "2"},
        source_format=SeqSource.name(), source_class=SeqSource, instances=2, shards=shards,
        trigger_s=0,
    )  # fmt: skip


@pytest.mark.spark
def test_a_restart_with_other_shards_fails_before_its_first_batch(spark, tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    run_job(spark, _job(4), policy="static", duration_s=60, checkpoint=ck, max_batches=1)
    layout = json.loads((ck / "state" / "count" / "_layout.json").read_text())
    assert layout == {"executors": 2, "hash": HASH_SCHEME, "shards": 4}
    committed = (ck / "state" / "count" / "_committed").read_text()
    with pytest.raises(StreamscaleError, match=r"operator count: .*Z 4 in the state, 8 in this"):
        run_job(spark, _job(8), policy="static", duration_s=60, checkpoint=ck, max_batches=1)
    assert (ck / "state" / "count" / "_committed").read_text() == committed  # nothing ran
