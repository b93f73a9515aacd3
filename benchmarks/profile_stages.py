"""Where a micro-batch's fixed cost goes, operator by operator (Spark's own records).

Runs each workload (``--workloads``, default Nexmark ``q5``, ``q7``, ``q8`` and
``chain3``, a chain of three keyed operators on one key, :func:`bench_stages.chain_job`)
with Spark's event log on, and labels every Spark job with the part of the batch that
launched it (the job's ``spark.job.description``): ``keyed:<op>`` (one keyed operator's
stage: :func:`~streamscale.runtime.spark.keyed.agg.operator.run_agg`,
:func:`~streamscale.runtime.spark.keyed.keyed.run_keyed` or a fused chain), ``tag:<op>``
(a join's sides tagged), ``map:<op>`` (a stateless operator's schema), ``sink:<op>``,
``clock`` (the event-time clock), ``commit`` (state commits) and ``driver`` (the rest of
the body: routing, control step, records). Per batch and part it reports, from Spark's
listener (the event log: job start/end, stage completion and task metrics):

* ``jobs``, ``stages`` (stages that ran; skipped ones are not counted), ``tasks``;
* ``shuffle_write_bytes`` (what the part's exchanges wrote) and ``shuffle_read_bytes``;
* ``jobs_s``: wall seconds of its jobs; ``wall_s``: the part's wall seconds in the
  driver; ``driver_s`` = ``wall_s`` − ``jobs_s`` (planning, analysis, py4j);
* ``py4j``: round trips of the batch thread to the JVM;
* ``state_read_bytes`` / ``state_write_bytes`` (keyed parts: the tasks' own figures);

and per batch Spark's ``durationMs`` (``triggerExecution``, ``queryPlanning``,
``walCommit``, ``addBatch``, …). One JSON line per (workload, batch, part) on stdout;
``--markdown FILE`` writes the table of medians over the batches with input after the
first (the docs' table, ``docs/guide/stages.md``).

Run: ``.venv/bin/python benchmarks/profile_stages.py [--events 200000] [--files 4]
[--rows 50000] [--batches 5] [--markdown table.md]``. Prints only; it records no
results file (bench_stages.py and bench_nexmark.py do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

CORES = 2
PARTS_ORDER = ("keyed", "tag", "map", "sink", "clock", "commit", "driver")


class Labels:
    """The part of the batch running now (the batch thread's stack of labels), the py4j
    round trips and wall seconds of each, per batch."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.stack: list[str] = []
        self.batch = -1
        self.thread = 0
        self.py4j: dict[tuple[int, str], int] = defaultdict(int)
        self.wall: dict[tuple[int, str], float] = defaultdict(float)
        self.state: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        self.body: dict[int, float] = {}
        #: py4j round trips by (batch, part, calling line of streamscale), with --callers
        self.callers: dict[tuple[int, str, str], int] | None = None

    @property
    def part(self) -> str:
        return self.stack[-1] if self.stack else "driver"

    def describe(self) -> None:
        self.sc.setLocalProperty("spark.job.description", f"ss|{self.batch}|{self.part}")

    def wrap(self, fn: Callable[..., Any], label: Callable[..., str]) -> Callable[..., Any]:
        def run(*a: Any, **kw: Any) -> Any:
            if threading.get_ident() != self.thread:
                return fn(*a, **kw)
            name = label(*a, **kw)
            outer = self.part
            self.stack.append(name)
            self.describe()
            t0 = time.perf_counter()
            try:
                res = fn(*a, **kw)
            finally:
                dt = time.perf_counter() - t0
                self.wall[(self.batch, name)] += dt
                self.stack.pop()
                if self.stack:  # the outer part's own time excludes this one's
                    self.wall[(self.batch, outer)] -= dt
                self.describe()
            got = res[1] if isinstance(res, tuple) and len(res) == 2 else None
            for stats in got if isinstance(got, tuple) else (got,):  # a fused chain: each
                if name.startswith("keyed:") and hasattr(stats, "tasks") and outer != name:
                    st = self.state[(self.batch, name)]
                    st[0] += sum(t.state_read_bytes for t in stats.tasks)
                    st[1] += sum(v[2] for t in stats.tasks for v in t.shards.values())
            return res

        run._labelled = True  # type: ignore[attr-defined]
        return run


def _install(labels: Labels) -> Callable[[], None]:
    """Label the batch's parts; returns the undo."""
    from streamscale.runtime.spark.driver import graph, graph_batch
    from streamscale.runtime.spark.keyed.agg import operator as agg_op

    undo: list[tuple[Any, str, Any]] = []

    def patch(obj: Any, name: str, label: Callable[..., str]) -> None:
        fn = getattr(obj, name, None)
        if fn is None or getattr(fn, "_labelled", False):
            return
        undo.append((obj, name, fn))
        setattr(obj, name, labels.wrap(fn, label))

    def op_of(spec_pos: int) -> Callable[..., str]:
        return lambda *a, **kw: (
            f"keyed:{(a[spec_pos] if len(a) > spec_pos else kw['spec']).operator}"
        )

    patch(agg_op, "run_agg", op_of(1))
    patch(graph_batch, "run_keyed", op_of(1))
    patch(agg_op, "run_chain", lambda *a, **kw: "keyed:" + "+".join(
        [(a[1] if len(a) > 1 else kw["spec"]).operator,
         *(f.spec.operator for f in kw.get("then", ()))]))  # fmt: skip
    patch(graph, "_write_sink", lambda node, *a, **kw: f"sink:{node.name}")
    patch(graph, "_two_sided", lambda node, *a, **kw: f"tag:{node.name}")
    patch(graph, "map_stateless", lambda *a, **kw: f"map:{a[4] if len(a) > 4 else kw['name']}")
    patch(graph_batch, "control_step", lambda *a, **kw: "driver")
    body_run = graph_batch.GraphBatchBody._run

    def run(self: Any, batch_df: Any, batch_id: int) -> None:
        labels.batch, labels.thread = batch_id, threading.get_ident()
        for obj, n, key in ((type(self.backend), "commit", "commit"),
                            (type(self.query_clock), "after_batch", "clock")):  # fmt: skip
            patch(obj, n, lambda *a, _k=key, **kw: _k)
        labels.describe()
        t0 = time.perf_counter()
        try:
            body_run(self, batch_df, batch_id)
        finally:
            dt = time.perf_counter() - t0
            labels.body[batch_id] = dt
            labels.wall[(batch_id, "driver")] += dt - sum(
                v for (b, p), v in labels.wall.items() if b == batch_id and p != "driver"
            )
            labels.sc.setLocalProperty("spark.job.description", None)

    graph_batch.GraphBatchBody._run = run  # type: ignore[method-assign]
    undo.append((graph_batch.GraphBatchBody, "_run", body_run))
    client = labels.sc._gateway._gateway_client
    send = client.send_command

    def counted(*a: Any, **kw: Any) -> Any:
        if threading.get_ident() == labels.thread and labels.batch >= 0:
            labels.py4j[(labels.batch, labels.part)] += 1
            if labels.callers is not None:
                f = sys._getframe(1)
                while f is not None and "/src/streamscale/" not in f.f_code.co_filename:
                    f = f.f_back
                if f is not None:
                    where = f.f_code.co_filename.split("/src/streamscale/")[1]
                    key = (labels.batch, labels.part, f"{where}:{f.f_lineno} {f.f_code.co_name}")
                    labels.callers[key] += 1
        return send(*a, **kw)

    client.send_command = counted

    def restore() -> None:
        client.send_command = send
        for obj, name, fn in reversed(undo):
            setattr(obj, name, fn)

    return restore


def _events(log_dir: Path) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """Jobs (description, submit/end ms, stage ids) and completed stages (tasks, shuffle
    bytes) from the event log."""
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    for f in sorted(p for p in log_dir.rglob("*") if p.is_file()):
        if f.name.startswith("appstatus"):
            continue
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerJobStart":
                props = ev.get("Properties") or {}
                jobs[ev["Job ID"]] = {
                    "desc": props.get("spark.job.description") or "",
                    "start": ev["Submission Time"],
                    "stages": list(ev.get("Stage IDs", [])),
                    "names": [i.get("Stage Name", "") for i in ev.get("Stage Infos", [])],
                }
            elif kind == "SparkListenerJobEnd":
                jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
            elif kind == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                acc = {a.get("Name"): a.get("Value") for a in info.get("Accumulables", [])}
                stages[info["Stage ID"]] = {
                    "tasks": info.get("Number of Tasks", 0),
                    "write": int(acc.get("internal.metrics.shuffle.write.bytesWritten", 0) or 0),
                    "read": int(acc.get("internal.metrics.shuffle.read.remoteBytesRead", 0) or 0)
                    + int(acc.get("internal.metrics.shuffle.read.localBytesRead", 0) or 0),
                }
    return jobs, stages


def _rows(
    labels: Labels, log_dir: Path, progress: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    jobs, stages = _events(log_dir)
    out: dict[tuple[int, str], dict[str, Any]] = {}

    def row(b: int, part: str) -> dict[str, Any]:
        return out.setdefault((b, part), {
            "batch": b, "part": part, "jobs": 0, "stages": 0, "tasks": 0,
            "shuffle_write_bytes": 0, "shuffle_read_bytes": 0, "jobs_s": 0.0, "job_list": [],
        })  # fmt: skip

    for j in jobs.values():
        desc = j["desc"]
        if not desc.startswith("ss|"):
            continue
        _, b, part = desc.split("|", 2)
        r = row(int(b), part)
        r["jobs"] += 1
        r["jobs_s"] += (j.get("end", j["start"]) - j["start"]) / 1000.0
        ran = [s for s in j["stages"] if s in stages]
        r["job_list"].append(
            [
                j.get("end", j["start"]) - j["start"],
                len(ran),
                (j["names"][-1] if j["names"] else "")[:50],
            ]
        )
        for s in j["stages"]:
            st = stages.get(s)
            if st is not None:
                r["stages"] += 1
                r["tasks"] += st["tasks"]
                r["shuffle_write_bytes"] += st["write"]
                r["shuffle_read_bytes"] += st["read"]
    for (b, part), v in labels.wall.items():
        row(b, part)["wall_s"] = v
    for (b, part), n in labels.py4j.items():
        row(b, part)["py4j"] = n
    for (b, part), (rd, wr) in labels.state.items():
        r = row(b, part)
        r["state_read_bytes"], r["state_write_bytes"] = rd, wr
    lines = []
    for (b, _), r in sorted(out.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]))):
        r.setdefault("wall_s", 0.0)
        r.setdefault("py4j", 0)
        r["driver_s"] = round(max(0.0, r["wall_s"] - r["jobs_s"]), 3)
        r["wall_s"] = round(r["wall_s"], 3)
        r["jobs_s"] = round(r["jobs_s"], 3)
        p = progress.get(b, {})
        r["rows"] = p.get("rows")
        lines.append(r)
    return lines


