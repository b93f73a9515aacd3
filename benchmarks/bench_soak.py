"""Runs for weeks: memory, files and checkpoint size under continuous rescaling.

A DAG job with two keyed operators (generator → ``enrich`` → ``rank`` keyed by ``key``,
a waited cost per row → ``totals`` keyed by ``bucket``) runs under ``elastic`` with
triggers as fast as the batches go, while the offered rate alternates between a low and
a high level every ``--phase-s`` seconds, so the plan changes and shards move throughout.
``--master cluster`` (the default) runs it on a loopback Spark standalone cluster of
``--workers`` × ``--worker-cores`` slots, where executors (one core each, up to
``--max-executors``) are requested and released as well; ``--master local[N]`` runs it
in the driver's JVM, where the plan moves shards between the units of each instance.
Each keyed instance is an elastic executor holding at least one core, so the instances
(``--rank-instances`` + ``--totals-instances``) are at most the cores the policy plans
for (``--max-executors`` on a cluster). State lives on the local disk, on an
S3-compatible server (moto, on 127.0.0.1), or on each in turn (``--state both``: half
of the time each, one run after the other).

Every ``--every`` batches it samples, in the driver:

* ``driver_python_rss_mb`` (this process), ``driver_jvm_rss_mb`` and ``jvm_heap_mb``
  (the driver JVM's heap used right after a ``System.gc()``);
* ``executor_rss_mb``: the mean resident set of a live executor (its JVM, its Python
  daemon and workers), ``executors`` alive;
* ``open_fds`` and ``threads`` of the driver (Python and JVM together);
* ``spark_checkpoint_bytes`` (Spark's offsets, commits, sources and sinks metadata),
  ``checkpoint_bytes`` (Spark's plus streamscale's own files beside the state),
  ``state_bytes`` and ``state_files`` (snapshots and changelogs of every shard), and
  ``output_bytes`` (``metrics.jsonl``, dead letters, sink files).

JSON lines (``"bench": "soak"``): one per sample; then, per run, a ``"figure":
"growth"`` line with each figure's least-squares growth per 10,000 batches after the
warm-up, in percent of its mean (``*_pct_per_10k``) and in its own unit
(``*_per_10k``), the batches run, the batches per hour reached, the scale events, and
``state_equals_pandas``: the committed state of both operators against pandas over
the same input (the generator's tuples ``0 … n-1``, ``n`` the tuples the run
processed). ``--out DIR`` also writes ``soak-<state>.png``.

The per-row cost is waited (``time.sleep``), not burned: task slots behave like cores
on this 2-core machine (emulated cores).

Run: ``.venv/bin/python benchmarks/bench_soak.py [--minutes 60] [--batches N] [--quick |
--smoke] [--master cluster|local[2]] [--state local|s3|both] [--out DIR]``. A run ends
after ``--minutes`` or ``--batches``, whichever comes first. ``--quick``: ``local[2]``,
3,000 batches in at most 45 minutes, a cost of at most 1 ms a row in ``rank`` and a high
rate of at most 60 tuples/s, local state unless ``--state`` says otherwise;
``--smoke``: ``local[2]``, 30 batches, seconds long (it checks that the script runs and
prints every line, not the figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil
from _results import record
from bench_state import _moto

from streamscale.runtime.spark.api import stream
from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.executors.session import build_session
from streamscale.runtime.spark.keyed import functions_dag as fd
from streamscale.runtime.spark.sources.sources import GeneratorSource, generate
from streamscale.runtime.spark.state.state import state_backend

FIGURES = (
    "driver_python_rss_mb",
    "driver_jvm_rss_mb",
    "jvm_heap_mb",
    "executor_rss_mb",
    "open_fds",
    "threads",
    "spark_checkpoint_bytes",
    "checkpoint_bytes",
    "state_bytes",
    "state_files",
    "output_bytes",
)
BUCKETS = 5


def _emit(fields: dict[str, Any], argv: list[str]) -> None:
    line = record("soak", {"bench": "soak", **fields}, argv=argv)
    print(json.dumps(line, default=str), flush=True)


def _dir_bytes(path: Path, skip: tuple[Path, ...] = ()) -> tuple[int, int]:
    total = files = 0
    for root, dirs, names in os.walk(path):
        if any(Path(root) == s or s in Path(root).parents for s in skip):
            dirs[:] = []
            continue
        for n in names:
            try:
                total += os.stat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                continue
    return total, files


def _store_bytes(url: str, local: Path) -> tuple[int, int]:
    if not url.startswith("s3://"):
        return _dir_bytes(local)
    import pyarrow.fs as pafs

    bucket_prefix, _, query = url[len("s3://") :].partition("?")
    endpoint = query.split("endpoint=", 1)[1].split("&", 1)[0]
    fs = pafs.S3FileSystem(
        endpoint_override=endpoint.split("://", 1)[-1], scheme="http", region="us-east-1"
    )
    infos = fs.get_file_info(pafs.FileSelector(bucket_prefix, recursive=True, allow_not_found=True))
    files = [i for i in infos if i.type == pafs.FileType.File]
    return sum(i.size for i in files), len(files)


def _jvm_procs(me: psutil.Process) -> list[psutil.Process]:
    """The driver's JVM (the py4j gateway: ``SparkSubmit``), not the cluster's daemons."""
    out = []
    for c in me.children(recursive=True):
        try:
            if "java" in c.name() and "SparkSubmit" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:
            continue
    return out


def _rss(procs: list[psutil.Process]) -> int:
    """Summed RSS of ``procs``, less those that exited while being read."""
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.Error):
            total += q.memory_info().rss
    return total


def _executor_rss_mb(app_id: str, jvms: list[psutil.Process]) -> tuple[float | None, int]:
    """Mean RSS of a live executor of application ``app_id`` (its JVM and every Python
    process under it); in local mode (no executor processes) the Python daemon and
    workers under the driver's JVM, as one executor. ``None`` when none is found (a
    sample between two workers' lives): missing, not zero, so the growth fit skips it."""
    local = []
    for j in jvms:
        try:
            local += [c for c in j.children(recursive=True) if "python" in c.name()]
        except psutil.Error:
            continue
    sizes: list[int] = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or ())
            if "CoarseGrainedExecutorBackend" not in cmd or app_id not in cmd:
                continue
            sizes.append(_rss([p, *p.children(recursive=True)]))
        except psutil.Error:
            continue
    if not sizes and local:
        sizes = [_rss(local)]
    sizes = [x for x in sizes if x > 0]
    return (float(np.mean(sizes)) / 2**20 if sizes else None), len(sizes)


