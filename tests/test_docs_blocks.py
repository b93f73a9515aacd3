"""Every code block of the tutorial and of the README's quick start runs, as written.

The blocks are read from the pages and run in order: Python blocks in one namespace per
page, with ``spark`` the suite's session (the tutorial's own ``build_session`` block
returns that same session) and the working directory a fresh temporary one; shell
blocks in ``bash -e`` with the project's ``streamscale`` on ``PATH``. After the blocks,
each test checks the job's output against Spark itself, apart from what the blocks
print or assert.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_docs import ROOT, fenced_blocks

pytestmark = pytest.mark.spark


def section(text: str, heading: str) -> str:
    """The part of ``text`` from the ``## heading`` line to the next ``## `` heading."""
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def run_python(blocks: list[str], spark: Any, where: Path) -> dict[str, Any]:
    """Run ``blocks`` in order in one namespace in ``where``; the namespace after them."""
    ns: dict[str, Any] = {"spark": spark, "__name__": "docs_block"}
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    cwd = Path.cwd()
    os.chdir(where)
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"<block {i}>", "exec"), ns)
    finally:
        os.chdir(cwd)
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    return ns


def counts_per_user(spark: Any, n: int) -> dict[str, int]:
    """Spark's own count of the rate source's first ``n`` values per ``value % 10``."""
    from pyspark.sql import functions as F

    df = spark.range(n).groupBy((F.col("id") % 10).cast("string").alias("user")).count()
    return {r["user"]: r["count"] for r in df.collect()}


def last_counts(spark: Any, path: Path) -> dict[str, int]:
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path)).groupBy("user").agg(F.max("count").alias("c"))
    return {r["user"]: r["c"] for r in df.collect()}


def test_readme_quick_start_runs_and_counts_exactly(spark: Any, tmp_path: Path) -> None:
    text = section((ROOT / "README.md").read_text(), "Quick start")
    blocks = fenced_blocks(text, ("python",))
    assert len(blocks) == 3
    ns = run_python(blocks, spark, tmp_path)
    result = ns["result"]
    assert result.batches == 2 and len(result.records) == 2
    n = result.keyed_rows["running_count"]
    assert n > 0
    assert last_counts(spark, tmp_path / "quickstart" / "counts") == counts_per_user(spark, n)
    # the processor built by the last block (timeMode "None", as a processor without
    # timers is written for Spark), run as the README says ("as above"); any of its
    # batches holds rows
    tws = ns["tws"]
    tws.to("parquet", path="tws")
    res = tws.run(checkpoint=tmp_path / "tws-ck", out=tmp_path / "tws-out", max_batches=3)
    m = res.keyed_rows["RunningCount"]
    assert m > 0
    assert last_counts(spark, tmp_path / "tws-out" / "tws") == counts_per_user(spark, m)


def test_tutorial_python_blocks_run(spark: Any, tmp_path: Path) -> None:
    blocks = fenced_blocks((ROOT / "docs" / "tutorial.md").read_text(), ("python",))
    assert len(blocks) == 6
    # as the tutorial asks: AWS_* exported before Spark starts, so the Python workers
    # have them (the suite's session started before this test: its workers' environment)
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    for k, v in creds.items():
        os.environ.setdefault(k, v)
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update({k: os.environ[k] for k in creds})
    try:
        ns = run_python(blocks, spark, tmp_path)
    finally:
        env.clear()
        env.update(saved)
    n = ns["result"].keyed_rows["running_count"]
    assert last_counts(spark, tmp_path / "tutorial" / "counts") == counts_per_user(spark, n)
    # step 5: the second run continued from the state the first committed in S3
    first, second = ns["first"], ns["second"]
    # max_batches stops the query once that many committed; a batch Spark had already
    # started then completes and commits too (run_graph's contract): one more at most
    assert first.batches in (2, 3) and second.batches in (1, 2)
    total = first.keyed_rows["running_count"] + second.keyed_rows["running_count"]
    assert last_counts(spark, tmp_path / "tutorial" / "s3" / "counts") == counts_per_user(
        spark, total
    )
    assert not (tmp_path / "tutorial" / "s3-checkpoint" / "state").exists()


@pytest.mark.slow
def test_tutorial_cluster_block_runs(tmp_path: Path) -> None:
    blocks = fenced_blocks((ROOT / "docs" / "tutorial.md").read_text(), ("sh",))
    assert len(blocks) == 1 and "cluster up" in blocks[0]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    try:
        res = subprocess.run(
            ["bash", "-e", "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=900,
        )  # fmt: skip
    finally:
        if (tmp_path / "tutorial" / "cluster").exists():
            subprocess.run(
                [shutil.which("streamscale", path=env["PATH"]) or "streamscale", "cluster",
                 "down", "--dir", "tutorial/cluster"],
                cwd=tmp_path, env=env, capture_output=True, timeout=120,
            )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    import json

    lines = [json.loads(x) for x in (tmp_path / "tutorial/cluster-run/metrics.jsonl").open()]
    batches = [x for x in lines if "batch_id" in x]
    assert [x["batch_id"] for x in batches] == [0, 1]
    # executors were requested from the cluster and arrived (Spark's scheduler, not a plan)
    assert all(x["extra"]["executors_alive"] >= 1 for x in batches)
    assert sum(x["rows"] for x in batches) > 0
    assert "match" in res.stdout
