"""``streamscale profile``: argument errors are one line, before Spark starts."""

from __future__ import annotations

import pytest

from streamscale.cli.app import main


def test_unknown_task_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "nope"]) != 0
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_threads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "pi", "--threads", "1,x"]) != 0
    assert "--threads" in capsys.readouterr().err
