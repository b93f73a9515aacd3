"""Prometheus ``/metrics`` for a running job, beside ``metrics.jsonl``.

One :class:`MetricsExporter` serves its own registry on a loopback port and is fed
the runner's batch records (``on_batch``): executors alive and requested, the
plan's cores per operator (its units), the imbalance δ, the backlog, latency
percentiles, rates, and control decisions counted by reason.
"""

from __future__ import annotations

import contextlib
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from streamscale.errors import StreamscaleError

__all__ = ["MetricsExporter"]

_P = "streamscale_"


class MetricsExporter:
    """Serve a job's figures at ``http://host:port/metrics``.

    Parameters
    ----------
    port
        TCP port (0 picks a free one; the bound port is :attr:`port`).
    host
        Address to bind; loopback unless exposing the figures is wanted.
    job
        Value of the ``job`` label on every series.
    """

    def __init__(self, port: int = 0, *, host: str = "127.0.0.1", job: str = "streamscale") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        lab = ["job"]
        r = self.registry
        self._g = {
            name: Gauge(_P + name, doc, lab, registry=r)
            for name, doc in (
                ("executors_alive", "Executors alive (Spark's scheduler)."),
                ("executors_requested", "Executors requested from the cluster manager."),
                ("executors_missing", "Requested executors not arrived within the timeout."),
                ("cores", "Cores available to the job."),
                ("delta", "Imbalance δ of the keyed stage in the last batch."),
                ("backlog_rows", "Rows offered but not yet processed."),
                ("input_rate", "Rows per second offered in the last batch."),
                ("processing_rate", "Rows per second processed in the last batch."),
                ("batch_duration_seconds", "Duration of the last batch."),
            )
        }
        self._latency = Gauge(
            _P + "latency_ms", "Event time to output, last batch.", ["job", "quantile"], registry=r
        )
        self._op_cores = Gauge(
            _P + "operator_cores", "Cores (units) of an operator in the plan.", ["job", "operator"],
            registry=r,
        )  # fmt: skip
        self._batches = Counter(_P + "batches", "Batches completed.", lab, registry=r)
        self._rows = Counter(_P + "rows", "Rows processed.", lab, registry=r)
        self._decisions = Counter(
            _P + "decisions", "Control decisions applied, by reason.", ["job", "reason"], registry=r
        )
        self._scale = Counter(
            _P + "executor_changes", "Executors added or released.", ["job", "change"], registry=r
        )
        self.job = job
        self._ops: set[str] = set()
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=r)
        except OSError as exc:
            raise StreamscaleError(
                f"cannot serve metrics on {host}:{port}: {exc}", item="--metrics-port"
            ) from exc
        self.host = host
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def observe(self, batch: Any) -> None:
        """Update every series from one batch
        (:class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`): cores per keyed
        operator, the job's δ (its most imbalanced keyed operator's), backlog, rates,
        latency percentiles and duration, rows into the keyed operators, decisions,
        executors."""
        j = self.job
        ex = batch.extra or {}
        values: dict[str, Any] = {
            "cores": sum(batch.cores.values()),
            "delta": batch.delta,
            "backlog_rows": ex.get("backlog"),
            "input_rate": batch.input_rate,
            "processing_rate": batch.processing_rate,
            "batch_duration_seconds": batch.duration_s,
            "executors_alive": ex.get("executors_alive"),
            "executors_requested": ex.get("executors_requested"),
            "executors_missing": ex.get(
                "executors_missing", 0 if "executors_alive" in ex else None
            ),
        }
        self._set(values, sum(batch.keyed_rows.values()), ex)
        self._latency.labels(j, "0.5").set(batch.latency_p50_ms)
        self._latency.labels(j, "0.99").set(batch.latency_p99_ms)
        self._set_cores(dict(batch.cores))

    def _set(self, values: dict[str, Any], rows: int, ex: Any) -> None:
        j = self.job
        for name, v in values.items():
            if v is not None:
                self._g[name].labels(j).set(float(v))
        self._batches.labels(j).inc()
        self._rows.labels(j).inc(rows)
        for reason in ex.get("applied", ()):
            self._decisions.labels(j, str(reason)).inc()
        self._scale.labels(j, "added").inc(len(ex.get("executors_added", ()) or ()))
        self._scale.labels(j, "released").inc(len(ex.get("executors_released", ()) or ()))

    def _set_cores(self, ops: Any) -> None:
        j = self.job
        for op in self._ops - set(ops):
            self._op_cores.labels(j, op).set(0)
        for op, n in ops.items():
            self._op_cores.labels(j, op).set(n)
        self._ops |= set(ops)

    def close(self) -> None:
        """Stop serving."""
        with contextlib.suppress(Exception):
            self._server.shutdown()
            self._server.server_close()
