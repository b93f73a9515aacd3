"""A driver process for the restart parity test: the event-time operators on a checkpoint.

Usage: python _parity_driver.py SRC CHECKPOINT OUT
Each operator's batches with output are written to ``OUT/op<i>/batch_id=<b>``, and each
batch is logged in ``OUT/batches.jsonl``; the log sink waits a second so the test can
kill the driver while a run is under way.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import streamscale
from tests.runtime.spark._parity import source
from tests.runtime.spark.compat.test_parity_processors import event_time_queries


def job(spark: Any, src: Path, log: Path | None) -> Any:
    s = streamscale.stream(source(spark, src), available_now=True)
    for i, query in enumerate(event_time_queries(spark)):
        out = query(s.key_by("k", instances=2, shards=4))
        out.to("parquet", path=f"op{i}", name=f"sink{i}")
    if log is not None:

        def slow_log(df: object, batch_id: int) -> None:
            with open(log, "a") as fh:
                fh.write(json.dumps({"batch_id": batch_id}) + "\n")
            time.sleep(1.0)

        out.to(slow_log)
    return s


def main() -> None:
    src, ckpt, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    spark = streamscale.session(
        "local[2]", app_name="streamscale-parity-restart", shuffle_partitions=2
    )
    job(spark, src, out / "batches.jsonl").run(checkpoint=ckpt, out=out, duration_s=600)
    spark.stop()


if __name__ == "__main__":
    main()
