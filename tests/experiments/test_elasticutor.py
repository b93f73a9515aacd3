"""Provenance of the Elasticutor reproduction's headline records."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamscale.experiments.elasticutor import provenance


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
    p = provenance(quick=True, seed=3, custom=False, wall_s=12.34)
    assert p["command"] == "streamscale reproduce elasticutor --quick --seed 3"
    assert p["commit"].removesuffix("+dirty") == head[:12]
    assert p["wall_s"] == 12.3
    assert before <= datetime.fromisoformat(p["utc"]) <= datetime.now(UTC)
    full = provenance(quick=False, seed=1, custom=False, wall_s=0.0)
    assert full["command"] == "streamscale reproduce elasticutor --seed 1"
    assert provenance(quick=True, seed=1, custom=True, wall_s=0.0)["command"] is None
