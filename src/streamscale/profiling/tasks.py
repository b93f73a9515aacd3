"""Real Python tasks to profile, modelled on paper 004's five (§5.2, Table 1).

Each task is built once per worker (``make_task(name, params)``) and then called
concurrently by τ threads, one call per tuple: ``task(seq, value)``.

* ``pi`` — π by Viète's infinite product, 15 iterations, in ``decimal`` at
  ``digits`` precision (400) so one tuple costs milliseconds; CPU-bound and
  holding the GIL, so threads do not help (paper: Pi Computation).
* ``xml_parse`` — parses an in-memory XML document of ``elements`` records
  (400) with the standard library's SAX parser (paper: Parse XML).
* ``service_lookup`` — I/O-bound: asks a local TCP service for a record and
  waits for the answer; the service takes ``service_ms`` (20) per request and
  serves at most ``service_concurrency`` (16) at once, like a cloud store's SLA,
  so threads help until that limit (paper: Azure Table Query / Blob Download).
* ``batch_write`` — buffers a ``record_bytes`` (100) string per tuple and
  appends each ``window`` (10 000) to a local file with fsync (paper: Batched
  File Write). Files go to ``directory`` (a temporary one by default).
"""

from __future__ import annotations

import decimal
import os
import socket
import socketserver
import tempfile
import threading
import time
import xml.sax
from collections.abc import Callable, Mapping
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.settings import Schema, Setting

__all__ = ["TASKS", "TASK_SETTINGS", "Task", "check_task", "make_task", "viete_pi"]

Task = Callable[[int, float], object]


def viete_pi(iterations: int, digits: int) -> decimal.Decimal:
    """π from Viète's product 2/π = Π (√(2 + √(2 + …)))/2 over ``iterations`` factors."""
    ctx = decimal.Context(prec=digits)
    two = ctx.create_decimal(2)
    a = ctx.sqrt(two)
    prod = ctx.divide(a, two)
    for _ in range(iterations - 1):
        a = ctx.sqrt(ctx.add(two, a))
        prod = ctx.multiply(prod, ctx.divide(a, two))
    return ctx.divide(two, prod)


def _pi(params: Mapping[str, Any]) -> Task:
    digits = params["digits"]
    iterations = params["iterations"]

    def run(seq: int, value: float) -> object:
        return viete_pi(iterations, digits)

    return run


class _Counter(xml.sax.ContentHandler):
    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.chars = 0

    def startElement(self, name: str, attrs: Any) -> None:
        self.elements += 1

    def characters(self, content: str) -> None:
        self.chars += len(content)


def _xml_parse(params: Mapping[str, Any]) -> Task:
    n = params["elements"]
    records = "".join(
        f'<trade id="{i}" sym="S{i % 97}"><price>{100 + i * 0.25:.2f}</price>'
        f"<qty>{i % 50 + 1}</qty><note>record {i} of the feed</note></trade>"
        for i in range(n)
    )
    doc = f"<?xml version='1.0'?><feed>{records}</feed>".encode()

    def run(seq: int, value: float) -> object:
        h = _Counter()
        xml.sax.parseString(doc, h)
        return h.elements

    return run


class _SlowService(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _start_service(service_s: float, concurrency: int) -> tuple[str, int]:
    gate = threading.BoundedSemaphore(concurrency)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                with gate:
                    time.sleep(service_s)  # the service's own work, done elsewhere
                self.wfile.write(b"record:" + line.strip()[:32] + b"\n")

    server = _SlowService(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return str(host), int(port)


def _service_lookup(params: Mapping[str, Any]) -> Task:
    service_s = params["service_ms"] / 1000.0
    conc = params["service_concurrency"]
    addr = _start_service(service_s, conc)
    local = threading.local()

    def run(seq: int, value: float) -> object:
        conn = getattr(local, "conn", None)
        if conn is None:
            sock = socket.create_connection(addr, timeout=30)
            conn = local.conn = (sock, sock.makefile("rb"))
        conn[0].sendall(f"{seq}\n".encode())
        return conn[1].readline()

    return run


def _batch_write(params: Mapping[str, Any]) -> Task:
    window = params["window"]
    record = b"x" * (params["record_bytes"] - 1) + b"\n"
    directory = params["directory"] or tempfile.mkdtemp(prefix="streamscale-bw-")
    lock = threading.Lock()
    buf: list[bytes] = []
    path = os.path.join(directory, f"batch-{os.getpid()}-{threading.get_ident()}.log")

    def run(seq: int, value: float) -> object:
        with lock:
            buf.append(record)
            if len(buf) < window:
                return None
            data = b"".join(buf)
            buf.clear()
        # Appends and fsyncs outside the lock so threads overlap on the disk, as the paper's did.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return len(data)

    return run


TASKS: dict[str, tuple[Callable[[Mapping[str, Any]], Task], str]] = {
    "pi": (_pi, "π by Viète's series, 15 iterations (CPU-bound, holds the GIL)"),
    "xml_parse": (_xml_parse, "parse an in-memory XML document with the stdlib SAX parser"),
    "service_lookup": (
        _service_lookup,
        "I/O-bound: query a local TCP service with a fixed service time and concurrency limit",
    ),
    "batch_write": (_batch_write, "buffer 100-byte records, append and fsync every 10 000"),
}


#: Each task's parameters, declared once (``--param`` parsing, validation, ``--help``).
TASK_SETTINGS: dict[str, Schema] = {
    "pi": Schema(
        "pi task",
        Setting("digits", int, 400, "decimal digits of the computation", low=1, high=100_000),
        Setting("iterations", int, 15, "factors of Viète's product", low=1, high=10_000),
    ),
    "xml_parse": Schema(
        "xml_parse task",
        Setting("elements", int, 400, "elements in the parsed document", low=1, high=1_000_000),
    ),
    "service_lookup": Schema(
        "service_lookup task",
        Setting("service_ms", float, 20.0, "service time of one lookup (ms)", low=0.0),
        Setting(
            "service_concurrency", int, 16, "lookups the service serves at once", low=1, high=4096
        ),
    ),
    "batch_write": Schema(
        "batch_write task",
        Setting("window", int, 10_000, "records appended per fsync", low=1),
        Setting("record_bytes", int, 100, "bytes per record", low=2, high=1 << 20),
        Setting("directory", str, None, "where to write (default: a new temporary directory)"),
    ),
}


def check_task(name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Task ``name``'s parameters, typed and checked, without building the task."""
    if name not in TASKS:
        raise StreamscaleError(f"unknown task (known: {', '.join(TASKS)})", item=name)
    return TASK_SETTINGS[name].parse(params)


def make_task(name: str, params: Mapping[str, Any] | None = None) -> Task:
    """Build task ``name`` (one of :data:`TASKS`) with its parameters."""
    checked = check_task(name, params)
    return TASKS[name][0](checked)
