"""Docs drift (docs/papers/elasticutor.md), Elasticutor's quick headline: ``streamscale reproduce elasticutor --quick``
(seed 1) regenerates exactly the committed file (its own module, so the suite's two
workers can run it beside the other reproductions' drift tests).

The test runs only the simulations the headline figures read (``headline_only``: 22 of
the quick run's 78, each seeded and independent of the others), so the committed file,
written by the full command, checks that those runs are the same as the command's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamscale.experiments import elasticutor
from streamscale.experiments.report import read_headline
from tests.experiments.test_readme_headlines import _numbers

#: (907 s and 1876 s of wall time under different load, and this test) gave the same
#: figures to the last digit: the simulator is seeded and reads the clock only for the
#: scheduler's decision time, which no headline figure uses. The tolerance only absorbs
#: floating-point summation order on another machine.
ELASTICUTOR_QUICK_RTOL = 1e-6


@pytest.mark.slow
def test_elasticutor_quick_headline_is_what_reproduce_quick_prints(tmp_path: Path) -> None:
    elasticutor.run(tmp_path, quick=True, seed=1, headline_only=True)
    fresh = read_headline(tmp_path / "headline.jsonl")
    committed = read_headline(elasticutor.QUICK_HEADLINE_FILE)
    number = r"-?\d+(?:\.\d+)?"
    assert [re.sub(number, "#", h["figure"]) for h in fresh] == [
        re.sub(number, "#", h["figure"]) for h in committed
    ]
    for a, b in zip(fresh, committed, strict=True):
        assert (a["paper"], a["variant"]) == (b["paper"], b["variant"])
        got = _numbers(a["figure"]) + _numbers(a["measured"])
        want = _numbers(b["figure"]) + _numbers(b["measured"])
        assert got == pytest.approx(want, rel=ELASTICUTOR_QUICK_RTOL, abs=1e-3), (a, b)
