"""A declarative aggregation's shard state: bytes written per batch, one blob against buckets.

Drives the reduce side of ``key_by(key).agg(count, sum, max)`` without Spark: version 0
creates ``--groups`` groups (string keys) spread over ``--shards`` shards; each later
batch's partial aggregates (``--rows`` input rows) are folded into the shards they
reach (:func:`~streamscale.runtime.spark.keyed.agg.fold.fold`), the changed shards' tables
stored and written as version ``b`` on a :class:`LocalStateBackend` (snapshot +
changelogs), then committed — as a reduce task does. Layouts:

* ``blob``: each changed shard's whole table as one entry (the layout before buckets);
* ``buckets-<KiB>``: the table as hash buckets of about that many KiB
  (:mod:`~streamscale.runtime.spark.keyed.agg.buckets`), only changed buckets set.

Traffic: ``uniform`` (each row a uniformly drawn group) or ``zipf`` (α 1.0 over the
groups). Bytes are the sizes of the version files on disk after each batch; ``write_s``
is the time to store and write the batch's shards, ``batch_s`` the whole batch (read,
fold, store, write), medians over the batches after the first. Every run also checks
that its final state, read back by a fresh backend, holds the same groups and values as
pandas over every row. One JSON line per (traffic, rows, layout) with
``"bench": "agg_state"``, and ``written_over_blob`` (bytes per batch over the blob
layout's). The local disk is the page cache here: the CPU a layout costs shows, the
time an object store takes per byte does not.

Run: ``.venv/bin/python benchmarks/bench_agg_state.py [--groups N] [--rows 10,1000]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from _results import record

from streamscale.runtime.spark.keyed.agg.accumulators import AggCall
from streamscale.runtime.spark.keyed.agg.buckets import LEGACY_KEY, read_pieces, store, tables_of
from streamscale.runtime.spark.keyed.agg.fold import fold
from streamscale.runtime.spark.keyed.agg.kernels import split_by, to_ipc
from streamscale.runtime.spark.keyed.agg.spec import N_ROWS, AggOp
from streamscale.runtime.spark.state.state import LocalStateBackend

OP = AggOp(("key",), (AggCall("count", "n", 0), AggCall("sum", "s", 1), AggCall("max", "m", 2)),
           "update", None, ("key", "n", "s", "m"))  # fmt: skip
S = "__shard"


def _partial(keys: np.ndarray, values: np.ndarray, shards: int) -> pa.Table:
    df = pd.DataFrame({"k": keys, "v": values})
    p = df.groupby("k")["v"].agg(["size", "sum", "max"]).reset_index()
    k = p["k"].to_numpy()
    return pa.table({
        S: pa.array(k % shards, pa.int64()),
        "key": pa.array([f"user-{v:08d}" for v in k], pa.string()),
        "__a0": pa.array(p["size"], pa.int64()),
        "__a1": pa.array(p["sum"], pa.float64()),
        "__a2": pa.array(p["max"], pa.float64()),
        N_ROWS: pa.array(p["size"], pa.int64()),
    })  # fmt: skip


def _batch(backend: LocalStateBackend, b: int, part: pa.Table, bucket_kib: int | None) -> float:
    """One reduce task over every shard ``part`` reaches; returns its store+write seconds."""
    shards = sorted(set(part.column(S).to_numpy().tolist()))
    got = backend.read_many("agg", shards, b - 1)
    dicts = {g: st for g, (st, _) in got.items()}
    pieces = {g: read_pieces(dicts[g]) for g in shards}
    tables = [t.append_column(S, pa.array(np.full(t.num_rows, g, np.int64)))
              for g in shards for t in tables_of(pieces[g])]  # fmt: skip
    f = fold(tables, part, OP, shard=S)
    t0 = time.perf_counter()
    parts = split_by(f.state, S) if f.state is not None else {}
    for g in f.changed:
        if bucket_kib is None:  # the layout before buckets: the whole table, one entry
            dicts[g][LEGACY_KEY] = to_ipc(parts[g])
        else:
            store(dicts[g], parts.get(g), OP.keys, pieces[g], bucket_bytes=bucket_kib * 1024)
    backend.write_many("agg", b, {g: dicts[g] for g in f.changed})
    backend.commit("agg", b)
    return time.perf_counter() - t0


def _on_disk(root: Path, version: int) -> int:
    return sum(p.stat().st_size for p in root.glob(f"agg/*/{version}.pkl"))


def _final(root: Path) -> pd.DataFrame:
    back = LocalStateBackend(root).load_all("agg")
    t = pa.concat_tables([x for st in back.values() for x in tables_of(read_pieces(st))])
    return (
        t.select(["key", "__a0", "__a1", "__a2"])
        .to_pandas()
        .sort_values("key")
        .reset_index(drop=True)
    )


def run(args: argparse.Namespace, traffic: str, rows: int, layout: str) -> dict[str, Any]:
    kib = None if layout == "blob" else int(layout.split("-")[1])
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        backend = LocalStateBackend(root)
        every = np.arange(args.groups)
        batches = [(every, np.ones(args.groups))]
        zipf = 1.0 / np.arange(1, args.groups + 1)  # bounded Zipf, α 1.0, over the groups
        for _ in range(args.batches):
            if traffic == "zipf":
                keys = rng.choice(args.groups, rows, p=zipf / zipf.sum())
            else:
                keys = rng.integers(0, args.groups, rows)
            batches.append((keys, rng.normal(size=rows)))
        write_s, batch_s, written = [], [], []
        for b, (keys, vals) in enumerate(batches):
            part = _partial(keys, vals, args.shards)
            t0 = time.perf_counter()
            write_s.append(_batch(backend, b, part, kib))
            batch_s.append(time.perf_counter() - t0)
            written.append(_on_disk(root, b))
        final = _final(root)
    allk = np.concatenate([k for k, _ in batches])
    allv = np.concatenate([v for _, v in batches])
    ref = pd.DataFrame({"k": allk, "v": allv}).groupby("k")["v"].agg(["size", "sum", "max"])
    assert len(final) == len(ref) and (final["__a0"].to_numpy() == ref["size"].to_numpy()).all()
    assert np.allclose(final["__a1"].to_numpy(), ref["sum"].to_numpy())
    return {
        "bench": "agg_state", "layout": layout, "traffic": traffic, "groups": args.groups,
        "shards": args.shards, "rows_per_batch": rows, "batches": args.batches,
        "snapshot_bytes": written[0],
        "bytes_written_per_batch": round(statistics.mean(written[1:])),
        "write_s": round(statistics.median(write_s[1:]), 4),
        "batch_s": round(statistics.median(batch_s[1:]), 4),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=400_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--batches", type=int, default=5, help="batches after the first")
    ap.add_argument("--rows", default="10,1000,20000", help="input rows per batch")
    ap.add_argument("--traffic", default="uniform,zipf")
    ap.add_argument("--layouts", default="blob,buckets-4,buckets-16,buckets-64")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    for traffic in args.traffic.split(","):
        for rows in [int(r) for r in args.rows.split(",")]:
            lines = [run(args, traffic, rows, layout) for layout in args.layouts.split(",")]
            blob = next((x for x in lines if x["layout"] == "blob"), None)
            for line in lines:
                if blob is not None:
                    line["written_over_blob"] = round(
                        line["bytes_written_per_batch"] / blob["bytes_written_per_batch"], 4
                    )
                print(json.dumps(record("agg_state", line, argv=argv)), flush=True)


if __name__ == "__main__":
    main()
