"""Shard state at 1 M keys: bytes written per batch, batch time, recovery time.

Drives the state backend directly (no Spark): ``--keys`` keys of ≈100 B
(a distinct 90-byte value each) in ``--shards`` shards are written once as
version 0, then ``--batches`` batches each touch ``--touched`` of the keys
(a new value), read and write every shard against the driver's version hints
(the worker cache serves reads, as on an executor that keeps its shards: the
index knows the attempt that wrote each version, as a runner's does) and
commit. Recovery is a fresh process's view: a new backend (no cache) loads
every shard's committed version from snapshot + changelogs, checked equal to
the reference dict.

A batch's shards are read with ``read_many`` and written with ``write_many``,
as one task holding all of them would: an object store gets their requests
concurrently (``io_threads``, 16), a local disk one after another.

Configurations: ``local`` (incremental, the default), ``local-full`` (every
version a full snapshot: the behaviour before changelogs), ``s3``
(incremental, against a moto S3 server started on 127.0.0.1 over HTTP) and
``s3-serial`` (the same with ``io_threads=1``: one request at a time).
One JSON line each: ``"bench": "state"``, ``backend``, ``keys``,
``touched_fraction``, ``state_bytes`` (bytes of the version-0 snapshots),
``bytes_written_per_batch``, ``written_fraction``, ``batch_s`` (mean; ``batch_s_each``),
``recovery_s``, ``load_avg``.

Run: ``.venv/bin/python benchmarks/bench_state.py [--keys N] [--backends local,s3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _results import record

from streamscale.runtime.spark.state.state import LocalStateBackend, VersionIndex, state_backend
from streamscale.runtime.spark.state.state_log import TrackedDict


def _moto() -> tuple[subprocess.Popen[bytes], str]:
    import pyarrow.fs as pafs

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.terminate()
                raise
            time.sleep(0.2)
    pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    ).create_dir("state")
    return proc, f"http://127.0.0.1:{port}"


def _run(
    be: LocalStateBackend, url_again: Any, keys: int, shards: int, touched: float, batches: int
) -> dict[str, Any]:
    rng = random.Random(0)
    ref: list[dict[int, bytes]] = [{} for _ in range(shards)]
    for k in range(keys):
        ref[k % shards][k] = rng.randbytes(90)
    index = VersionIndex(be, "op", shards)  # as a runner keeps it: attempts known
    be.write_many("op", 0, {g: TrackedDict(ref[g]) for g in range(shards)}, attempt="a0")
    be.commit("op", 0)
    index.committed(0, "a0", range(shards), index.hints(-1)[0])
    state_bytes = be.bytes_written
    n_touch = max(1, int(keys * touched))
    times: list[float] = []
    written0 = be.bytes_written
    for b in range(1, batches + 1):
        touch = [rng.randrange(keys) for _ in range(n_touch)]
        per: list[list[int]] = [[] for _ in range(shards)]
        for k in touch:
            per[k % shards].append(k)
        t0 = time.perf_counter()
        upto = min(b - 1, be.committed("op"))
        hints, drops = index.hints(upto)
        hint_of = dict(enumerate(hints))
        states = {g: s for g, (s, _) in be.read_many("op", range(shards), upto, hint_of).items()}
        for g, state in states.items():
            for k in per[g]:
                state[k] = v = rng.randbytes(90)
                ref[g][k] = v
        be.write_many("op", b, states, attempt=f"a{b}", drops=dict(enumerate(drops)))
        be.commit("op", b)
        index.committed(b, f"a{b}", range(shards), hints)
        times.append(time.perf_counter() - t0)
    written = (be.bytes_written - written0) / batches
    t0 = time.perf_counter()
    got = url_again().load_all("op")
    recovery = time.perf_counter() - t0
    if got != dict(enumerate(ref)):
        raise SystemExit("recovered state differs from the reference")
    return {
        "state_bytes": state_bytes,
        "bytes_written_per_batch": round(written),
        "written_fraction": round(written / state_bytes, 4),
        "batch_s": round(sum(times) / len(times), 3),
        "batch_s_each": [round(t, 3) for t in times],
        "recovery_s": round(recovery, 2),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--touched", type=float, default=0.01)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--backends", default="local,local-full,s3")
    args = ap.parse_args(argv)
    moto = None
    try:
        for name in args.backends.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                if name in ("s3", "s3-serial"):
                    if moto is None:
                        moto = _moto()
                    url = f"s3://state/{uuid.uuid4().hex}?endpoint={moto[1]}"
                    if name == "s3-serial":
                        url += "&io_threads=1"
                elif name in ("local", "local-full"):
                    url = tmp
                else:
                    raise SystemExit(f"unknown backend {name!r}")
                be = state_backend(url)
                if name == "local-full":
                    be = LocalStateBackend(tmp, snapshot_every=1)
                row = _run(
                    be,
                    lambda u=url: state_backend(u),
                    args.keys,
                    args.shards,
                    args.touched,
                    args.batches,
                )
                line = {
                    "bench": "state",
                    "backend": name,
                    "keys": args.keys,
                    "touched_fraction": args.touched,
                    **row,
                    "load_avg": round(os.getloadavg()[0], 2),
                }
                print(json.dumps(record("state", line, argv=sys.argv[1:])), flush=True)
    finally:
        if moto is not None:
            moto[0].terminate()
            moto[0].wait(timeout=10)


if __name__ == "__main__":
    main()