def sample(sc: Any, ckpt: Path, out: Path, url: str, state_dir: Path) -> dict[str, Any]:
    """Every figure, measured now (see the module docstring)."""
    me = psutil.Process()
    jvms = _jvm_procs(me)
    sc._jvm.System.gc()
    rt = sc._jvm.java.lang.Runtime.getRuntime()
    heap = (rt.totalMemory() - rt.freeMemory()) / 2**20
    ex_rss, executors = _executor_rss_mb(sc.applicationId, jvms)
    spark_ck, _ = _dir_bytes(ckpt / "spark")
    own_ck, _ = _dir_bytes(ckpt, skip=(ckpt / "state",))
    state, state_files = _store_bytes(url, state_dir)
    output, _ = _dir_bytes(out)
    return {
        "driver_python_rss_mb": me.memory_info().rss / 2**20,
        "driver_jvm_rss_mb": sum(j.memory_info().rss for j in jvms) / 2**20,
        "jvm_heap_mb": heap,
        "executor_rss_mb": ex_rss,
        "executors": executors,
        "open_fds": me.num_fds() + sum(j.num_fds() for j in jvms),
        "threads": me.num_threads() + sum(j.num_threads() for j in jvms),
        "spark_checkpoint_bytes": spark_ck,
        "checkpoint_bytes": own_ck,
        "state_bytes": state,
        "state_files": state_files,
        "output_bytes": output,
    }


def growth(samples: list[dict[str, Any]], warmup_batches: int) -> dict[str, Any]:
    """Least-squares slope of each figure over the batch number after the warm-up, per
    10,000 batches: in its unit and in percent of its mean over the same samples (a
    sample that misses a figure, ``None``, is left out of that figure's fit).

    Examples
    --------
    >>> rows = [{"batch": b, **{f: 10.0 + b / 1000 for f in FIGURES}} for b in (0, 1000, 2000)]
    >>> rows.append({"batch": 3000, **{f: 13.0 for f in FIGURES}, "executor_rss_mb": None})
    >>> g = growth(rows, 0)
    >>> round(g["executor_rss_mb_per_10k"], 6), round(g["open_fds_per_10k"], 6)
    (10.0, 10.0)
    """
    rows = [s for s in samples if s["batch"] >= warmup_batches]
    out: dict[str, Any] = {"samples_after_warmup": len(rows)}
    if len(rows) < 3:
        return out
    for f in FIGURES:
        kept = [r for r in rows if r[f] is not None]  # a figure missing from a sample
        if len(kept) < 3:
            out[f"{f}_per_10k"] = out[f"{f}_pct_per_10k"] = None
            continue
        x = np.asarray([r["batch"] for r in kept], dtype=float)
        y = np.asarray([r[f] for r in kept], dtype=float)
        slope = float(np.polyfit(x, y, 1)[0]) * 10_000
        mean = float(y.mean())
        out[f"{f}_per_10k"] = slope
        out[f"{f}_pct_per_10k"] = 100.0 * slope / mean if mean else None
    return out


