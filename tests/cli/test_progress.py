"""Per-batch progress lines: plain when stderr is not a terminal, one redrawn line when it is."""

from __future__ import annotations

import io
import re

import pytest

from streamscale.cli.progress import BatchProgress, batch_line

_ROWS = [
    {"policy": "elastic", "batch": 0, "rows": 0, "time": 50.0, "executors": 1, "p99_ms": None},
    {"policy": "elastic", "batch": 1, "rows": 500, "time": 52.0, "executors": 2, "p99_ms": 900.4},
    {"policy": "elastic", "batch": 2, "rows": 900, "time": 55.0, "executors": 3, "p99_ms": 1500.0},
    {"policy": "static-base", "batch": 0, "rows": 10, "time": 49.0, "executors": 2,
     "p99_ms": 80.0},
    {"policy": "static-base", "batch": 1, "rows": 30, "time": 50.5, "executors": 2,
     "p99_ms": 95.0},
]  # fmt: skip
_FIELDS = re.compile(
    r"^\s*(?P<policy>\S+)  batch\s+(?P<batch>\d+)  rows=\s*(?P<rows>\d+)  "
    r"rate=\s*(?P<rate>\S+)/s  p99=\s*(?P<p99>\S+) ms  executors=\s*(?P<ex>\d+)  "
    r"cores=\s*(?P<cores>\S+)$"
)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_one_per_batch_with_rate_p99_executors_and_cores() -> None:
    f = io.StringIO()
    with BatchProgress(cores_per_executor=2, file=f) as show:
        for row in _ROWS:
            show(row)
    text = f.getvalue()
    assert "\x1b" not in text and "\r" not in text  # no cursor or colour codes in a log
    lines = text.splitlines()
    assert len(lines) == len(_ROWS)
    prev: dict[str, float] = {}
    for line, row in zip(lines, _ROWS, strict=True):
        m = _FIELDS.match(line)
        assert m, line
        assert (m["policy"], int(m["batch"]), int(m["rows"])) == (
            row["policy"], row["batch"], row["rows"],
        )  # fmt: skip
        # rows over the time since the policy's previous batch; none for its first
        t0 = prev.get(row["policy"])
        want = None if t0 is None else row["rows"] / (row["time"] - t0)
        assert m["rate"] == "-" if want is None else float(m["rate"]) == round(want, 1)
        assert m["p99"] == ("-" if row["p99_ms"] is None else str(round(row["p99_ms"])))
        assert int(m["ex"]) == row["executors"] and int(m["cores"]) == 2 * row["executors"]
        prev[row["policy"]] = row["time"]


def test_a_terminal_gets_one_line_redrawn_and_each_policys_last_line_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # a terminal wide enough for the whole line
    f = _Terminal()
    with BatchProgress(cores_per_executor=2, file=f) as show:
        assert show.live
        for row in _ROWS:
            show(row)
    text = f.getvalue()
    assert "\r\x1b[2K" in text  # redrawn in place
    # what stays on the screen: each policy's last batch, one line each, in order
    assert _screen(text) == [
        batch_line(_ROWS[2], rate=900 / 3, cores=6),
        batch_line(_ROWS[4], rate=30 / 1.5, cores=4),
    ]


def _screen(text: str) -> list[str]:
    """The lines a terminal shows after ``text``: ``\\n``, ``\\r``, erase line
    (``ESC[2K``) and cursor up (``ESC[1A``); other escape sequences change no text."""
    rows, y, x = [""], 0, 0
    for tok in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]+", text):
        if tok == "\n":
            y, x = y + 1, 0
            rows += [""] * (y + 1 - len(rows))
        elif tok == "\r":
            x = 0
        elif tok == "\x1b[2K":
            rows[y] = ""
        elif tok == "\x1b[1A":
            y = max(0, y - 1)
        elif not tok.startswith("\x1b"):
            rows[y] = rows[y][:x].ljust(x) + tok + rows[y][x + len(tok) :]
            x += len(tok)
    return [r.rstrip() for r in rows if r.strip()]


def test_without_cores_per_executor_the_cores_column_is_a_dash() -> None:
    line = batch_line(_ROWS[1], rate=None, cores=None)
    assert line.endswith("cores=  -") and "rate=       -/s" in line
