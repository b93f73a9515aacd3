"""A driver process for the recovery test: runs the counting job on a checkpoint.

Usage: python _driver.py CHECKPOINT OUT MAX_BATCHES
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.executors.session import build_session
from streamscale.runtime.spark.keyed.functions import counter
from tests.runtime.spark._policies import Flip
from tests.runtime.spark._seq_source import SeqSource

OPTS = {"keys": "30", "step": "150", "cost_ms": "2", "partitions": "2"}


def make_job() -> Job:
    return Job.simple(
        "count",
        counter,
        source_options=OPTS,
        source_format=SeqSource.name(),
        source_class=SeqSource,
        instances=2,
        shards=4,
        trigger_s=0,
    )


def run(spark: object, ckpt: Path, out: Path, max_batches: int) -> None:
    job = make_job()
    params = {"interval_s": 0.0, "stabilization_s": 0.0, "scale_down_delay_s": 0.0}
    run_job(
        spark,
        job,
        policy=Flip(job.topology, "count", k=2),
        duration_s=600,
        checkpoint=ckpt,
        out=out,
        params=params,
        max_batches=max_batches,
    )


def main() -> None:
    spark = build_session("local[2]", app_name="streamscale-recovery", shuffle_partitions=2)
    run(spark, Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
    spark.stop()


if __name__ == "__main__":
    main()
