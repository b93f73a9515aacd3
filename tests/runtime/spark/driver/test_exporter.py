"""The exporter serves, over real HTTP on loopback, the figures of the batches it was fed."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.exporter import MetricsExporter
from streamscale.runtime.spark.driver.graph import SinkOut
from streamscale.runtime.spark.driver.graph_batch import GraphBatch


def _rec(batch: int, cores: dict[str, int], **extra: object) -> GraphBatch:
    return GraphBatch(
        batch_id=batch,
        duration_s=0.5,
        keyed_rows={op: 100 * (batch + 1) for op in cores},
        sinks={},
        dead_letters=0,
        cores=cores,
        tasks=cores,
        extra=extra,
        time=float(batch),
        rows=100 * (batch + 1),
        input_rate=200.0,
        processing_rate=180.0,
        latency_p50_ms=12.0,
        latency_p99_ms=90.0 + batch,
        delta=0.25,
        busy_s=0.4,
        policy="elastic",
    )


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "job"))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_metrics_follow_the_batches() -> None:
    ex = MetricsExporter(0, job="t")
    try:
        assert ex.host == "127.0.0.1"
        ex.observe(
            _rec(0, {"calc": 3, "sink": 1},
                 backlog=40, executors_alive=3, executors_requested=4,
                 executors_added=["1", "2", "3"], applied=["scale-out"])
        )  # fmt: skip
        ex.observe(
            _rec(1, {"calc": 2}, backlog=5, executors_alive=2,
                 executors_requested=2, executors_added=[], executors_released=["3"],
                 applied=["scale-in", "scale-out"])
        )  # fmt: skip
        m = _scrape(ex.url)
    finally:
        ex.close()
    assert m[("streamscale_operator_cores", (("operator", "calc"),))] == 2
    assert m[("streamscale_operator_cores", (("operator", "sink"),))] == 0  # gone from the plan
    assert m[("streamscale_executors_alive", ())] == 2
    assert m[("streamscale_executors_requested", ())] == 2
    assert m[("streamscale_backlog_rows", ())] == 5
    assert m[("streamscale_latency_ms", (("quantile", "0.99"),))] == 91.0
    assert m[("streamscale_rows_total", ())] == (100 + 100) + 200  # rows into every keyed operator
    assert m[("streamscale_batches_total", ())] == 2
    assert m[("streamscale_decisions_total", (("reason", "scale-out"),))] == 2
    assert m[("streamscale_decisions_total", (("reason", "scale-in"),))] == 1
    assert m[("streamscale_executor_changes_total", (("change", "added"),))] == 3
    assert m[("streamscale_executor_changes_total", (("change", "released"),))] == 1


def test_port_in_use_is_one_line_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(StreamscaleError) as err:
            MetricsExporter(port)
    assert err.value.item == "--metrics-port"


def test_a_graph_batch_serves_the_jobs_figures() -> None:
    def batch(i: int, cores: dict[str, int], **extra: object) -> GraphBatch:
        return GraphBatch(
            batch_id=i, duration_s=0.5 + i, keyed_rows={"a": 10 * (i + 1), "b": 3},
            sinks={"out": SinkOut("out", 4)}, dead_letters=0, cores=cores, tasks={"a": 1},
            extra={"backlog": 7 - i, **extra}, time=float(i), rows=10 * (i + 1),
            input_rate=50.0 + i, processing_rate=40.0, latency_p50_ms=3.0,
            latency_p99_ms=30.0 + i, delta=1.5, busy_s=0.2, cpu_s=0.1,
        )  # fmt: skip

    ex = MetricsExporter(0, job="g")
    try:
        ex.observe(batch(0, {"a": 2, "b": 1}, applied=["scale-out"]))
        ex.observe(batch(1, {"a": 3}))
        m = _scrape(ex.url)
    finally:
        ex.close()
    assert m[("streamscale_operator_cores", (("operator", "a"),))] == 3
    assert m[("streamscale_operator_cores", (("operator", "b"),))] == 0  # gone from the plan
    assert m[("streamscale_cores", ())] == 3
    assert m[("streamscale_delta", ())] == 1.5
    assert m[("streamscale_backlog_rows", ())] == 6
    assert m[("streamscale_input_rate", ())] == 51.0
    assert m[("streamscale_processing_rate", ())] == 40.0
    assert m[("streamscale_batch_duration_seconds", ())] == 1.5
    assert m[("streamscale_latency_ms", (("quantile", "0.5"),))] == 3.0
    assert m[("streamscale_latency_ms", (("quantile", "0.99"),))] == 31.0
    assert m[("streamscale_rows_total", ())] == (10 + 3) + (20 + 3)
    assert m[("streamscale_batches_total", ())] == 2
    assert m[("streamscale_decisions_total", (("reason", "scale-out"),))] == 1
