"""Committed benchmark results: every JSON line a benchmark prints is also appended to
``benchmarks/results/<bench>.jsonl`` with the commit, the machine's cores and load, the
command and the UTC time, so the figures in the README and the docs come from files,
never from memory."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: the repository's results; lines go to ``$STREAMSCALE_RESULTS_DIR`` instead when set
#: (:func:`results_dir`: tests record there, never into the repository's results)
RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_DIR_ENV = "STREAMSCALE_RESULTS_DIR"
_REPO = Path(__file__).resolve().parents[1]
#: One benchmark process is one run: every line it records carries the same ``run``
#: (its start time), so tables quote one run's lines together, never a mix of runs.
RUN = datetime.now(UTC).isoformat(timespec="seconds")


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, cwd=_REPO, timeout=10, check=True,
        )  # fmt: skip
        dirty = subprocess.run(
            # the results files themselves do not make a measured tree dirty
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)",
             ":(top,exclude)benchmarks/results"],
            capture_output=True, text=True, cwd=_REPO, timeout=10, check=True,
        )  # fmt: skip
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


#: The commit the process runs, read when it starts: a run that spans later commits (the
#: docs written while it ran) still names the code it measured, once.
COMMIT = _commit()


def _script() -> str:
    try:
        return str(Path(sys.argv[0]).resolve().relative_to(_REPO))
    except ValueError:
        return sys.argv[0]


def results_dir() -> Path:
    """Where :func:`record` appends: ``$STREAMSCALE_RESULTS_DIR`` when set, read at each
    call (a test sets it after this module was imported), else ``benchmarks/results``."""
    other = os.environ.get(RESULTS_DIR_ENV)
    return Path(other) if other else RESULTS


def record(bench: str, line: dict[str, Any], *, argv: list[str]) -> dict[str, Any]:
    """``line`` with ``commit``, ``cores``, ``load_avg``, ``command`` (the running script
    and ``argv``, its arguments) and ``utc`` added, appended to
    ``<results_dir()>/<bench>.jsonl``; returns the line as written. ``run`` names the
    process that recorded it (:data:`RUN`)."""
    full = {
        **line,
        "run": RUN,
        "commit": COMMIT,
        "cores": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join(shlex.quote(a) for a in ["python", _script(), *argv]),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    where = results_dir()
    where.mkdir(parents=True, exist_ok=True)
    with (where / f"{bench}.jsonl").open("a") as f:
        f.write(json.dumps(full, default=str) + "\n")
    return full
