"""A driver process for the fused chain's recovery test: three aggregations on one key
(fused into one stage) over the Parquet files of SRC, each batch's output written to
OUT/parts/batch_id=<b>, to the end of the input.

Usage: python _fused_driver.py SRC CHECKPOINT OUT
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from streamscale.runtime.spark.api import stream
from streamscale.runtime.spark.executors.session import build_session

SCHEMA = "key string, x double"


def job(spark: Any, src: Path, out: Path) -> Any:
    from pyspark.sql import functions as F

    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    s: Any = stream(df, name="fused", available_now=True)
    s = s.key_by("key", shards=4).agg(F.count("*").alias("n"), F.sum("x").alias("sx"), name="a")
    s = s.key_by("key", shards=4).agg(F.sum("n").alias("n"), F.max("sx").alias("sx"), name="b")
    s = s.key_by("key", shards=4).agg(F.sum("n").alias("n"), F.min("sx").alias("sx"), name="c")

    def write(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(out / "parts" / f"batch_id={batch_id}"))

    return s.to(write, name="out")


def main() -> None:
    src, ckpt, out = (Path(a) for a in sys.argv[1:4])
    out.mkdir(parents=True, exist_ok=True)
    spark = build_session("local[2]", app_name="streamscale-fused-recovery", shuffle_partitions=2)
    job(spark, src, out).run(checkpoint=ckpt, out=out, spark=spark, policy="static",
                             duration_s=600)  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
