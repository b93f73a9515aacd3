"""The engine works on a clean machine: a Python streaming source through foreachBatch."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_python_streaming_source_through_foreach_batch(spark, tmp_path: Path) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class _Range(InputPartition):
        def __init__(self, start: int, end: int) -> None:
            self.start, self.end = start, end

    class _Reader(DataSourceStreamReader):
        # 30 rows in all; availableNow reads up to the offset reported at start.
        def initialOffset(self) -> dict:
            return {"offset": 0}

        def latestOffset(self) -> dict:
            return {"offset": 30}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            return [_Range(start["offset"], end["offset"])]

        def read(self, partition: InputPartition):  # type: ignore[override]
            for i in range(partition.start, partition.end):  # type: ignore[attr-defined]
                yield (i % 3, i)

        def commit(self, end: dict) -> None:
            pass

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "smoke_counter"

        def schema(self) -> str:
            return "key int, value int"

        def streamReader(self, schema):  # type: ignore[no-untyped-def]
            return _Reader()

    spark.dataSource.register(_Source)
    seen: list[tuple[int, int]] = []

    def sink(batch_df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        for row in batch_df.groupBy("key").count().collect():
            seen.append((row["key"], row["count"]))

    q = (
        spark.readStream.format("smoke_counter")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    totals: dict[int, int] = {}
    for k, c in seen:
        totals[k] = totals.get(k, 0) + c
    assert totals == {0: 10, 1: 10, 2: 10}


def test_a_spark_connect_session_is_refused_with_one_line(tmp_path: Path) -> None:
    from streamscale.errors import StreamscaleError
    from streamscale.runtime.spark.driver.dag import run_graph
    from streamscale.runtime.spark.driver.runner import run_job

    # the class a Spark Connect client session has; nothing of it is used before the check
    remote = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    runs = (
        lambda: run_job(remote, None, policy="static", duration_s=1.0, checkpoint=tmp_path),
        lambda: run_graph(remote, None, duration_s=1.0, checkpoint=tmp_path, policy="static"),
    )
    for run in runs:
        with pytest.raises(StreamscaleError, match="Spark Connect is not supported") as err:
            run()
        assert err.value.item == "session"