def schedule(minutes: float, phase_s: float, low: float, high: float) -> str:
    points = []
    t, i = 0.0, 0
    while t <= minutes * 60 + phase_s:
        points.append(f"{t:g}:{high if i % 2 else low:g}")
        t += phase_s
        i += 1
    return ",".join(points)


def reference_check(opts: dict[str, str], n: int, url: str) -> bool:
    """Both operators' committed state equals pandas over the generator's tuples ``0…n-1``."""
    rows = generate(opts, 0, n)
    want_counts = rows["key"].value_counts().to_dict()
    ranks = rows.groupby("key").cumcount() + 1
    bucket = rows["seq"].to_numpy() % BUCKETS
    g = pd.DataFrame({"bucket": bucket, "n": ranks.to_numpy()}).groupby("bucket")["n"]
    want_buckets = {int(b): (int(c), int(s)) for b, c, s in zip(
        g.size().index, g.size(), g.sum(), strict=True)}  # fmt: skip
    backend = state_backend(url)
    counts: dict[Any, int] = {}
    for st in backend.load_all("rank").values():
        counts.update(st.get("count", {}))
    buckets: dict[int, tuple[int, int]] = {}
    for st in backend.load_all("totals").values():
        for b, r in st.get("rows", {}).items():
            buckets[int(b)] = (int(r), int(st["n"][b]))
    return counts == want_counts and buckets == want_buckets


