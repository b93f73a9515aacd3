"""Headline files: provenance stamped once, figures compared without it."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamscale.experiments.report import (
    PROVENANCE_KEYS,
    figures,
    provenance,
    read_headline,
    stamp_headline,
)


def test_stamp_keeps_a_record_that_names_its_run_and_stamps_the_others(tmp_path: Path) -> None:
    old = {"figure": "x", "variant": "literal", "paper": 1, "measured": 1,
           "command": "c", "commit": "0" * 12, "utc": "2026-01-01T00:00:00+00:00", "wall_s": 5.0}  # fmt: skip
    new = {"figure": "y", "variant": "tuned", "paper": 2, "measured": 3}
    path = tmp_path / "headline.jsonl"
    path.write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    stamp = provenance("albic", quick=False, seed=1, wall_s=61.26)
    assert stamp["command"] == "streamscale reproduce albic --seed 1"
    assert stamp["wall_s"] == 61.3
    heads = stamp_headline(path, stamp)
    assert heads == read_headline(path)
    assert heads[0] == old
    assert heads[1] == {**new, **stamp}
    assert set(heads[1]) == {"figure", "variant", "paper", "measured"} | PROVENANCE_KEYS
    assert figures(heads) == [{k: old[k] for k in new}, new]


def test_a_custom_run_names_no_command() -> None:
    p = provenance("task-allocation", quick=True, seed=4, wall_s=0.0, custom=True)
    assert p["command"] is None
    q = provenance("task-allocation", quick=True, seed=4, wall_s=0.0)
    assert q["command"] == "streamscale reproduce task-allocation --quick --seed 4"


def _head() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    return done.stdout.strip()


def test_provenance_names_the_command_and_the_checked_out_commit() -> None:
    head = _head()
    before = datetime.now(UTC).replace(microsecond=0)
    p = provenance("elasticutor", quick=True, seed=3, custom=False, wall_s=12.34)
    assert p["command"] == "streamscale reproduce elasticutor --quick --seed 3"
    assert p["commit"].removesuffix("+dirty") == head[:12]
    assert p["wall_s"] == 12.3
    assert before <= datetime.fromisoformat(p["utc"]) <= datetime.now(UTC)
    full = provenance("elasticutor", quick=False, seed=1, custom=False, wall_s=0.0)
    assert full["command"] == "streamscale reproduce elasticutor --seed 1"
    assert provenance("elasticutor", quick=True, seed=1, custom=True, wall_s=0.0)["command"] is None
