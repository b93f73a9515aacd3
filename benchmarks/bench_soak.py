"""Runs for weeks: memory, files and checkpoint size while the job is rescaled throughout.

A DAG job with two keyed operators (generator → ``enrich`` → ``rank`` keyed by ``key``,
a waited cost per row → ``totals`` keyed by ``bucket``) runs under ``elastic`` with
triggers as fast as the batches go. Two things move all the time:

* the offered rate is ``--low`` tuples/s for ``--low-s`` seconds, then ``--high`` for
  ``--high-s``, over and over (10 and 250 tuples/s, 100 and 20 s); at the high rate
  ``rank``'s work (rate × ``--cost-ms``, 1 core) is twice what the policy packs onto a
  core (its ``max_utilization``, ``--max-utilization`` 0.5), so it plans more cores for
  ``rank`` and fewer once the rate falls. On a cluster (``--master cluster``, the
  default: a loopback Spark standalone cluster of ``--workers`` × ``--worker-cores``
  slots) those cores are executors of one core each, requested and released
  (``--max-executors`` at most);
* the generator shuffles its Zipf key frequencies ``--omega`` times a minute (6), so the
  hot keys, and with them the load of every shard, change and the policy moves shards
  between the units (tasks) of each instance; its queueing model's latency target
  (``--latency-target-ms`` 5, near the cost of a row) gives an instance two or more
  units to move shards between even at the low rate, while the cores held (the
  executors) follow the work.

``--master local[N]`` runs the same job in the driver's JVM, where nothing is requested
or released. State lives on the local disk, on an S3-compatible server (moto, on
127.0.0.1), or on each in turn (``--state both``: half of the time each, one run after
the other). ``metrics.jsonl`` is rotated by the run's own settings (``--metrics-max-mb``,
``--metrics-keep``: the ``metrics_max_mb`` and ``metrics_keep`` parameters of the run),
small enough that it rotates many times within a run.

Every ``--every`` batches it samples:

* the driver: ``driver_python_rss_mb`` (this process), ``driver_jvm_rss_mb`` and
  ``jvm_heap_mb`` (the driver JVM's heap in use right after a ``System.gc()``),
  ``open_fds`` and ``threads`` (Python and JVM together);
* the executors (on a cluster: each ``CoarseGrainedExecutorBackend`` of this application,
  with its Python daemon and workers): ``executor_rss_mb`` (the mean over those alive),
  ``executor_heap_mb`` (the mean live heap, ``jcmd GC.class_histogram``: a full GC, then
  the bytes of the objects left), and the same for the executor that has been alive since
  the run started (``first_executor_rss_mb``, ``first_executor_heap_mb``; missing once it
  is gone), each executor's in ``executor_rss`` and ``executor_heap``; in local mode the
  Python daemon and workers under the driver's JVM count as one executor, with no heap;
* ``spark_checkpoint_bytes`` (Spark's offsets, commits, sources and sinks metadata),
  ``checkpoint_bytes`` (Spark's plus streamscale's own files beside the state),
  ``state_bytes`` and ``state_files`` (snapshots and changelogs of every shard),
  ``state_bytes_per_key`` (``state_bytes`` over the distinct keys of the tuples processed
  so far), ``output_bytes`` and ``metrics_bytes`` (``metrics.jsonl`` and its rotated
  files).

Growth, per figure: ordinary least squares of the figure on the batch index after
``--warmup`` batches, through the means of ``--blocks`` non-overlapping blocks of
consecutive samples (batch means: samples a few batches apart are autocorrelated, block
means far apart nearly independent), as a percentage of the fitted value at the start of
the fit window per 10,000 batches, with a 95 % interval from the slope's standard error
and Student's t with ``blocks - 2`` degrees of freedom (``benchmarks/_growth.py``).

JSON lines (``"bench": "soak"``): one per sample; then, per run, a ``"figure":
"growth"`` line with ``batches``, ``plan_changes`` (batches after which the policy
applied a new plan: cores, units or shards moved; while one core is held, an
instance's units run as one Spark task), ``executor_changes`` (executors added plus released), ``metrics_rotations``,
``state_exact`` (the committed state of both operators equal to pandas over the same
input: the generator's tuples ``0 … n-1``, ``n`` the tuples the run processed),
``growth`` (per figure ``{"per_10k", "ci95_low", "ci95_high"}``, in %), and ``targets``
and ``met``: at least ``--target-batches`` batches (the run's ``--batches``: 5,000, or
1,000 with ``--quick``; the counts below scale with it), a plan change per 20
batches, 50 executor changes per 5,000 batches, every figure's growth at most 5 % per
10,000 batches with its interval's upper end at most 10 %, and the state exact.
``--out DIR`` also writes ``soak-<state>.png``.

The per-row cost is waited (``time.sleep``), not burned: task slots behave like cores
on this 2-core machine (emulated cores).

Run: ``.venv/bin/python benchmarks/bench_soak.py [--minutes 90] [--batches N] [--quick |
--smoke] [--master cluster|local[2]] [--state local|s3|both] [--out DIR]``. A run ends
after ``--minutes`` or ``--batches``, whichever comes first; by default 5,000 batches in
at most 90 minutes on the cluster with local state. ``--quick``: the same job, 1,000
batches in at most 45 minutes (targets scaled to 1,000 batches); ``--smoke``:
``local[2]``, 30 batches, seconds long (it checks that the script runs and prints every
line, not the figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
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
from _growth import BLOCKS, growth_per_10k
from _results import record
from bench_state import _moto

from streamscale.runtime.spark.api import stream
from streamscale.runtime.spark.cluster.cluster import cluster_down, cluster_up
from streamscale.runtime.spark.executors.resources import ExecutorResources, executor_conf
from streamscale.runtime.spark.executors.session import build_session
from streamscale.runtime.spark.keyed import functions_dag as fd
from streamscale.runtime.spark.sources.sources import GeneratorSource, generate
from streamscale.runtime.spark.state.retention import metrics_files
from streamscale.runtime.spark.state.state import state_backend

#: the figures whose growth is fitted (and must stay within the targets)
FIGURES = (
    "driver_python_rss_mb",
    "driver_jvm_rss_mb",
    "jvm_heap_mb",
    "executor_rss_mb",
    "executor_heap_mb",
    "first_executor_rss_mb",
    "first_executor_heap_mb",
    "open_fds",
    "threads",
    "spark_checkpoint_bytes",
    "checkpoint_bytes",
    "state_bytes_per_key",
)
#: sampled and plotted, not fitted: ``output_bytes`` is bounded by the metrics file's
#: rotation (a saw-tooth), the rest are counts
OTHERS = ("state_bytes", "state_files", "output_bytes", "metrics_bytes", "executors")
BUCKETS = 5
#: the full run's targets; a shorter run's batch-counted targets scale with its batches
TARGET_BATCHES = 5000
GROWTH_MAX_PCT, CI_HIGH_MAX_PCT = 5.0, 10.0
BATCHES_PER_PLAN_CHANGE, EXECUTOR_CHANGES_PER_5K = 20, 50


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


_EXECUTOR_ID = re.compile(r"--executor-id\s+(\S+)")
_HISTOGRAM_TOTAL = re.compile(r"^Total\s+\d+\s+(\d+)\s*$", re.M)


def live_heap_mb(pid: int, timeout_s: float = 30.0) -> float | None:
    """The live heap of JVM ``pid`` in MB: ``jcmd PID GC.class_histogram`` runs a full
    GC and lists the objects left; its ``Total`` line's bytes. ``None`` when the JVM
    cannot be read (it exited, or no ``jcmd``)."""
    try:
        out = subprocess.run(
            ["jcmd", str(pid), "GC.class_histogram"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    m = _HISTOGRAM_TOTAL.search(out)
    return int(m.group(1)) / 2**20 if m else None


def executors_now(app_id: str, jvms: list[psutil.Process]) -> dict[str, dict[str, Any]]:
    """Every live executor of application ``app_id``: its id → ``rss_mb`` (its JVM and
    every Python process under it) and ``heap_mb`` (:func:`live_heap_mb`). In local mode
    (no executor processes) the Python daemon and workers under the driver's JVM, as
    executor ``"driver"`` with no heap; none found (a sample between two workers' lives):
    empty, so the figures are missing, not zero, and the fit skips them."""
    found: dict[str, dict[str, Any]] = {}
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or ())
            if "CoarseGrainedExecutorBackend" not in cmd or app_id not in cmd:
                continue
            m = _EXECUTOR_ID.search(cmd)
            rss = _rss([p, *p.children(recursive=True)])
        except psutil.Error:
            continue
        if m and rss > 0:
            found[m.group(1)] = {"pid": p.pid, "rss_mb": rss / 2**20}
    for e in found.values():
        e["heap_mb"] = live_heap_mb(e.pop("pid"))
    if found:
        return found
    local = []
    for j in jvms:
        with contextlib.suppress(psutil.Error):
            local += [c for c in j.children(recursive=True) if "python" in c.name()]
    rss = _rss(local)
    return {"driver": {"rss_mb": rss / 2**20, "heap_mb": None}} if rss > 0 else {}


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


@dataclass
class Sampler:
    """What a sample needs between samples: where the run keeps its files, the executor
    alive since the start, and the distinct keys of the tuples processed so far (read
    from the generator, a new range at each sample)."""

    sc: Any
    ckpt: Path
    out: Path
    url: str
    state_dir: Path
    opts: dict[str, str]
    first_executor: str | None = None
    keys: set[str] = field(default_factory=set)
    tuples_seen: int = 0

    def distinct_keys(self, tuples: int) -> int:
        if tuples > self.tuples_seen:
            self.keys.update(generate(self.opts, self.tuples_seen, tuples)["key"].tolist())
            self.tuples_seen = tuples
        return len(self.keys)

    def sample(self, tuples: int) -> dict[str, Any]:
        """Every figure, measured now (see the module docstring); ``tuples``: processed."""
        me = psutil.Process()
        jvms = _jvm_procs(me)
        self.sc._jvm.System.gc()
        rt = self.sc._jvm.java.lang.Runtime.getRuntime()
        heap = (rt.totalMemory() - rt.freeMemory()) / 2**20
        ex = executors_now(self.sc.applicationId, jvms)
        if self.first_executor is None and ex:
            self.first_executor = min(ex, key=lambda e: (len(e), e))
        first = ex.get(self.first_executor or "", {})
        spark_ck, _ = _dir_bytes(self.ckpt / "spark")
        own_ck, _ = _dir_bytes(self.ckpt, skip=(self.ckpt / "state",))
        state, state_files = _store_bytes(self.url, self.state_dir)
        output, _ = _dir_bytes(self.out)
        keys = self.distinct_keys(tuples)
        return {
            "driver_python_rss_mb": me.memory_info().rss / 2**20,
            "driver_jvm_rss_mb": _rss(jvms) / 2**20,
            "jvm_heap_mb": heap,
            "executor_rss_mb": _mean([e["rss_mb"] for e in ex.values()]),
            "executor_heap_mb": _mean([e["heap_mb"] for e in ex.values()]),
            "first_executor_rss_mb": first.get("rss_mb"),
            "first_executor_heap_mb": first.get("heap_mb"),
            "executor_rss": {k: e["rss_mb"] for k, e in ex.items()},
            "executor_heap": {k: e["heap_mb"] for k, e in ex.items()},
            "executors": len(ex),
            "open_fds": me.num_fds() + sum(j.num_fds() for j in jvms),
            "threads": me.num_threads() + sum(j.num_threads() for j in jvms),
            "spark_checkpoint_bytes": spark_ck,
            "checkpoint_bytes": own_ck,
            "state_bytes": state,
            "state_files": state_files,
            "distinct_keys": keys,
            "state_bytes_per_key": state / keys if keys else None,
            "output_bytes": output,
            "metrics_bytes": sum(
                p.stat().st_size for p in metrics_files(self.out / "metrics.jsonl")
            ),
        }


def growth(samples: list[dict[str, Any]], warmup: int, blocks: int) -> dict[str, Any]:
    """Each figure's growth per 10,000 batches after ``warmup`` with its 95 % interval,
    in % (:func:`~_growth.growth_per_10k` on ``blocks`` block means); ``None`` values
    where a figure has too few samples or no positive start.

    Examples
    --------
    >>> rows = [{"batch": b, **{f: 100.0 + b / 1000 for f in FIGURES}} for b in range(0, 3100, 100)]
    >>> g = growth(rows, 0, 10)
    >>> g["open_fds"] == {"per_10k": 10.0, "ci95_low": 10.0, "ci95_high": 10.0}
    True
    """
    x = [s["batch"] for s in samples]
    out: dict[str, Any] = {}
    for f in FIGURES:
        g = growth_per_10k(x, [s.get(f) for s in samples], warmup=warmup, blocks=blocks)
        out[f] = {
            "per_10k": None if g is None else _round(g.per_10k),
            "ci95_low": None if g is None else _round(g.ci95_low),
            "ci95_high": None if g is None else _round(g.ci95_high),
        }
    return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def targets(batches: int) -> dict[str, Any]:
    """The run's targets: ``batches`` (the full run's 5,000, or a shorter run's), a plan
    change per 20 batches, 50 executor changes per 5,000 batches, growth within 5 % per
    10,000 batches and its interval's upper end within 10 %, the state exact."""
    return {
        "batches": batches,
        "plan_changes": batches // BATCHES_PER_PLAN_CHANGE,
        "executor_changes": EXECUTOR_CHANGES_PER_5K * batches // 5000,
        "growth_per_10k_max": GROWTH_MAX_PCT,
        "ci95_high_max": CI_HIGH_MAX_PCT,
        "state_exact": True,
    }


def met(line: dict[str, Any], want: dict[str, Any]) -> dict[str, bool]:
    """Which of ``want`` (:func:`targets`) the run's ``line`` met; ``growth`` fails on a
    figure that could not be fitted."""
    fits = list(line["growth"].values())
    ok = {
        "batches": line["batches"] >= want["batches"],
        "plan_changes": line["plan_changes"] >= want["plan_changes"],
        "executor_changes": line["executor_changes"] >= want["executor_changes"],
        "growth": all(
            g["per_10k"] is not None
            and g["per_10k"] <= want["growth_per_10k_max"]
            and g["ci95_high"] <= want["ci95_high_max"]
            for g in fits
        ),
        "state_exact": line["state_exact"] is want["state_exact"],
    }
    ok["all"] = all(ok.values())
    return ok


def schedule(minutes: float, low_s: float, high_s: float, low: float, high: float) -> str:
    """The generator's offered rate: ``low`` tuples/s for ``low_s`` seconds, then ``high``
    for ``high_s``, over and over for ``minutes`` (and one period more).

    >>> schedule(1.0, 20, 10, 5, 50)
    '0:5,20:50,30:5,50:50,60:5,80:50'
    """
    points = []
    t = 0.0
    while t <= minutes * 60:
        points += [f"{t:g}:{low:g}", f"{t + low_s:g}:{high:g}"]
        t += low_s + high_s
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
        "keys": str(args.keys), "alpha": "0.8", "omega": str(args.omega), "cost_ms": "0",
        "seed": "11", "partitions": "2", "payload_bytes": "16", "rate": str(args.low),
        "schedule": schedule(minutes, args.low_s, args.high_s, args.low, args.high),
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
    sampler = Sampler(sc, ckpt, out, url, state_dir, opts)
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    lock = threading.Lock()
    tally = Tally(metrics=out / "metrics.jsonl")

    def on_batch(b: Any) -> None:
        with lock:
            tally.add(b)
            if b.batch_id % args.every:
                return
            s = {"state": kind, "master": master, "batch": b.batch_id,
                 "elapsed_s": time.monotonic() - t0, "tuples": tally.tuples}  # fmt: skip
            s.update(sampler.sample(tally.tuples))
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
        params = {"metrics_max_mb": args.metrics_max_mb, "metrics_keep": args.metrics_keep,
                  "max_utilization": args.max_utilization,
                  "latency_target_ms": args.latency_target_ms}  # fmt: skip
        res = totals.run(
            checkpoint=ckpt, out=out, duration_s=minutes * 60, spark=spark, policy="elastic",
            params=params, state_url=url, on_batch=on_batch, resources=resources,
            max_batches=batches_max,
        )  # fmt: skip
        n = int(res.keyed_rows.get("rank", 0))  # the whole run's (records: the recent only)
        elapsed = time.monotonic() - t0
        added = resources.added if resources is not None else 0
        released = resources.released if resources is not None else 0
        exact = reference_check(opts, n, url)
        line: dict[str, Any] = {
            "state": kind,
            "master": master,
            "figure": "growth",
            "batches": res.batches,
            "tuples": n,
            "minutes": elapsed / 60,
            "batches_per_hour": res.batches / elapsed * 3600,
            **tally.figures(),
            "executors_added": added,
            "executors_released": released,
            "executor_changes": added + released,
            "metrics_max_mb": args.metrics_max_mb,
            "metrics_keep": args.metrics_keep,
            "metrics_files": len(metrics_files(out / "metrics.jsonl")),
            "metrics_bytes_max": max((x["metrics_bytes"] for x in samples), default=None),
            "warmup_batches": args.warmup,
            "samples": len(samples),
            "samples_after_warmup": sum(x["batch"] >= args.warmup for x in samples),
            "growth_fit": f"least squares through {args.blocks} block means, Student t",
            "growth_blocks": args.blocks,
            "growth": growth(samples, args.warmup, args.blocks),
            "state_exact": exact,
            "state_equals_pandas": exact,
            "first_executor": sampler.first_executor,
            "cost_kind": "wall",
        }
        line["targets"] = targets(args.target_batches)
        line["met"] = met(line, line["targets"])
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
    tuples into ``rank``, plan changes, control errors, and the rotations of ``metrics``
    (its size fell since the batch before: the line a batch writes comes first)."""

    metrics: Path
    durations: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: {"rank": [], "totals": []})
    tuples: int = 0
    plan_changes: int = 0
    control_errors: int = 0
    metrics_rotations: int = 0
    _metrics_size: int = 0

    def add(self, b: Any) -> None:
        self.durations.append(b.duration_s)
        for op, seconds in self.stages.items():
            seconds.append(b.extra.get("stage_s", {}).get(op, 0.0))
        self.tuples += int(b.keyed_rows.get("rank", 0))
        self.plan_changes += bool(b.extra.get("applied"))
        self.control_errors += "control_error" in b.extra
        try:
            size = self.metrics.stat().st_size
        except OSError:
            size = 0
        self.metrics_rotations += size < self._metrics_size
        self._metrics_size = size

    def figures(self) -> dict[str, Any]:
        some = bool(self.durations)
        return {
            "batch_p50_s": float(np.median(self.durations)) if some else None,
            "stage_p50_s": {op: float(np.median(v)) for op, v in self.stages.items()}
            if some
            else None,
            "plan_changes": self.plan_changes,
            "control_errors": self.control_errors,
            "metrics_rotations": self.metrics_rotations,
        }


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    shown = (*FIGURES, *OTHERS)
    fig, axes = plt.subplots(6, 3, figsize=(13, 15), sharex=True)
    x = [s["batch"] for s in samples]
    for ax, f in zip(axes.flat, shown, strict=False):
        ax.plot(x, [np.nan if s.get(f) is None else s[f] for s in samples], lw=1)
        ax.set_title(f, fontsize=9)
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("batch")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    """Run the soak; ``spark``: a ``local[N]`` session to run on instead of building one
    (the smoke test's)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=90.0)
    ap.add_argument("--batches", type=int, default=None, help="Batches per run at most.")
    size = ap.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="1,000 batches (45 minutes at most), same job."
    )
    size.add_argument("--smoke", action="store_true", help="local[2], 30 batches: runs at all.")
    ap.add_argument("--master", default="cluster", help="cluster (loopback) or local[N].")
    ap.add_argument("--state", choices=("local", "s3", "both"), default=None)
    ap.add_argument("--every", type=int, default=50, help="Batches between samples.")
    ap.add_argument("--warmup", type=int, default=500, help="Batches before growth is fitted.")
    ap.add_argument("--blocks", type=int, default=BLOCKS, help="Block means the fit goes through.")
    ap.add_argument("--low", type=float, default=10.0, help="Low offered rate (tuples/s).")
    ap.add_argument("--high", type=float, default=250.0, help="High offered rate (tuples/s).")
    ap.add_argument("--low-s", type=float, default=100.0, help="Seconds at the low rate.")
    ap.add_argument("--high-s", type=float, default=20.0, help="Seconds at the high rate.")
    ap.add_argument("--omega", type=float, default=6.0, help="Key-frequency shuffles a minute.")
    ap.add_argument("--cost-ms", type=float, default=4.0, help="Waited cost per row in rank.")
    ap.add_argument(
        "--max-utilization", type=float, default=0.5,
        help="elastic's max_utilization: work per core above which it adds one.",
    )  # fmt: skip
    ap.add_argument(
        "--latency-target-ms", type=float, default=5.0,
        help="elastic's latency_target_ms: near the cost a row, so instances keep 2+ units.",
    )  # fmt: skip
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--rank-instances", type=int, default=2)
    ap.add_argument("--totals-instances", type=int, default=1)
    ap.add_argument("--max-executors", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cores", type=int, default=2)
    ap.add_argument("--metrics-max-mb", type=float, default=0.5, help="metrics_max_mb of the run.")
    ap.add_argument("--metrics-keep", type=int, default=2, help="metrics_keep of the run.")
    ap.add_argument("--target-batches", type=int, default=None, help="Default: the run's size.")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.quick:  # the same job, a fifth of the batches
        args.minutes = min(args.minutes, 45.0)
        args.batches = args.batches or 1000
        args.warmup = min(args.warmup, 200)
        args.every = min(args.every, 25)
        args.state = args.state or "local"
    elif args.smoke:
        # ends at its batches; the minutes only bound a run on a loaded machine
        args.master, args.minutes, args.low_s, args.high_s = "local[2]", 10.0, 5.0, 5.0
        args.batches = args.batches or 30
        args.warmup, args.every, args.blocks = 2, 2, 3
        args.cost_ms, args.keys, args.metrics_max_mb = 0.0, 200, 0.02
        args.state = args.state or "local"
    else:
        args.batches = args.batches or TARGET_BATCHES
        args.state = args.state or "local"
    if args.target_batches is None:
        args.target_batches = args.batches
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
    kinds = ["local", "s3"] if args.state == "both" else [args.state]
    for kind in kinds:
        line = soak(args, kind, args.minutes / len(kinds), args.batches, argv, spark=spark)
        _emit(line, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