def soak(
    args: argparse.Namespace,
    kind: str,
    minutes: float,
    batches_max: int | None,
    argv: list[str],
    spark: Any | None = None,
) -> dict[str, Any]:
    """One soak run with state ``kind`` (``local`` or ``s3``); returns its growth line.

    ``spark``: a ``local[N]`` session to run on (left running), else one is built for
    ``args.master`` and stopped at the end."""
    scratch = Path(tempfile.mkdtemp(prefix=f"streamscale-soak-{kind}-"))
    ckpt, out = scratch / "ck", scratch / "out"
    on_cluster = spark is None and args.master == "cluster"
    moto = None
    if kind == "s3":
        moto, endpoint = _moto()  # bench_state's moto server, with its bucket "state"
        url = f"s3://state/soak-{kind}?endpoint={endpoint}"
    else:
        url = str(scratch / "ck" / "state")
    state_dir = scratch / "ck" / "state"
    opts = {
        "keys": str(args.keys), "alpha": "0.8", "cost_ms": "0", "seed": "11",
        "partitions": "2", "payload_bytes": "16", "rate": str(args.low),
        "schedule": schedule(minutes, args.phase_s, args.low, args.high),
    }  # fmt: skip
    own = spark is None
    resources = None
    if on_cluster:
        info = cluster_up(args.workers, args.worker_cores, directory=scratch / "cluster")
        conf = executor_conf(
            1, args.max_executors, pin=False, separate_hosts=False, quick_start=True
        )
        spark = build_session(info.master_url, app_name=f"streamscale-soak-{kind}", conf=conf)
    elif spark is None:
        spark = build_session(args.master, app_name=f"streamscale-soak-{kind}")
    spark.dataSource.register(GeneratorSource)
    sc = spark.sparkContext
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    lock = threading.Lock()

    tally = Tally()

    def on_batch(b: Any) -> None:
        with lock:
            tally.add(b)
            if b.batch_id % args.every:
                return
            s = {"state": kind, "master": master, "batch": b.batch_id,
                 "elapsed_s": time.monotonic() - t0}  # fmt: skip
            s.update(sample(sc, ckpt, out, url, state_dir))
            samples.append(s)
            _emit(s, argv)

    master = "cluster" if on_cluster else str(sc.master)
    try:
        if on_cluster:
            resources = ExecutorResources(
                sc, pin=False, cores_per_executor=1, max_executors=args.max_executors,
                initial_executors=1,
            )  # fmt: skip
            resources.settle(120.0)
        df = spark.readStream.format(GeneratorSource.name()).options(**opts).load()
        s = stream(df, name="soak", trigger_s=0.0)
        e = s.map_batches(fd.enrich, name="enrich", buckets=BUCKETS)
        ranked = e.key_by("key", instances=args.rank_instances, shards=16).process(
            fd.rank_in_key_waited, name="rank", cost_ms=args.cost_ms
        )
        totals = ranked.key_by("bucket", instances=args.totals_instances, shards=4).process(
            fd.bucket_totals, name="totals"
        )
        totals.to("none", name="out")
        res = totals.run(
            checkpoint=ckpt, out=out, duration_s=minutes * 60, spark=spark, policy="elastic",
            state_url=url, on_batch=on_batch, resources=resources, max_batches=batches_max,
        )  # fmt: skip
        n = int(res.keyed_rows.get("rank", 0))  # the whole run's (records: the recent only)
        elapsed = time.monotonic() - t0
        line = {
            "state": kind,
            "master": master,
            "figure": "growth",
            "batches": res.batches,
            "tuples": n,
            "minutes": elapsed / 60,
            "batches_per_hour": res.batches / elapsed * 3600,
            **tally.figures(),
            "executors_added": resources.added if resources is not None else 0,
            "executors_released": resources.released if resources is not None else 0,
            "warmup_batches": args.warmup,
            **growth(samples, args.warmup),
            "state_equals_pandas": reference_check(opts, n, url),
            "cost_kind": "wall",
        }
        if args.out:
            plot(samples, Path(args.out) / f"soak-{kind}.png")
        return line
    finally:
        if own:
            spark.stop()
        if on_cluster:
            cluster_down(scratch / "cluster")
        if moto is not None:
            moto.terminate()
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class Tally:
    """Every batch's figures over the whole run, from ``on_batch`` (a run's result keeps
    only its recent batches): batch seconds, each keyed operator's Spark job seconds,
    plan changes and control errors."""

    durations: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: {"rank": [], "totals": []})
    plan_changes: int = 0
    control_errors: int = 0

    def add(self, b: Any) -> None:
        self.durations.append(b.duration_s)
        for op, seconds in self.stages.items():
            seconds.append(b.extra.get("stage_s", {}).get(op, 0.0))
        self.plan_changes += bool(b.extra.get("applied"))
        self.control_errors += "control_error" in b.extra

    def figures(self) -> dict[str, Any]:
        some = bool(self.durations)
        return {
            "batch_p50_s": float(np.median(self.durations)) if some else None,
            "stage_p50_s": {op: float(np.median(v)) for op, v in self.stages.items()}
            if some
            else None,
            "plan_changes": self.plan_changes,
            "control_errors": self.control_errors,
        }


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(4, 3, figsize=(13, 11), sharex=True)
    x = [s["batch"] for s in samples]
    for ax, f in zip(axes.flat, (*FIGURES, "executors"), strict=False):
        ax.plot(x, [s[f] for s in samples], lw=1)
        ax.set_title(f, fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("batch")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the soak; ``spark``: a ``local[N]`` session to run on instead of building one
    (the smoke test's)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--batches", type=int, default=None, help="Batches per run at most.")
    size = ap.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="local[2], 3,000 batches (45 minutes at most)."
    )
    size.add_argument("--smoke", action="store_true", help="local[2], 30 batches: runs at all.")
    ap.add_argument("--master", default="cluster", help="cluster (loopback) or local[N].")
    ap.add_argument("--state", choices=("local", "s3", "both"), default=None)
    ap.add_argument("--every", type=int, default=100, help="Batches between samples.")
    ap.add_argument("--warmup", type=int, default=500, help="Batches before growth is fitted.")
    ap.add_argument("--phase-s", type=float, default=120.0, help="Seconds per rate level.")
    ap.add_argument("--low", type=float, default=10.0, help="Low offered rate (tuples/s).")
    ap.add_argument("--high", type=float, default=100.0, help="High offered rate (tuples/s).")
    ap.add_argument("--cost-ms", type=float, default=5.0, help="Waited cost per row in rank.")
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--rank-instances", type=int, default=2)
    ap.add_argument("--totals-instances", type=int, default=1)
    ap.add_argument("--max-executors", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.quick:  # batches back to back on two cores: a light per-row cost and rate
        args.master, args.minutes, args.phase_s = "local[2]", 45.0, 60.0
        args.batches = args.batches or 3000
        args.warmup = min(args.warmup, 300)
        args.every = min(args.every, 50)
        args.cost_ms, args.high = min(args.cost_ms, 1.0), min(args.high, 60.0)
        args.state = args.state or "local"
    elif args.smoke:
        # ends at its batches; the minutes only bound a run on a loaded machine
        args.master, args.minutes, args.phase_s = "local[2]", 10.0, 5.0
        args.batches = args.batches or 30
        args.warmup, args.every = 5, 5
        args.cost_ms, args.keys = 0.0, 200
        args.state = args.state or "local"
    state = args.state or "both"
    if args.master != "cluster" and not args.master.startswith("local"):
        ap.error(f"--master {args.master}: cluster or local[N]")
    instances = args.rank_instances + args.totals_instances
    if args.master == "cluster" and instances > args.max_executors:
        # elastic: an instance holds a core, and a cluster run plans for its executors'
        ap.error(
            f"--rank-instances {args.rank_instances} + --totals-instances "
            f"{args.totals_instances}: {instances} instances need a core each, "
            f"--max-executors is {args.max_executors}"
        )
    kinds = ["local", "s3"] if state == "both" else [state]
    for kind in kinds:
        line = soak(args, kind, args.minutes / len(kinds), args.batches, argv, spark=spark)
        _emit(line, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