def _order(part: str) -> tuple[int, str]:
    kind = part.split(":", 1)[0]
    return (PARTS_ORDER.index(kind) if kind in PARTS_ORDER else len(PARTS_ORDER), part)


def progress_listener(spark: Any, progress: dict[int, dict[str, Any]]) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            progress[p.batchId] = {"rows": p.numInputRows, "trigger_ms": dict(p.durationMs)}

    listener = Listener()
    spark.streams.addListener(listener)
    return listener


def profile(
    workload: str, args: argparse.Namespace, work: Path, events: Path
) -> list[dict[str, Any]]:
    """One workload in its own Spark application (its own event log)."""
    from streamscale.runtime.spark.executors.session import build_session

    log_dir = work / f"eventlog-{workload}"
    log_dir.mkdir(parents=True)
    spark = build_session(
        f"local[{CORES}]", shuffle_partitions=CORES,
        conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(log_dir),
              "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
              **dict(c.split("=", 1) for c in args.conf)},
    )  # fmt: skip
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    progress: dict[int, dict[str, Any]] = {}
    listener = progress_listener(spark, progress)
    labels = Labels(spark.sparkContext)
    if args.callers:
        labels.callers = defaultdict(int)
    restore = _install(labels)
    t0 = time.perf_counter()
    try:
        if workload.startswith("chain"):
            from bench_stages import run_chain_streamscale

            run_chain_streamscale(
                spark, int(workload[5:]), args.rows, args.batches, work / workload
            )
        else:
            from streamscale.nexmark.streamscale_engine import run_streamscale

            run_streamscale(spark, workload, events, work / workload, sink="none")
    finally:
        restore()
    wall = time.perf_counter() - t0
    time.sleep(1.0)
    spark.streams.removeListener(listener)
    spark.stop()
    lines = _rows(labels, log_dir, progress)
    for r in lines:
        r["workload"] = workload
    for b, p in sorted(progress.items()):
        lines.append({"workload": workload, "batch": b, "part": "batch", "rows": p["rows"],
                      "body_s": round(labels.body.get(b, 0.0), 3), **p["trigger_ms"]})  # fmt: skip
    lines.append({"workload": workload, "part": "run", "wall_s": round(wall, 3)})
    for (b, part, where), n in sorted((labels.callers or {}).items()):
        if b == 2:  # one batch after the first
            lines.append({"workload": workload, "batch": b, "part": "py4j-caller",
                          "of": part, "where": where, "py4j": n})  # fmt: skip
    return lines


