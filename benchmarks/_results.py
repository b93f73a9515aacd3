"""Committed benchmark results: each JSON line appended to ``benchmarks/results/<bench>.jsonl``.

Every line is stamped with where and how it was measured — ``commit`` (``git rev-parse
HEAD``; ``"unknown"`` outside a git checkout), ``cores`` (``os.cpu_count()``),
``load_avg`` (``os.getloadavg()``, 1/5/15 min), ``command`` (the argv) and ``utc`` (ISO
8601) — so a README figure can be traced to the run that produced it (BENCHMARKS.md,
"Where results live").
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "record"]

#: Folder of the committed results files.
RESULTS = Path(__file__).resolve().parent / "results"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _load_avg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def record(bench: str, line: dict[str, Any], *, argv: list[str]) -> dict[str, Any]:
    """``line`` with ``commit``, ``cores``, ``load_avg``, ``command`` and ``utc`` added,
    appended as one JSON line to ``benchmarks/results/<bench>.jsonl`` (folder created).

    Parameters
    ----------
    bench
        Name of the results file (without ``.jsonl``), e.g. ``"planner_scale"``.
    line
        The JSON-able figures of one measurement; not modified.
    argv
        The command that produced it (usually ``sys.argv``).

    Returns
    -------
    dict
        The stamped line, as written.
    """
    out = {
        **line,
        "commit": _commit(),
        "cores": os.cpu_count(),
        "load_avg": _load_avg(),
        "command": list(argv),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / f"{bench}.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(out, sort_keys=False) + "\n")
    return out
