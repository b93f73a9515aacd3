"""benchmarks/_fair.py: the rotated order, the order check and the spread, by hand."""

from __future__ import annotations

import math
import statistics

from tests.benchmarks.conftest import load

fair = load("_fair")


def test_every_configuration_takes_every_place_once_over_as_many_repeats() -> None:
    names = ["a", "b", "c", "d"]
    orders = fair.run_order(names, 4)
    assert orders[-1] == ["a"]  # the order check: the first, again, last
    for place in range(4):
        assert sorted(o[place] for o in orders[:-1]) == names
    assert fair.run_order([], 3) == []
    assert fair.run_order(["a"], 2) == [["a"], ["a"]]


def test_the_order_check_and_the_spread_leave_out_what_is_no_number() -> None:
    line = fair.order_check({"x": 2.0, "y": 0.0, "z": None}, {"x": 3.0, "y": 1.0}, "xyz")
    assert line["figure"] == "order_check"
    assert line["again_over_first"] == {"x": 1.5, "y": None, "z": None}
    assert not fair.number(True) and not fair.number(math.nan) and fair.number(3)
    values = [4.0, 1.0, 9.0, 2.0]
    assert fair.spread(values) == {
        "median": statistics.median(values), "min": 1.0, "max": 9.0,
    }  # fmt: skip
