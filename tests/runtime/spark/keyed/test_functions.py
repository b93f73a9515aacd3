"""Bundled operator functions: the calculator's state and CPU cost, the order-checking counter."""

from __future__ import annotations

import time

import pandas as pd

from streamscale.runtime.spark.keyed.functions import burn, calculator, counter


def test_calculator_counts_sums_and_emits_running_values() -> None:
    rows = pd.DataFrame(
        {"key": ["a", "b", "a"], "value": [1.0, 2.0, 3.0], "cost_ms": [0.0, 0.0, 0.0]}
    )
    state: dict = {"a": [1, 10.0]}
    out = calculator(rows, state)
    assert state == {"a": [3, 14.0], "b": [1, 2.0]}
    assert out["count"].tolist() == [2, 1, 3] and out["sum"].tolist() == [11.0, 2.0, 14.0]


def test_burn_spends_cpu_time() -> None:
    t0 = time.thread_time()
    burn(20.0)
    assert time.thread_time() - t0 >= 0.02


def test_counter_flags_out_of_order_tuples() -> None:
    state: dict = {}
    counter(pd.DataFrame({"key": ["a", "a", "b"], "seq": [1, 5, 2]}), state)
    assert state["order_violations"] == 0
    out = counter(pd.DataFrame({"key": ["a", "b"], "seq": [4, 9]}), state)
    assert state["order_violations"] == 1  # a's 4 came after its 5
    assert state["count"] == {"a": 3, "b": 2}
    assert out.set_index("key")["count"].to_dict() == {"a": 3, "b": 2}
