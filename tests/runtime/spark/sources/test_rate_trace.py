"""A trace's ``timestamp,value`` rows as offered load, checked by hand."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.sources.rate_trace import (
    CLIP,
    TraceWindow,
    parse_window,
    read_rate_trace,
)
from streamscale.runtime.spark.sources.sources import GeneratorSpec

FIVE = """timestamp,value
2015-01-01 00:00:00,10
2015-01-01 00:05:00,20
2015-01-01 00:10:00,40
2015-01-01 00:15:00,30
2015-01-01 00:20:00,100
"""


@pytest.fixture
def five(tmp_path: Path) -> Path:
    p = tmp_path / "five.csv"
    p.write_text(FIVE)
    return p


def test_the_whole_file_maps_its_99th_percentile_to_the_peak_rate(five: Path) -> None:
    t = read_rate_trace(five, minutes=2.5, peak_rate=100.0)
    # sorted 10 20 30 40 100: the 99th percentile sits at 0.99 × 4 = 3.96, 40 + 0.96 × 60
    p99 = 97.6
    assert t.rates == pytest.approx([100 * v / p99 for v in (10, 20, 40, 30, 100)])
    # 25 minutes of trace (the last row holds one median interval) in 150 s: 30 s a row
    assert t.starts == pytest.approx([0, 30, 60, 90, 120])
    assert t.length_s == 150.0 and t.scale == pytest.approx(10.0)
    assert t.offered(0, 150) == pytest.approx(30 * sum(t.rates))
    assert t.rate_at(95.0) == pytest.approx(100 * 30 / p99)


def test_a_window_replays_its_rows_with_its_own_percentile(five: Path) -> None:
    t = read_rate_trace(five, window="2015-01-01 00:05:00,0.25", minutes=1.5, peak_rate=50.0)
    # 00:05, 00:10, 00:15 (00:20 is the window's end): sorted 20 30 40, p99 = 30 + 0.98 × 10
    p99 = 39.8
    assert t.rates == pytest.approx([50 * v / p99 for v in (20, 40, 30)])
    assert t.starts == pytest.approx([0, 30, 60])  # 15 minutes in 90 s
    assert t.window == TraceWindow(datetime(2015, 1, 1, 0, 5), 0.25)


def test_a_window_starting_between_rows_starts_with_the_value_in_force(five: Path) -> None:
    t = read_rate_trace(five, window="2015-01-01 00:07:00,0.25", minutes=1.5, peak_rate=50.0)
    # 00:07 holds the 00:05 row's 20, then 00:10, 00:15, 00:20 until 00:22 (15 minutes)
    p99 = 40 + 0.97 * 60  # sorted 20 30 40 100: 0.99 × 3 = 2.97
    assert t.rates == pytest.approx([50 * v / p99 for v in (20, 40, 30, 100)])
    assert t.starts == pytest.approx([0, 18, 48, 78])  # 3, 8, 13 minutes in at 6 s a minute


def test_values_above_the_percentile_clip_at_a_quarter_over_the_peak(tmp_path: Path) -> None:
    p = tmp_path / "spike.csv"
    rows = [f"2015-01-01 {h:02d}:{m:02d}:00,10" for h in range(17) for m in range(0, 60, 5)]
    rows = [*rows[:200], "2015-01-01 17:00:00,1000"]
    p.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    t = read_rate_trace(p, minutes=10, peak_rate=80.0)
    # 201 rows, 200 of them 10: the 99th percentile (index 198 sorted) is 10
    assert t.rates[:200] == pytest.approx([80.0] * 200)
    assert t.rates[200] == pytest.approx(CLIP * 80.0)
    assert t.max_rate == pytest.approx(100.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,value\n2015-01-01 00:00:00,1\n", "five.csv line 1: expected the header"),
        ("timestamp,value\n2015-01-01 00:00:00,abc\n", "five.csv line 2: 'abc' is not a number"),
        ("timestamp,value\nyesterday,1\n", "five.csv line 2: 'yesterday' is not a timestamp"),
        ("timestamp,value\n2015-01-01 00:00:00,-1\n", "five.csv line 2: value '-1' must be"),
        ("timestamp,value\n2015-01-01 00:00:00,1,2\n", "five.csv line 2: expected 2 fields"),
        (
            "timestamp,value\n2015-01-01 00:05:00,1\n2015-01-01 00:00:00,2\n",
            "five.csv line 3: timestamps must increase",
        ),
        ("timestamp,value\n", "five.csv: no rows after the header"),
        ("timestamp,value\n2015-01-01 00:00:00,0\n", "five.csv: the window's 99th percentile is 0"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "five.csv"
    p.write_text(text)
    with pytest.raises(StreamscaleError) as err:
        read_rate_trace(p, minutes=1, peak_rate=10)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_an_empty_window_names_the_window_and_the_files_span(five: Path) -> None:
    with pytest.raises(StreamscaleError) as err:
        read_rate_trace(five, window="2016-01-01 00:00:00,1", minutes=1, peak_rate=10)
    msg = str(err.value)
    assert msg.startswith("five.csv window 2016-01-01 00:00:00,1: no rows between")
    assert "2015-01-01 00:00:00 to 2015-01-01 00:20:00" in msg


@pytest.mark.parametrize(
    ("kw", "item"),
    [({"minutes": 0, "peak_rate": 1}, "minutes"), ({"minutes": 1, "peak_rate": -2}, "peak rate")],
)
def test_non_positive_minutes_or_rate_are_refused(five: Path, kw: dict, item: str) -> None:
    with pytest.raises(StreamscaleError, match=f"^{item}: must be > 0"):
        read_rate_trace(five, **kw)


def test_a_missing_file_and_a_bad_window_name_themselves(tmp_path: Path) -> None:
    with pytest.raises(StreamscaleError, match=r"nope\.csv: no such trace file"):
        read_rate_trace(tmp_path / "nope.csv", minutes=1, peak_rate=1)
    with pytest.raises(StreamscaleError, match="window 'x,y': expected START,HOURS"):
        parse_window("x,y")
    with pytest.raises(StreamscaleError, match="HOURS must be > 0"):
        parse_window(",0")


def test_the_generator_offers_the_trace_after_its_delay(five: Path) -> None:
    spec = GeneratorSpec.from_options(
        {"trace": str(five), "trace_minutes": "2.5", "peak_rate": "100", "trace_delay_s": "20"}
    )
    first = 100 * 10 / 97.6
    # 20 s at the first rate, then 30 s per row
    assert spec.available(20.0) == int(20 * first)
    assert spec.available(50.0) == int(50 * first)
    assert spec.available(80.0) == int(50 * first + 30 * 100 * 20 / 97.6)
    assert GeneratorSpec.from_options(spec.to_options()) == spec


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"trace_minutes": "2"}, "option 'peak_rate': required with option 'trace'"),
        ({"peak_rate": "5", "schedule": "0:1"}, "option 'trace': give 'trace' or 'schedule'"),
    ],
)
def test_the_generators_trace_options_are_checked(five: Path, options: dict, message: str) -> None:
    with pytest.raises(StreamscaleError, match=message):
        GeneratorSpec.from_options({"trace": str(five), **options})
