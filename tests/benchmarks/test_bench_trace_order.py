"""``bench_trace.py``'s fair order with its two run functions replaced by records of the
order they were called in (no Spark): the policies rotated by one per repeat, the first
policy once more at the end, its order-check line beside its first run, and summaries
over the repeats only."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import pytest

from tests.benchmarks.conftest import load

bench = load("bench_trace")


@dataclass(frozen=True)
class _Cfg:
    startup: str = "real"


def _replay(monkeypatch: pytest.MonkeyPatch, policies: list[str], repeats: int) -> tuple[
    list[list[str]], list[dict[str, Any]]
]:  # fmt: skip
    calls: list[list[str]] = []
    lines: list[dict[str, Any]] = []

    def run_once(*a: Any) -> dict[str, dict[str, float]]:
        order, k = a[4], a[6]
        calls.append(list(order))
        figs = {n: {"slo_tuples": 1.0, "core_seconds": 100.0 + 10 * k + i, "p99_ms": 5.0}
                for i, n in enumerate(order)}  # fmt: skip
        return {**figs, "oracle": {"core_seconds": 50.0}}

    def run_again(*a: Any) -> dict[str, float]:
        calls.append([a[4]])
        return {"slo_tuples": 0.5, "core_seconds": 150.0, "p99_ms": 10.0}

    monkeypatch.setattr(bench, "run_once", run_once)
    monkeypatch.setattr(bench, "run_again", run_again)
    monkeypatch.setattr(bench, "_common", lambda *a: {"startup": a[2]})
    monkeypatch.setattr(bench, "_emit", lambda line, argv: lines.append(line))
    args = argparse.Namespace(repeats=repeats)
    bench.run_mode("local[2]", _Cfg(), bench.DEPLOYMENTS["minutes"], "emulated", policies, 1.0,
                   args, [])  # fmt: skip
    return calls, lines


def test_the_policies_rotate_then_the_first_runs_again_beside_its_first_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls, lines = _replay(monkeypatch, ["elastic", "static-peak"], 3)
    assert calls == [["elastic", "static-peak"], ["static-peak", "elastic"],
                     ["elastic", "static-peak"], ["elastic"]]  # fmt: skip
    (check,) = [x for x in lines if x.get("figure") == "order_check"]
    assert check["policy"] == "elastic"
    assert check["first"] == {"slo_tuples": 1.0, "core_seconds": 100.0, "p99_ms": 5.0}
    assert check["again_over_first"] == {"slo_tuples": 0.5, "core_seconds": 1.5, "p99_ms": 2.0}
    summaries = {x["policy"]: x for x in lines if x.get("figure") == "summary"}
    # elastic ran first, second, first: 100, 111, 120 core-seconds; the check's 150 is out
    assert summaries["elastic"]["repeats"] == 3
    assert summaries["elastic"]["core_hours_vs_oracle"] == {"median": 111 / 50, "min": 2.0,
                                                            "max": 2.4}  # fmt: skip
    assert lines[-1]["figure"] == "summary"


def test_one_policy_runs_no_order_check(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, lines = _replay(monkeypatch, ["elastic"], 2)
    assert calls == [["elastic"], ["elastic"]]
    assert not [x for x in lines if x.get("figure") == "order_check"]
