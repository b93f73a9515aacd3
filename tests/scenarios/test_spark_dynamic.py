"""Spark's own dynamic allocation as the surge and trace scenarios run it.

``spark-dynamic`` keeps Spark's defaults (a finished batch's shuffle files and cached
outputs hold an executor for ever) over one task per slot of the largest cluster;
``spark-dynamic-tuned`` bounds every timeout that holds an executor and runs
``static-peak``'s task count. On a loopback standalone cluster, a stream that backs up
and then goes quiet shows the tuned one scaling up on the batches' backlog and releasing
an executor it added, by Spark's own executor list. The run is a subprocess: this test
process may already own a local SparkContext.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.scenarios.surge import DYNAMIC_SETTINGS, SurgeConfig, policy_instances
from streamscale.scenarios.traffic import TrafficConfig

#: every timeout after which Spark may release an idle executor, by what it holds
HOLDS = {
    "nothing": "spark.dynamicAllocation.executorIdleTimeout",
    "cached blocks": "spark.dynamicAllocation.cachedExecutorIdleTimeout",
    "shuffle files": "spark.dynamicAllocation.shuffleTracking.timeout",
}


def _seconds(value: str) -> float:
    assert value.endswith("s") and not value.endswith("ms"), value
    return float(value[:-1])


def test_the_literal_baseline_keeps_sparks_defaults_for_what_holds_an_executor() -> None:
    literal = DYNAMIC_SETTINGS["spark-dynamic"]
    assert literal["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    # Spark's defaults (for ever) for executors holding shuffle files or cached blocks
    assert HOLDS["cached blocks"] not in literal and HOLDS["shuffle files"] not in literal
    assert policy_instances(SurgeConfig(), "spark-dynamic") == 16  # every slot of 8 × 2


def test_the_tuned_baseline_bounds_every_hold_by_a_few_triggers() -> None:
    tuned = DYNAMIC_SETTINGS["spark-dynamic-tuned"]
    cfg = SurgeConfig()
    for holds, key in HOLDS.items():
        assert _seconds(tuned[key]) <= 5 * cfg.trigger_s, holds
    # every other setting as the literal one's, so the two differ only in what is tuned
    literal = DYNAMIC_SETTINGS["spark-dynamic"]
    assert {k: v for k, v in tuned.items() if k not in HOLDS.values()} == {
        k: v for k, v in literal.items() if k not in HOLDS.values()
    }


@pytest.mark.parametrize(
    ("cfg", "tasks"),
    [
        (SurgeConfig(), 8),  # 300 t/s × 20 ms: 6 cores + 1 -> 4 executors of 2
        (SurgeConfig(executor_cores=1, max_executors=4, base_rate=40.0, cost_ms=25.0), 4),
        (TrafficConfig(base_rate=50.0, peak_factor=5.0), 6),  # 250 t/s: 5 + 1 cores
    ],
)
def test_the_tuned_baseline_runs_static_peaks_tasks(cfg: SurgeConfig, tasks: int) -> None:
    assert policy_instances(cfg, "spark-dynamic-tuned") == tasks
    assert policy_instances(cfg, "spark-dynamic-tuned") == policy_instances(cfg, "static-peak")
    assert policy_instances(cfg, "spark-dynamic") == cfg.max_executors * cfg.executor_cores


#: 40 tuples/s at 25 ms waited each over 1 s triggers until PAUSE_S of the generator's
#: clock (8 s of work: the first batches, slow on a loaded host, back up on one
#: executor), then nothing for the rest of the run (83 s from the query's start); 1-core
#: executors, at most 3 (static-peak's for the configured 80 tuples/s)
_RUN = r"""
import json, sys
from dataclasses import asdict
from pathlib import Path
from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.driver.runner import run_job
from streamscale.runtime.spark.keyed.functions import calculator
from streamscale.scenarios.surge import SurgeConfig, SurgeJob, run_policy

work, pause_s = Path(sys.argv[1]), float(sys.argv[2])
cfg = SurgeConfig(base_rate=40.0, peak_factor=2.0, cost_ms=25.0, keys=200, shards=8,
                  trigger_s=1.0, latency_target_ms=4000.0, executor_cores=1,
                  max_executors=3, warmup_s=5.0, phase_s=18.0)


def build(cfg, instances):
    opts = {**cfg.source_options(), "rate": "40", "schedule": f"0:40,{pause_s}:0"}
    return Job.simple("calc", calculator, source_options=opts, instances=instances,
                      shards=cfg.shards, cost_ms=cfg.cost_ms, trigger_s=cfg.trigger_s,
                      params={"cost_kind": "wall"})


info = cluster_up(1, 3, memory="2g", directory=work / "cluster")
try:
    o = run_policy(info.master_url, cfg, "spark-dynamic-tuned", on_batch=lambda row: None,
                   job=SurgeJob(build, run_job))
finally:
    cluster_down(work / "cluster")
print(json.dumps({"error": o.error, "t0": o.t0, "end_s": o.end_s,
                  "instances": o.settings.get("instances"),
                  "spans": [asdict(s) for s in o.spans],
                  "executors": [asdict(e) for e in o.executors]}))
"""

PAUSE_S = 8.0


@pytest.mark.spark
@pytest.mark.slow
def test_the_tuned_baseline_releases_an_executor_once_the_stream_goes_quiet(
    tmp_path: Path,
) -> None:
    from streamscale.runtime.spark.cluster.cluster import java_available

    if not java_available():
        pytest.skip("Java is not available")
    script = tmp_path / "run.py"
    script.write_text(_RUN)
    res = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(PAUSE_S)],
        capture_output=True, text=True, timeout=420,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["error"] is None
    assert out["instances"] == 3  # static-peak's: (2 cores of work + 1) of 1-core executors
    # the batches took every tuple emitted before the quiet (40 a second)
    assert max((s["end_seq"] for s in out["spans"]), default=0) == 40 * PAUSE_S
    # Spark's executor list: Spark added an executor for the query's backlog (after the
    # generator started; before it, executors come and go with the session's warm-up) and
    # then scaled back down before the run ended, removing executors once they had run no
    # task for the idle timeout (after the last batch, or while a long batch's last tasks
    # ran elsewhere). Which ones it removes is Spark's choice: it may keep the newest as
    # its minimum of one and release the older ones.
    t0 = out["t0"]
    seen = {  # seconds from the generator's start, for the messages
        "batches": [(s["batch_id"], round(s["end_s"] - t0, 1)) for s in out["spans"]],
        "executors": [
            (
                e["executor"],
                round(e["added_s"] - t0, 1),
                e["removed_s"] and round(e["removed_s"] - t0, 1),
            )
            for e in out["executors"]
        ],
        "end": round(out["end_s"] - t0, 1),
    }
    added = [e for e in out["executors"] if e["added_s"] > t0]
    assert added, seen  # scaled up beyond the minimum of one on the backlog
    peak = max(e["added_s"] for e in added)
    alive_at_peak = [e for e in out["executors"] if e["removed_s"] is None or e["removed_s"] > peak]
    released = [e for e in alive_at_peak if e["removed_s"] is not None]
    assert released, seen  # fewer executors at the end than at the peak
    idle = _seconds(DYNAMIC_SETTINGS["spark-dynamic-tuned"][HOLDS["nothing"]])
    assert all(idle < e["removed_s"] - e["added_s"] for e in released)
    assert all(e["removed_s"] <= out["end_s"] for e in released)
