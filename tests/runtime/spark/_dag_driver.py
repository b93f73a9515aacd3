"""A driver process for the DAG recovery test: runs the DAG job on a checkpoint.

Usage: python _dag_driver.py CHECKPOINT OUT MAX_BATCHES
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from streamscale.runtime.spark.driver.dag import run_graph
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.executors.session import build_session
from tests.runtime.spark._seq_source import SeqSource
from tests.runtime.spark.driver.test_graph import dag_topology

OPTS = {"keys": "20", "step": "100", "partitions": "2", "total": "100000", "cost_ms": "0"}


def main() -> None:
    ckpt, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    spark = build_session("local[2]", app_name="streamscale-dag-recovery", shuffle_partitions=2)
    graph = JobGraph.build(dag_topology(OPTS), source_class=SeqSource)

    def log(b: object) -> None:
        with open(out / "batches.jsonl", "a") as fh:
            fh.write(json.dumps({"batch_id": b.batch_id}) + "\n")  # type: ignore[attr-defined]

    run_graph(
        spark,
        graph,
        duration_s=600,
        checkpoint=ckpt,
        out=out,
        max_batches=n,
        on_batch=log,
        policy="static",
    )
    spark.stop()


if __name__ == "__main__":
    main()
