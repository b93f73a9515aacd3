"""Nexmark throughput: every query on streamscale and on Spark's own engine, one harness.

The harness (``harness`` in every line): ``--events`` Nexmark events (rate ``--rate``
events/s of event time, seed 7) written once by ``streamscale nexmark generate`` as
``--files`` Parquet files per table; every run reads the same files, one file of each
table per micro-batch, and writes to a sink that only counts (Spark's ``noop`` format,
streamscale's ``none`` sink), at zero per-tuple cost. Local Spark, 2 cores, 2 shuffle
partitions for every run.

* ``streamscale``: the query's job on streamscale's Python API
  (:mod:`streamscale.nexmark.streamscale_engine`) under ``--policy`` (keyed operators: 2
  instances × 8 shards), a streaming query; ``rows_per_s`` = input rows of the batches
  after the first ÷ their Spark ``triggerExecution`` seconds;
* ``spark-sql``: the query in Spark SQL (:mod:`streamscale.nexmark.spark_sql`). Where
  Spark streams it (Q0-Q3, Q11) it is timed like streamscale; where it does not (Q4-Q8:
  ``spark_mode`` ``batch``) it is one batch job over all the files, run once to warm up
  and timed the second time, ``rows_per_s`` = the tables' rows ÷ its wall seconds (no
  per-batch overhead, so the batch line is an upper bound of a streaming run);
* ``streamscale-1batch`` (beside those batch lines only): the streamscale job over all
  the files in one micro-batch, run once to warm up and timed the second time by the
  batch's own duration (streamscale's ``GraphBatch.duration_s``: the whole DAG and its
  sink), ``rows_per_s`` = the tables' rows ÷ that: the same shape as the batch line.

One JSON line per query, engine and repeat: ``{"bench": "nexmark", "query", "engine",
"rows_per_s", "ratio_vs_spark_sql", "repeat", "position", ...}``, ``ratio_vs_spark_sql``
= rows_per_s ÷ the spark-sql line's of the same query in the same repeat (None without
one). Lines are appended to ``benchmarks/results/nexmark.jsonl``.

Fair order: ``--repeats N`` (1 to 20, default 1) runs every engine of a query N times,
the order rotated by one at each repeat (:func:`run_order`), so none always runs first
or last; every engine line carries ``repeat`` (0-based) and ``position`` (its place in
that repeat's order), and a repeat's lines are printed when the repeat has run (its
spark-sql line gives their ratios). With two engines or more, the query's first engine
runs once more after its repeats: that line carries ``"order_check": true`` (``repeat``
N, ``position`` 0, counted in no summary; its ratio against itself alone: 1.0 for
spark-sql, else None) and an ``{"figure": "order_check", "query", "engine"}`` line gives
its ``rows_per_s`` beside the first run's (``first``, ``again``) and
``again_over_first``. Last, one ``{"figure": "summary", "query", "engine"}`` line per
engine: ``repeats`` and the median, min and max over the repeats of ``rows_per_s`` and
of ``ratio_vs_spark_sql`` (each where the repeats have one). Then the next query.

Run: ``.venv/bin/python benchmarks/bench_nexmark.py [--quick] [--events N] [--files F]
[--queries q0,q5] [--policy static] [--repeats 3]``.

``--surge``: the surge scenario of ``bench_autoscale`` on Q5 and Q8 instead
(:mod:`streamscale.nexmark.surge`): a loopback standalone cluster (``--workers`` ×
``--worker-cores`` task slots, executors of 2 cores), the bundled Nexmark source offering
events on the scenario's base → peak → base schedule, the per-tuple cost *waited*
(``cost_kind: wall``: emulated cores on this small machine), each policy
(``--policies``, default elastic, static-peak, spark-dynamic) scored by
``surge_score`` (``slo_tuples`` tuple-weighted, core-seconds billed from each executor's
request), then ``bench_autoscale``'s ratio line per query. ``--phase`` and
``--warmup`` shorten the phases (a quick run: ``--phase 15 --warmup 30``); ``--cost-ms``
is the waited cost per event (5 ms: see :data:`SURGE_COST_MS`). Lines go to
``benchmarks/results/nexmark.jsonl`` (``"bench": "nexmark-surge"``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _fair import bad_repeats, number, order_check, over, run_order, spread
from _results import record

from streamscale.nexmark.files import write_events
from streamscale.nexmark.generator import GeneratorConfig
from streamscale.nexmark.results import QUERIES, check_query
from streamscale.nexmark.spark_sql import MODES, run_spark_sql
from streamscale.nexmark.streamscale_engine import run_streamscale
from streamscale.scenarios.spark_log import ProgressLog

CORES = 2
#: The surge's per-event cost. bench_autoscale's 20 ms puts Nexmark's hot keys — half of a
#: batch's bids on one auction (Q5's key), three quarters of a window's auctions on one
#: seller (Q8's) — at about 1 core on one key at the base rate and 3 at the peak; no keyed
#: operator splits a key, so no policy serves that. At 5 ms the hot key needs < 1 core at
#: the peak (0.75 for Q5, 0.85 for Q8) and the whole load 0.5 cores at base, 1.5 at the peak.
SURGE_COST_MS = 5.0
HARNESS = (
    "same Nexmark files per engine, one file per table per batch, counting sink (noop/none), "
    "streaming: rows of batches after the first / Spark triggerExecution; batch: 2nd run wall"
)
TABLES_OF = {"q3": ("person", "auction"), "q4": ("auction", "bid"), "q6": ("auction", "bid"),
             "q8": ("person", "auction")}  # fmt: skip
#: the figures of an engine line that its summary line gives
SUMMARIZED = ("rows_per_s", "ratio_vs_spark_sql")
#: the figures that the order check gives
CHECKED = ("rows_per_s",)

#: One run: (engine, query, repeat) → its line (``engine``, ``rows_per_s``: None when
#: not timed, ...); :func:`query_lines` adds the ratio, ``repeat`` and ``position``.
Runner = Callable[[str, str, int], dict[str, Any]]


def _streaming_rate(log: ProgressLog) -> tuple[float, int, float, int]:
    """(rows/s, rows, seconds, batches) of the batches with rows after the first."""
    batches = [p for p in sorted(log.settle(), key=lambda p: p.batch_id) if p.rows > 0][1:]
    rows = sum(p.rows for p in batches)
    secs = sum(p.trigger_ms for p in batches) / 1000.0
    return (rows / secs if secs else float("nan")), rows, secs, len(batches)


def _run(spark: Any, engine: str, q: str, events: Path, work: Path, policy: str,
         rows_of: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    out = work / f"{q}-{engine}"
    if engine == "streamscale-1batch":  # the whole input as one batch, like spark-sql's batch
        files = int(json.loads((events / "nexmark.json").read_text())["files"])
        runs = [run_streamscale(spark, q, events, out, policy=policy, sink="none",
                                files_per_trigger=files) for _ in range(2)]  # fmt: skip
        secs = runs[1]["committed"][0].duration_s
        rows = sum(rows_of[t] for t in TABLES_OF.get(q, ("bid",)))
        return {"rows": rows, "seconds": round(secs, 3), "rows_per_s": rows / secs,
                "batches": 1, "policy": policy}  # fmt: skip
    if engine == "spark-sql" and MODES[q] == "batch":
        run_spark_sql(spark, q, events, out, sink="noop")  # warm-up
        t0 = time.perf_counter()
        run_spark_sql(spark, q, events, out, sink="noop")
        secs = time.perf_counter() - t0
        rows = sum(rows_of[t] for t in TABLES_OF.get(q, ("bid",)))
        return {"spark_mode": "batch", "rows": rows, "seconds": round(secs, 3),
                "rows_per_s": rows / secs, "batches": 1}  # fmt: skip
    log = ProgressLog().attach(spark)
    try:
        if engine == "spark-sql":
            run_spark_sql(spark, q, events, out, sink="noop")
        else:
            run_streamscale(spark, q, events, out, policy=policy, sink="none")
        rate, rows, secs, n = _streaming_rate(log)
    finally:
        log.detach()
    line: dict[str, Any] = {"rows": rows, "seconds": round(secs, 3), "rows_per_s": rate,
                            "batches": n}  # fmt: skip
    if engine == "spark-sql":
        line["spark_mode"] = "streaming " + MODES[q]
    else:
        line["policy"] = policy
    return line


def surge(args: argparse.Namespace, argv: list[str]) -> None:
    """The surge scenario on each of ``args.queries`` (Q5, Q8), every policy in turn."""
    from bench_autoscale import ratios

    from streamscale.nexmark.surge import ROWS_PER_EVENT, nexmark_job, wait_ms
    from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
    from streamscale.scenarios.surge import SurgeConfig, config_dict, run_surge
    from streamscale.scenarios.surge_score import summarize_surge

    queries = [check_query(q) for q in args.queries.split(",") if q.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    max_ex = args.workers * (args.worker_cores // 2)
    cfg = SurgeConfig(phase_s=args.phase, warmup_s=args.warmup, max_executors=max_ex,
                      elastic_instances=max_ex, cost_ms=args.cost_ms)  # fmt: skip
    d = Path(tempfile.mkdtemp(prefix="streamscale-nexmark-surge-"))
    info = cluster_up(args.workers, args.worker_cores, memory=f"{args.worker_cores}g", directory=d)
    try:
        for q in queries:
            outcomes = run_surge(
                info.master_url, cfg, policies, job=nexmark_job(q),
                metrics_dir=None if args.metrics is None else args.metrics / q,
                on_batch=lambda row: print(json.dumps(row, default=str), file=sys.stderr,
                                           flush=True),
            )  # fmt: skip
            figures = {o.policy: summarize_surge(o, cfg) for o in outcomes}
            common = {
                "bench": "nexmark-surge", "query": q, "cost_kind": "wall",
                "emulated_cores": args.workers * args.worker_cores,
                "rows_per_event": ROWS_PER_EVENT[q], "wait_ms_per_row": wait_ms(cfg, q),
                "config": config_dict(cfg),
            }  # fmt: skip
            for o in outcomes:
                line = {**common, **figures[o.policy], "settings": o.settings}
                print(json.dumps(record("nexmark", line, argv=argv), default=str), flush=True)
            line = {**common, **ratios(figures, cfg)}
            print(json.dumps(record("nexmark", line, argv=argv), default=str), flush=True)
    finally:
        cluster_down(d)


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=6, help="files per table (= batches)")
    ap.add_argument("--rate", type=float, default=10_000.0, help="events/s of event time")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--engines", default="spark-sql,streamscale,streamscale-1batch")
    ap.add_argument("--policy", default="static", help="streamscale's policy")
    ap.add_argument("--quick", action="store_true", help="200,000 events, 4 files")
    ap.add_argument(
        "--repeats", type=int, default=1,
        help="Runs of every engine per query, the order rotated at each (1 to 20; "
             "not --surge).",
    )  # fmt: skip
    ap.add_argument("--surge", action="store_true", help="the surge scenario on Q5 and Q8")
    ap.add_argument("--metrics", type=Path, default=None,
                    help="--surge: keep each run's metrics.jsonl in METRICS/QUERY/POLICY "
                         "(for streamscale replay)")  # fmt: skip
    ap.add_argument("--policies", default="elastic,static-peak,spark-dynamic",
                    help="--surge: the policies")  # fmt: skip
    ap.add_argument("--phase", type=float, default=30.0, help="--surge: seconds per phase")
    ap.add_argument("--warmup", type=float, default=45.0, help="--surge: warm-up seconds")
    ap.add_argument(
        "--cost-ms",
        type=float,
        default=SURGE_COST_MS,
        help="--surge: waited cost per event (the hot key must fit in one core)",
    )
    ap.add_argument("--workers", type=int, default=2, help="--surge: standalone workers")
    ap.add_argument("--worker-cores", type=int, default=8, help="--surge: slots per worker")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the benchmark; ``spark``: a ``local[N]`` session to run on (left running, its
    time zone as it was) instead of building one (the smoke test's); not with ``--surge``.
    Returns 0, or 2 (one line on stderr) when ``--repeats`` is outside 1 to 20."""
    argv = sys.argv[1:] if argv is None else argv
    args = _args(argv)
    if bad_repeats("bench_nexmark", args.repeats):
        return 2
    if args.surge:
        if args.queries == ",".join(QUERIES):
            args.queries = "q5,q8"
        surge(args, argv)
        return 0
    if args.quick:
        args.events, args.files = 200_000, 4
    queries = [check_query(q) for q in args.queries.split(",") if q.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamscale.runtime.spark.executors.session import build_session

    own = spark is None
    if spark is None:
        spark = build_session(f"local[{CORES}]", shuffle_partitions=CORES)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        _queries(spark, args, queries, engines, argv)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        if own:
            spark.stop()
    return 0


def _queries(
    spark: Any, args: argparse.Namespace, queries: list[str], engines: list[str],
    argv: list[str],
) -> None:  # fmt: skip
    """Every query's lines (:func:`query_lines`) over one set of generated files."""
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events"
        cfg = GeneratorConfig.constant(args.rate, seed=7)
        meta = write_events(cfg, args.events, events, files=args.files)
        common = {"events": args.events, "files": args.files, "rate": args.rate,
                  "harness": HARNESS}  # fmt: skip

        def run(engine: str, q: str, repeat: int) -> dict[str, Any]:
            got = _run(spark, engine, q, events, Path(tmp), args.policy, meta["rows"])
            return engine_line(q, engine, got, common)

        for q in queries:
            for line in query_lines(q, engines_of(q, engines), args.repeats, run):
                print(json.dumps(record("nexmark", line, argv=argv)), flush=True)


def engine_line(q: str, engine: str, got: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """One run's line from :func:`_run`'s figures ``got`` (``rows_per_s`` rounded, None
    when not timed); ``ratio_vs_spark_sql`` is filled in by :func:`with_ratios`."""
    rate = got["rows_per_s"]
    timed = math.isfinite(rate)  # not: no batch with rows after the first
    rest = {k: v for k, v in got.items() if k != "rows_per_s"}
    return {"bench": "nexmark", "query": q, "engine": engine,
            "rows_per_s": round(rate) if timed else None, "ratio_vs_spark_sql": None,
            **rest, **common}  # fmt: skip


def engines_of(q: str, engines: list[str]) -> list[str]:
    """The engines that run ``q``: ``streamscale-1batch`` only beside spark-sql's batch
    runs (Q4-Q8)."""
    return [e for e in engines if e != "streamscale-1batch" or MODES[q] == "batch"]


def query_lines(q: str, engines: list[str], repeats: int, run: Runner) -> Iterator[dict[str, Any]]:
    """``q``'s lines in the fair order, each as soon as it can be given: every repeat's
    engine lines (:func:`run_order`; after the repeat, with their ratios), with two
    engines or more the first engine's run again and its order-check line, then the
    summary lines. ``run`` runs one engine (:data:`Runner`)."""
    orders = run_order(engines, repeats)
    runs: list[dict[str, dict[str, Any]]] = []
    for k, order in enumerate(orders[:repeats]):
        got = [{**run(e, q, k), "repeat": k, "position": i} for i, e in enumerate(order)]
        got = with_ratios(got)
        runs.append({x["engine"]: x for x in got})
        yield from got
    if len(orders) > repeats:
        engine = orders[-1][0]
        (again,) = with_ratios([{**run(engine, q, repeats), "repeat": repeats, "position": 0,
                                 "order_check": True}])  # fmt: skip
        yield again
        yield order_check_line(q, engine, runs[0][engine], again)
    yield from summary_lines(q, engines, runs)


def with_ratios(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` (one repeat's of one query) each with ``ratio_vs_spark_sql``: its
    ``rows_per_s`` ÷ the spark-sql line's among them (None without one, or when either
    is not timed)."""
    base = next((x.get("rows_per_s") for x in lines if x["engine"] == "spark-sql"), None)
    out = []
    for x in lines:
        ratio = over(x.get("rows_per_s"), base)
        out.append({**x, "ratio_vs_spark_sql": None if ratio is None else round(ratio, 3)})
    return out


def order_check_line(
    q: str, engine: str, first: dict[str, Any], again: dict[str, Any]
) -> dict[str, Any]:
    """The order check (:func:`_fair.order_check`) of :data:`CHECKED`: ``engine``'s
    first run of ``q`` and its run again after the repeats."""
    check = order_check(first, again, CHECKED)
    return {"bench": "nexmark", "figure": "order_check", "query": q, "engine": engine, **check}


def summary_lines(
    q: str, engines: list[str], runs: list[dict[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """One line per engine of ``q``: its repeats and the median, min and max over them of
    :data:`SUMMARIZED` (finite values only; ``runs``: each repeat's line per engine)."""
    out = []
    for engine in engines:
        ran = [r[engine] for r in runs if engine in r]
        per = {k: [x[k] for x in ran if number(x.get(k))] for k in SUMMARIZED}
        stats = {k: spread(v) for k, v in per.items() if v}
        out.append({"bench": "nexmark", "figure": "summary", "query": q, "engine": engine,
                    "repeats": len(ran), **stats})  # fmt: skip
    return out


if __name__ == "__main__":
    raise SystemExit(main())