def table(lines: list[dict[str, Any]]) -> str:
    """Medians per (workload, part) over the batches with input after the first."""
    from streamscale.formatting import markdown_table

    lines = [r for r in lines if r.get("part") != "py4j-caller"]
    steady: dict[str, set[int]] = defaultdict(set)
    for r in lines:
        if r.get("part") == "batch" and r.get("rows") and r["batch"] > 0:
            steady[r["workload"]].add(r["batch"])
    cols = ("jobs", "stages", "tasks", "py4j", "wall_s", "jobs_s", "driver_s",
            "shuffle_write_bytes", "state_read_bytes", "state_write_bytes")  # fmt: skip
    rows = []
    for wl in dict.fromkeys(r["workload"] for r in lines):
        parts = dict.fromkeys(
            r["part"] for r in lines
            if r["workload"] == wl and r.get("batch") in steady[wl] and r["part"] != "batch"
        )  # fmt: skip
        for part in sorted(parts, key=_order):
            got = [r for r in lines if r["workload"] == wl and r["part"] == part
                   and r.get("batch") in steady[wl]]  # fmt: skip
            rows.append([wl, part, *(_median(got, c) for c in cols)])
        batches = [r for r in lines if r["workload"] == wl and r["part"] == "batch"
                   and r["batch"] in steady[wl]]  # fmt: skip
        jobs = [sum(r["jobs"] for r in lines if r["workload"] == wl and r.get("batch") == b
                    and r["part"] != "batch") for b in sorted(steady[wl])]  # fmt: skip
        py4j = [sum(r.get("py4j", 0) for r in lines if r["workload"] == wl
                    and r.get("batch") == b and r["part"] != "batch") for b in sorted(steady[wl])]  # fmt: skip
        rows.append([wl, "**batch** (trigger)", _med(jobs), "", "", _med(py4j),
                     _median(batches, "body_s"), "", "", "", "", ""])  # fmt: skip
        rows.append([wl, "Spark: triggerExecution s", "", "", "", "",
                     _median(batches, "triggerExecution", 1e-3), "", "",
                     "", "", ""])  # fmt: skip
        rows.append([wl, "Spark: queryPlanning + walCommit + commitOffsets s", "", "", "", "",
                     _med([(r.get("queryPlanning", 0) + r.get("walCommit", 0)
                            + r.get("commitOffsets", 0)) / 1000 for r in batches]),
                     "", "", "", "", ""])  # fmt: skip
    return markdown_table(("workload", "part", *cols), rows)


