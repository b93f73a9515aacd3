"""The SSE-like job (three keyed operators on one key) on Spark equals a sequential run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from streamscale.model import Operator, Topology
from streamscale.runtime.spark.driver.graph import JobGraph
from streamscale.runtime.spark.keyed.functions_sse import order_of
from tests.runtime.spark._seq_source import SeqSource, expected_rows

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "spark-sse.yaml"
OPTS = {"keys": "12", "step": "150", "partitions": "2", "total": "600"}


def _graph() -> JobGraph:
    base = JobGraph.from_yaml(EXAMPLE).topology
    ops = [
        Operator(
            name=op.name, kind="source", params={**OPTS, "format": SeqSource.name(), "trigger_s": 0}
        )
        if op.kind == "source"
        else op
        for op in base.operators
    ]
    return JobGraph.build(Topology.build(base.name, ops, list(base.edges)), source_class=SeqSource)


def _reference(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every order of every stock in seq order through one plain book: trades and events."""
    books: dict[object, dict[str, list[list[float]]]] = {}
    vw: dict[object, tuple[float, int]] = {}
    last: dict[object, float] = {}
    trades, events = [], []
    for key, seq in expected_rows(OPTS, n)[["key", "seq"]].itertuples(index=False):
        side, price, volume = order_of(seq)
        book = books.setdefault(key, {"buy": [], "sell": []})
        other = book["sell" if side == "buy" else "buy"]
        fills = []
        # best resting order first: lowest sell / highest buy, earliest among equals
        other.sort(key=(lambda o: (o[0], o[2])) if side == "buy" else (lambda o: (-o[0], o[2])))
        while (
            volume and other and (other[0][0] <= price if side == "buy" else other[0][0] >= price)
        ):
            qty = min(volume, other[0][1])
            fills.append((other[0][0], qty))
            volume -= qty
            other[0][1] -= qty
            if not other[0][1]:
                other.pop(0)
        if volume:
            mine = book[side]
            mine.append([price, volume, seq])
            mine.sort(key=(lambda o: (-o[0], o[2])) if side == "buy" else (lambda o: (o[0], o[2])))
            del mine[20:]
        for p, q in fills:
            trades.append((key, seq, p, q))
            value, vol = vw.get(key, (0.0, 0))
            vw[key] = (value + p * q, vol + q)
            vwap = vw[key][0] / vw[key][1]
            ref = last.get(key)
            if ref is None or abs(vwap - ref) > 0.002 * ref:
                kind = "first" if ref is None else ("up" if vwap > ref else "down")
                last[key] = vwap
                events.append((key, seq, vwap, kind))
    return (
        pd.DataFrame(trades, columns=["key", "seq", "price", "volume"]),
        pd.DataFrame(events, columns=["key", "seq", "vwap", "kind"]),
    )


@pytest.mark.spark
def test_sse_job_trades_and_events_equal_a_sequential_exchange(spark, tmp_path: Path) -> None:
    from streamscale.runtime.spark.driver.dag import run_graph

    res = run_graph(
        spark,
        _graph(),
        duration_s=600,
        checkpoint=tmp_path / "ck",
        out=tmp_path,
        max_batches=3,
        policy="static",
    )
    n = 150 * len(res.records)
    want_trades, want_events = _reference(n)
    assert len(want_trades) > 50 and len(want_events) > 10  # the reference exercises the book
    order = ["key", "seq", "price", "volume"]
    got = pd.read_parquet(tmp_path / "trades")[order]
    # within one incoming order, fills are emitted in the book's order (stable sort keeps it)
    got = got.sort_values(["seq"], kind="stable").reset_index(drop=True)
    want = want_trades.sort_values(["seq"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    ev = pd.read_parquet(tmp_path / "events")[["key", "seq", "vwap", "kind"]]
    ev = ev.sort_values(["seq"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        ev,
        want_events.sort_values(["seq"], kind="stable").reset_index(drop=True),
        check_dtype=False,
    )
