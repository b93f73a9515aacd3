"""``benchmarks/bench_chaos.py`` at CI size: an executor SIGKILLed mid-batch, the driver
SIGKILLed and restarted on its checkpoint and a worker killed and restarted while a load
trace runs, then the state and the
sink checked here against pandas over the generated tuples (not against the script's
own figures).

The script runs as a user runs it (a subprocess), its line recorded into a temporary
directory (``STREAMSCALE_RESULTS_DIR``); ``--keep`` leaves its checkpoint and sink.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from streamscale.runtime.spark.cluster.cluster import java_available

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_chaos.py"


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results"),
           "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def test_a_bad_trace_is_one_line_before_spark_starts(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--trace", "nope.csv", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("bench_chaos: nope.csv: no such trace file")
    assert proc.stdout == "" and not (tmp_path / "results").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_executor_and_driver_kills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    if not java_available():
        pytest.skip("Java is not available")
    from streamscale.runtime.spark.sources.sources import generate
    from streamscale.runtime.spark.state.state import LocalStateBackend
    from streamscale.scenarios.chaos import ChaosConfig

    keep = tmp_path / "keep"
    # seed 9 orders the kinds executor-mid-batch, worker, driver: the fault that recovers
    # slowest (a driver restart, up to a minute under load) comes last, and the 2-minute
    # trace still offers tuples when it comes (faults end once every tuple committed)
    proc = _run(tmp_path, "--smoke", "--minutes", "2", "--faults", "3", "--peak-rate", "60",
                "--kinds", "executor-mid-batch,driver,worker", "--seed", "9",
                "--max-executors", "2", "--keep", str(keep), timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = json.loads(proc.stdout.strip().splitlines()[-1])
    assert line["bench"] == "chaos"
    recorded = (tmp_path / "results" / "chaos.jsonl").read_text().splitlines()
    assert json.loads(recorded[-1])["fault_list"] == line["fault_list"]
    kinds = Counter(f["kind"] for f in line["fault_list"])
    assert sum(kinds.values()) >= 3, line["fault_list"]
    assert kinds["executor-mid-batch"] >= 1 and kinds["driver"] >= 1, line["fault_list"]
    # each fault was followed by a committed batch, which the driver logged
    events = [json.loads(x) for x in (keep / "run" / "events.jsonl").read_text().splitlines()]
    commits = [e["wall"] for e in events if e["ev"] == "commit"]
    starts = {e["incarnation"] for e in events if e["ev"] == "start"}
    assert len(starts) >= 1 + kinds["driver"]  # a new driver process per driver kill
    for f in line["fault_list"]:
        assert f["recovery_s"] is not None and f["recovery_s"] > 0
    assert max(commits) > min(commits)

    # the offered tuples, from the generator (deterministic): the same options the run had
    opts = ChaosConfig(minutes=2, peak_rate=60, seed=9).options()  # the bundled trace
    total = int(opts["total"])
    want = generate(opts, 0, total)
    assert total > 0
    # the sink: every offered tuple's seq exactly once, nothing else
    parts = sorted((keep / "run" / "sink").glob("batch_id=*/part-*.json"))
    sink = pd.concat([pd.read_json(p, lines=True, dtype={"key": str}) for p in parts])
    seqs = Counter(sink["seq"].tolist())
    assert set(seqs) == set(range(total))
    assert max(seqs.values()) == 1
    # each output's running count: pandas' at that tuple (a tuple applied twice shifts it)
    want["count"] = want.groupby("key").cumcount() + 1
    merged = sink.merge(want[["seq", "key", "count"]], on="seq", suffixes=("", "_pd"))
    assert (merged["key"] == merged["key_pd"]).all()
    assert (merged["count"] == merged["count_pd"]).all()
    # every key's committed state: pandas' count and sum over the offered tuples
    state: dict[str, list[float]] = {}
    for shard in LocalStateBackend(keep / "run" / "ckpt" / "state").load_all("calc").values():
        state.update(shard)
    agg = want.groupby("key")["value"].agg(["count", "sum"])
    assert set(state) == set(agg.index)
    for key, (count, total_value) in state.items():
        assert count == agg.at[key, "count"]
        assert math.isclose(total_value, agg.at[key, "sum"], rel_tol=1e-9, abs_tol=1e-6)
    assert line["lost"] == 0 and line["duplicated"] == 0 and line["state_exact"]
