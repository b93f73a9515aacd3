"""Where a Nexmark batch of the ``streamscale`` engine spends its time.

Runs one query (``--query``, default q8) of :mod:`streamscale.nexmark.streamscale_engine`
on bench_nexmark's harness (``--events`` events, ``--files`` files per table, one file of
each table per batch, counting sink) with Spark's event log on, and prints one JSON line
per batch splitting its time into:

* ``trigger_ms``: Spark's ``durationMs`` of the batch (``triggerExecution`` and its parts:
  ``latestOffset``, ``queryPlanning``, ``walCommit``, ``addBatch`` — the foreachBatch
  body —, ``commitOffsets``);
* ``jobs``: the Spark jobs the batch ran (from the event log: count and wall ms each,
  with their stages' names);
* ``py4j``: the py4j round trips of the foreachBatch body's thread;
* ``parts_s``: wall seconds of the body's parts (keyed stages, sinks, state commit,
  controller step, event-time clock);

then a ``cProfile`` of the foreachBatch bodies (top functions by cumulative time).

Run: ``.venv/bin/python benchmarks/profile_nexmark.py [--query q8] [--events 1000000]``.
Prints only; it records no results file (bench_nexmark.py does).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

CORES = 2


def _timed(table: dict[str, float], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            table[key] += time.perf_counter() - t0

    run._timed = True  # type: ignore[attr-defined]
    return run


def _jobs(log_dir: Path) -> list[dict[str, Any]]:
    """Spark jobs from the event log: id, submit and end ms, stage names."""
    jobs: dict[int, dict[str, Any]] = {}
    for f in sorted(p for p in log_dir.rglob("*") if p.is_file()):
        if f.name.startswith("appstatus"):
            continue
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerJobStart":
                names = [s.get("Stage Name", "") for s in ev.get("Stage Infos", [])]
                jobs[ev["Job ID"]] = {"id": ev["Job ID"], "start": ev["Submission Time"],
                                      "stages": len(names), "name": names[-1] if names else ""}  # fmt: skip
            elif kind == "SparkListenerJobEnd":
                jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
    return sorted(jobs.values(), key=lambda j: j["start"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query", default="q8")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from profile_stages import progress_listener

    from streamscale.nexmark.files import write_events
    from streamscale.nexmark.generator import GeneratorConfig
    from streamscale.nexmark.streamscale_engine import run_streamscale
    from streamscale.runtime.spark.driver import graph, graph_batch
    from streamscale.runtime.spark.executors.session import build_session

    tmp = Path(tempfile.mkdtemp(prefix="streamscale-profile-nexmark-"))
    log_dir = tmp / "eventlog"
    log_dir.mkdir()
    spark = build_session(
        f"local[{CORES}]", shuffle_partitions=CORES,
        conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(log_dir),
              "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"},
    )  # fmt: skip
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    events = tmp / "events"
    write_events(GeneratorConfig.constant(10_000.0, seed=7), args.events, events, files=args.files)

    progress: dict[int, dict[str, Any]] = {}  # rows and trigger times by batch id
    listener = progress_listener(spark, progress)
    client = spark.sparkContext._gateway._gateway_client
    calls = [0]
    send = client.send_command

    callers: dict[str, int] = defaultdict(int)

    body_thread = [0]

    def counted(*a: Any, **kw: Any) -> Any:
        if threading.get_ident() != body_thread[0]:  # the driver's polling, listeners
            return send(*a, **kw)
        calls[0] += 1
        f = sys._getframe(1)
        while f is not None and "/src/streamscale/" not in f.f_code.co_filename:
            f = f.f_back
        if f is not None:
            where = f.f_code.co_filename.split("/src/streamscale/")[1]
            callers[f"{where}:{f.f_lineno} {f.f_code.co_name}"] += 1
        return send(*a, **kw)

    client.send_command = counted
    parts: dict[str, float] = defaultdict(float)
    for mod, names in ((graph_batch, ("run_graph_batch", "control_step", "run_keyed",
                                      "count_dead_letters", "release")),
                       (graph, ("_write_sink", "map_stateless"))):  # fmt: skip
        for n in names:
            setattr(mod, n, _timed(parts, n, getattr(mod, n)))
    from streamscale.runtime.spark.keyed.agg import operator as agg_op

    agg_op.run_agg = _timed(parts, "run_agg", agg_op.run_agg)
    agg_op._partials = _timed(parts, "agg._partials", agg_op._partials)
    body_run = graph_batch.GraphBatchBody._run
    prof = cProfile.Profile()
    per_batch: list[dict[str, Any]] = []

    def run(self: Any, batch_df: Any, batch_id: int) -> None:
        parts.clear()
        body_thread[0] = threading.get_ident()
        c0, t0, e0 = calls[0], time.perf_counter(), time.time() * 1000
        for obj, n, key in ((self.backend, "commit", "state.commit"),
                            (self.query_clock, "after_batch", "clock.after_batch")):  # fmt: skip
            cls = type(obj)
            if not getattr(getattr(cls, n), "_timed", False):
                setattr(cls, n, _timed(parts, key, getattr(cls, n)))
        prof.enable()
        try:
            body_run(self, batch_df, batch_id)
        finally:
            prof.disable()
        per_batch.append({"batch": batch_id, "body_s": round(time.perf_counter() - t0, 3),
                          "py4j": calls[0] - c0, "span_ms": (e0, time.time() * 1000),
                          "parts_s": {k: round(v, 3) for k, v in parts.items()}})  # fmt: skip

    graph_batch.GraphBatchBody._run = run
    t0 = time.perf_counter()
    res = run_streamscale(spark, args.query, events, tmp / "out", sink="none")
    wall = time.perf_counter() - t0
    time.sleep(2.0)
    spark.streams.removeListener(listener)
    spark.stop()
    jobs = _jobs(log_dir)
    for b in per_batch:
        b.update(progress.get(b["batch"], {}))
        lo, hi = b.pop("span_ms")
        inside = [j for j in jobs if lo <= j["start"] <= hi]
        b["jobs"] = [(j["id"], j.get("end", j["start"]) - j["start"], j["name"][:40])
                     for j in inside]  # fmt: skip
        b["jobs_ms"] = sum(j.get("end", j["start"]) - j["start"] for j in inside)
        print(json.dumps({"bench": "profile_nexmark", **b}), flush=True)
    print(json.dumps({"bench": "profile_nexmark", "query": args.query, "wall_s": round(wall, 3), "batches": res["batches"],
                      "spark_jobs": len(jobs)}))  # fmt: skip
    for j in jobs:
        print(json.dumps({"bench": "profile_nexmark", "job": j["id"], "ms": j.get("end", j["start"]) - j["start"],
                          "start": j["start"], "stages": j["stages"], "name": j["name"]}))  # fmt: skip
    top = sorted(callers.items(), key=lambda kv: -kv[1])[: args.top]
    print(json.dumps({"bench": "profile_nexmark", "py4j_by_caller": dict(top)}))
    if not per_batch:  # the query ran no keyed batch body: nothing was profiled
        print(f"profile_nexmark: {args.query}: no batch ran the graph's batch body",
              file=sys.stderr)  # fmt: skip
        return
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