def _med(vals: list[float]) -> Any:
    if not vals:
        return ""
    m = statistics.median(vals)
    return round(m, 3) if isinstance(m, float) else m


def _median(rows: list[dict[str, Any]], col: str, scale: float = 1.0) -> Any:
    vals = [r[col] * scale for r in rows if r.get(col) is not None]
    if not vals:
        return ""
    m = statistics.median(vals)
    return round(float(m), 3) if isinstance(m, float) or scale != 1.0 else int(m)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="q5,q7,q8,chain3")
    ap.add_argument("--events", type=int, default=200_000, help="Nexmark events")
    ap.add_argument("--files", type=int, default=4, help="Nexmark files per table (batches)")
    ap.add_argument("--rows", type=int, default=50_000, help="chain: rows a batch")
    ap.add_argument("--batches", type=int, default=5, help="chain: batches")
    ap.add_argument("--conf", action="append", default=[], help="KEY=VALUE Spark setting")
    ap.add_argument("--callers", action="store_true", help="py4j round trips by line")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table here")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from streamscale.nexmark.files import write_events
    from streamscale.nexmark.generator import GeneratorConfig

    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    lines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="streamscale-profile-stages-") as tmp:
        work = Path(tmp)
        if any(not w.startswith("chain") for w in workloads):
            cfg = GeneratorConfig.constant(10_000.0, seed=7)
            write_events(cfg, args.events, work / "events", files=args.files)
        for wl in workloads:
            for attempt in range(3):  # a loaded host can time out a Python worker's start
                try:
                    got = profile(wl, args, work / f"try-{attempt}", work / "events")
                    break
                except Exception as exc:
                    print(f"{wl}: attempt {attempt} failed: {str(exc)[:300]}", file=sys.stderr)
            else:
                continue
            for r in got:
                print(json.dumps(r), flush=True)
            lines.extend(got)
    md = table(lines)
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"load_avg {load}\n{md}", file=sys.stderr)
    if args.markdown is not None:
        args.markdown.write_text(md + "\n")


if __name__ == "__main__":
    main()
