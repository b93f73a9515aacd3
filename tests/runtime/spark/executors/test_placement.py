"""Enforced placement on a real loopback cluster: each unit's task runs where the plan says.

Two workers with two cores each host four one-core executors. A scripted policy
alternates between two placements of a keyed operator's four units — one spread over
the four nodes, one that crowds two units onto one node and leaves a node empty. The
keyed function writes, with every output row, the working directory of the Python
process that ran it: a standalone worker starts each executor in its own directory
named by the executor id, so the operating system, not Spark's bookkeeping, says where
each task ran. Every row must come from the executor of the node its unit was planned
on, the executor behind a node must stay the same across batches, and the per-key
counts must equal pandas' over the same generated tuples. Spark's own status store
(the figures ``metrics.jsonl`` reports) must agree with the directories.

Slow: a cluster and a job in a subprocess (this test session owns a local SparkContext).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from streamscale.runtime.spark.cluster.cluster import ClusterInfo
from streamscale.runtime.spark.sources.sources import generate

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_JOB = r"""
import json, os, sys
from pathlib import Path
import pandas as pd
from streamscale.control.controller import Decision
from streamscale.model import Allocation, Edge, Operator, Placement, Plan, Routing, Topology
from streamscale.runtime.spark.driver.dag import run_graph
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.executors.session import build_session

master, work, opts = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])

def where(rows, state):
    counts = state.setdefault("count", {})
    vc = rows["key"].value_counts(sort=False)
    for k, c in zip(vc.index.tolist(), vc.tolist()):
        counts[k] = counts.get(k, 0) + int(c)
    keys = vc.index.tolist()
    return pd.DataFrame({"key": keys, "count": [counts[k] for k in keys],
                         "cwd": [os.getcwd()] * len(keys)})

topo = Topology.build("placed", [
    Operator(name="source", kind="source",
             params={"format": "streamscale_generator", "trigger_s": 0, **opts}),
    Operator(name="where", key="key", instances=2, shards=4),
    Operator(name="out", kind="sink", params={"format": "parquet", "path": "out"}),
], [Edge("source", "where", grouping="key"), Edge("where", "out")])
graph = JobGraph.build(topo, {"where": where})

def plan_of(nodes):
    units = {"where[0]": ("where[0]#0", "where[0]#1"), "where[1]": ("where[1]#0", "where[1]#1")}
    tables = {i: tuple(u[s % 2] for s in range(4)) for i, u in units.items()}
    placement = dict(zip([u for us in units.values() for u in us], nodes))
    return Plan(Allocation({i: 2 for i in units}), Placement(placement), Routing(tables))

SPREAD = plan_of(["executor-0", "executor-1", "executor-2", "executor-3"])
CROWD = plan_of(["executor-3", "executor-3", "executor-0", "executor-1"])

class Alternate:
    name = "alternate"
    def __init__(self):
        self.i = 0
    def decide(self, snapshot, current, now):
        self.i += 1
        return Decision(CROWD if self.i % 2 else SPREAD, "alternate", {}, "none")
    def shard_bytes(self, instance, shard):
        return 0

spark = build_session(master, app_name="streamscale-placement-test", conf=executor_conf(1, 4))
res = ExecutorResources(spark.sparkContext, cores_per_executor=1, max_executors=4,
                        min_executors=4, initial_executors=4)
assert res.settle(180), "executors did not arrive"
seen = []
def on_batch(rec):
    seen.append({"batch": rec.batch_id, "slots": dict(res.slots),
                 "placement": rec.extra.get("placement", {}).get("where")})
out = run_graph(spark, graph, duration_s=400, checkpoint=work / "ckpt", out=work, max_batches=4,
                plan=SPREAD, policy=Alternate(), resources=res, on_batch=on_batch,
                params={"interval_s": 0, "stabilization_s": 0, "scale_down_delay_s": 0})
# the linear pipeline (one keyed operator, RDD data path) on the same executors
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
job = Job.simple("where", where, source_options=opts, instances=2, shards=4, trigger_s=0,
                 sink={"format": "jsonl", "path": str(work / "linear")})
lin = []
run_job(spark, job, policy=Alternate(), plan=SPREAD, duration_s=400, checkpoint=work / "ck2",
        max_batches=4, resources=res,
        on_batch=lambda r: lin.append({"batch": r.batch_id, "slots": dict(res.slots),
                                       "placement": r.extra.get("placement", {}).get("where")}),
        params={"interval_s": 0, "stabilization_s": 0, "scale_down_delay_s": 0})
print("RESULT " + json.dumps({"seen": seen, "linear": lin,
                              "plans": {"spread": SPREAD.placement.nodes,
                                        "crowd": CROWD.placement.nodes}}))
spark.stop()
"""


def _unit_of_key(key: object) -> str:
    from streamscale.runtime.spark.routing.routing import instance_of, shard_of

    e, s = instance_of(key, 2), shard_of(key, 4)
    return f"where[{e}]#{s % 2}"


def test_every_task_runs_on_the_executor_its_node_stands_for(
    loopback_2x2: ClusterInfo, tmp_path: Path
) -> None:
    opts = {"keys": "60", "alpha": "1.0", "cost_ms": "0", "start_time": "0",
            "total": "2000", "max_rows_per_batch": "500", "seed": "4"}  # fmt: skip
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    proc = subprocess.run(
        [sys.executable, str(script), loopback_2x2.master_url, str(tmp_path), json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT ") :])
    seen = {s["batch"]: s for s in got["seen"]}
    assert sorted(seen) == [0, 1, 2, 3]
    # the executor behind each node never changed
    slots = [s["slots"] for s in got["seen"]]
    assert all(s == slots[0] for s in slots) and len(set(slots[0].values())) == 4
    frames = []
    for b in range(4):
        df = pd.read_parquet(tmp_path / "out" / f"batch_id={b}")
        placement = got["plans"]["spread" if b % 2 == 0 else "crowd"]
        for key, cwd in zip(df["key"], df["cwd"], strict=True):
            node = placement[_unit_of_key(key)]
            # standalone: <worker dir>/<app id>/<executor id>
            assert Path(cwd).name == slots[0][node], (b, key, cwd, node)
        # Spark's status store saw the same: every task a hit
        fig = seen[b]["placement"]
        assert fig["placement_hit"] == 4 and fig["placement_miss"] == 0, fig
        frames.append(df.assign(batch=b))
    want = generate(opts, 0, int(opts["total"]))["key"].value_counts().sort_index().to_dict()
    last = pd.concat(frames).sort_values("batch").groupby("key")["count"].last()
    assert last.sort_index().to_dict() == want
    # the linear pipeline pins its tasks the same way
    lin = {s["batch"]: s for s in got["linear"]}
    assert sorted(lin) == [0, 1, 2, 3]
    frames = []
    for b in range(4):
        placement = got["plans"]["spread" if b % 2 == 0 else "crowd"]
        slots = lin[b]["slots"]
        parts = sorted((tmp_path / "linear" / f"batch_id={b}").glob("part-*.json"))
        df = pd.concat([pd.read_json(p, lines=True) for p in parts])
        for key, cwd in zip(df["key"], df["cwd"], strict=True):
            assert Path(cwd).name == slots[placement[_unit_of_key(key)]], (b, key, cwd)
        assert lin[b]["placement"]["placement_hit"] == 4, lin[b]
        frames.append(df.assign(batch=b))
    last = pd.concat(frames).sort_values("batch").groupby("key")["count"].last()
    assert {str(k): v for k, v in last.to_dict().items()} == {str(k): v for k, v in want.items()}
