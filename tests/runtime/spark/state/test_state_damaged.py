"""Lost or damaged shard state stops a running job with one line naming the file and
the batch, on a local disk and on an S3-compatible server (moto, loopback HTTP): a
truncated snapshot, a truncated or missing changelog, a version the commit marker names
that the store lost. Nothing is recomputed from less state: no batch commits after it.

One job runs three batches per backend (a snapshot and changelogs per shard); each case
damages a copy of its checkpoint and state, and the job restarts on that copy.
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.state.state import state_backend
from streamscale.runtime.spark.state.state_log import is_log
from tests.runtime.spark._seq_source import SeqSource, tally

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OP = "tally"
SHARDS = 4  # 2 instances x 2 shards
OPTS = {"keys": "40", "step": "120", "partitions": "2"}
# changelogs are kept below 10x their snapshot: the three batches write one snapshot and
# two changelogs per shard
STATE_OPTS = "snapshot_ratio=10"


def _job() -> Job:
    return Job.simple(
        OP, tally, source_options=OPTS, source_format=SeqSource.name(),
        source_class=SeqSource, instances=2, shards=2, trigger_s=0,
    )  # fmt: skip


def _spark_commits(ckpt: Path) -> list[int]:
    d = ckpt / "spark" / "commits"
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.exists() else []


@dataclass
class Seeded:
    """A run's checkpoint (local) and state (``url``), to be copied for each case."""

    kind: str
    ckpt: Path
    url: str
    endpoint: str | None


@pytest.fixture(scope="module", params=["local", "s3"])
def seeded(request: pytest.FixtureRequest, spark, tmp_path_factory) -> Iterator[Seeded]:
    kind = request.param
    root = tmp_path_factory.mktemp(f"seed-{kind}")
    endpoint = None
    env = spark.sparkContext.environment  # the Python workers' environment
    saved = dict(env)
    if kind == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        url = f"s3://state/{uuid.uuid4().hex}?endpoint={endpoint}&{STATE_OPTS}"
        env.update({k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    else:
        url = f"{root / 'ck' / 'state'}?{STATE_OPTS}"
    try:
        yield _seed(spark, root, kind, url, endpoint)
    finally:
        env.clear()
        env.update(saved)


def _seed(spark, root: Path, kind: str, url: str, endpoint: str | None) -> Seeded:
    spark.dataSource.register(SeqSource)
    run_job(
        spark, _job(), policy="static", duration_s=180, checkpoint=root / "ck",
        max_batches=3, state_url=url,
    )  # fmt: skip
    be = state_backend(url)
    committed = be.committed(OP)
    assert committed >= 2
    # the run stopped between batches: Spark committed the batch the state did, so the
    # restart's first batch is the next one and reads the newest versions
    assert _spark_commits(root / "ck")[-1] == committed
    return Seeded(kind, root / "ck", url, endpoint)


def _copy(seed: Seeded, dest: Path) -> tuple[Path, str]:
    """A copy of the seeded checkpoint and state: (checkpoint, state URL)."""
    ckpt = dest / "ck"
    shutil.copytree(seed.ckpt, ckpt)
    if seed.kind == "local":
        return ckpt, f"{ckpt / 'state'}?{STATE_OPTS}"
    url = f"s3://state/{uuid.uuid4().hex}?endpoint={seed.endpoint}&{STATE_OPTS}"
    src, dst = state_backend(seed.url), state_backend(url)
    import pyarrow.fs as pafs

    fs = src._fs  # type: ignore[attr-defined]
    for info in fs.get_file_info(pafs.FileSelector(src.root, recursive=True)):  # type: ignore[attr-defined]
        if info.type == pafs.FileType.File:
            rel = info.path[len(src.root) + 1 :]  # type: ignore[attr-defined]
            fs.copy_file(info.path, f"{dst.root}/{rel}")  # type: ignore[attr-defined]
    return ckpt, url


def _chain(url: str) -> tuple[int, list[int], list[bool]]:
    """A shard with a snapshot and at least two changelogs: (shard, versions, is_log)."""
    be = state_backend(url)
    for g in range(SHARDS):
        vs = be.versions(OP, g)
        kinds = [is_log(pickle.loads(be._get(be.version_file(OP, g, v)))) for v in vs]  # type: ignore[attr-defined]
        if len(vs) >= 3 and not kinds[0] and all(kinds[1:]):
            return g, vs, kinds
    raise AssertionError("no shard holds a snapshot and two changelogs")


def _truncate(url: str, g: int, v: int) -> str:
    be = state_backend(url)
    file = be.version_file(OP, g, v)  # type: ignore[attr-defined]
    raw = be._get(file)  # type: ignore[attr-defined]
    be._put(file.rsplit("/", 1)[0], file.rsplit("/", 1)[1], raw[: len(raw) // 2])  # type: ignore[attr-defined]
    return file


def _delete(url: str, g: int, v: int) -> str:
    be = state_backend(url)
    file = be.version_file(OP, g, v)  # type: ignore[attr-defined]
    be._remove(file)  # type: ignore[attr-defined]
    assert v not in be.versions(OP, g)
    return file


def _damage(case: str, url: str) -> tuple[str, str]:
    """Damage the state at ``url``: (the file, what the error says of it)."""
    g, vs, _ = _chain(url)
    if case == "truncated snapshot":
        return _truncate(url, g, vs[0]), f"version {vs[0]} is unreadable"
    if case == "truncated changelog":
        return _truncate(url, g, vs[-1]), f"version {vs[-1]} is unreadable"
    if case == "missing changelog":  # one the newest version builds on
        return _delete(url, g, vs[1]), f"committed version {vs[1]} is missing"
    if case == "missing commit marker":  # the shards' versions are all still there
        be = state_backend(url)
        file = be.marker_file(OP)  # type: ignore[attr-defined]
        be._remove(file)  # type: ignore[attr-defined]
        assert be.committed(OP) == -1
        return file, "but the commit marker is missing"
    assert case == "missing named version"  # the newest: an older one is still there
    return _delete(url, g, vs[-1]), f"version {vs[-1]}, which the commit of batch"


@pytest.mark.parametrize(
    "case",
    [
        "truncated snapshot",
        "truncated changelog",
        "missing changelog",
        "missing named version",
        "missing commit marker",
    ],
)
def test_damaged_state_stops_the_job_naming_the_file_and_the_batch(
    seeded: Seeded, case: str, spark, tmp_path: Path
) -> None:
    ckpt, url = _copy(seeded, tmp_path)
    be = state_backend(url)
    committed = be.committed(OP)
    file, what = _damage(case, url)
    ran: list[int] = []
    with pytest.raises(StreamscaleError) as err:
        run_job(
            spark, _job(), policy="static", duration_s=120, checkpoint=ckpt, max_batches=3,
            state_url=url, on_batch=lambda b: ran.append(b.batch_id),
        )  # fmt: skip
    msg = str(err.value)
    assert "\n" not in msg
    assert file in msg and what in msg, msg
    # the batch that stopped: the restart's first (its input is damaged), or the last
    # committed one, whose marker names the lost version
    batch = (
        committed if case in ("missing named version", "missing commit marker") else committed + 1
    )
    assert f"batch {batch}" in msg, msg
    # the job did not go on: no batch ran to its end, nothing committed after the damage
    assert ran == []
    assert state_backend(url).committed(OP) == (
        -1 if case == "missing commit marker" else committed
    )
    assert _spark_commits(ckpt)[-1] == committed
