"""``streamscale traffic``: bad options are one line and exit 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.cli.app import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--deployment", "hours"],
            "hours: unknown deployment (known: minutes, seconds, compressed)",
        ),
        (["--hours", "0"], "--hours: must be > 0, got 0"),
        (["--trace", "nope.csv"], "nope.csv: no such trace file"),
        (["--history", "nope.csv"], "nope.csv: no such trace file"),
        (["--startup", "warm"], "startup warm: unknown start-up mode"),
        (["--policies", "fast"], "fast: unknown policy"),
    ],
)
def test_bad_options_are_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["traffic", "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0 and "Traceback" not in err
