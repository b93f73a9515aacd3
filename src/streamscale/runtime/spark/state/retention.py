"""How much of a run's output a long run keeps: the per-batch log and dead letters.

A job runs for weeks (600,000 batches at a 1 s trigger): ``metrics.jsonl`` rotates past
a size and keeps a number of rotated files, and dead-letter files beyond a total size
are removed oldest batch first — counted in the batch's metrics line
(``dead_letters_pruned``), never silently. The settings are ``--param`` values
(:data:`OUTPUT_SETTINGS`), parsed once with the run's (``runtime/run_config.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from streamscale.settings import Schema, Setting

__all__ = [
    "METRICS_SETTINGS",
    "OUTPUT_SETTINGS",
    "metrics_files",
    "prune_dead_letters",
    "read_metrics",
    "rotate",
]

#: what a run keeps of its output
OUTPUT_SETTINGS = Schema(
    "output",
    Setting(
        "metrics_max_mb", float, 64.0,
        "metrics.jsonl is rotated (to metrics.jsonl.1, .2, ...) when it exceeds this size",
        low=0.0, low_open=True,
    ),
    Setting(
        "metrics_keep", int, 4,
        "rotated metrics files kept beside metrics.jsonl (older ones are deleted)", low=0,
    ),
    Setting(
        "dead_letters_max_mb", float, 1024.0,
        "dead-letter files beyond this total are removed, oldest batch first "
        "(counted as dead_letters_pruned in metrics.jsonl)",
        low=0.0, low_open=True,
    ),
)  # fmt: skip
#: the same schema under its earlier name
METRICS_SETTINGS = OUTPUT_SETTINGS

_BATCH = re.compile(r"^batch-(\d+)-.*\.jsonl$")


def rotate(path: Path, keep: int) -> None:
    """``path`` becomes ``path.1`` (``.1`` becomes ``.2`` …); files beyond ``keep`` go."""
    if keep <= 0:
        path.unlink(missing_ok=True)
        return
    path.with_name(f"{path.name}.{keep}").unlink(missing_ok=True)
    for i in range(keep - 1, 0, -1):
        src = path.with_name(f"{path.name}.{i}")
        if src.exists():
            src.replace(path.with_name(f"{path.name}.{i + 1}"))
    if path.exists():
        path.replace(path.with_name(f"{path.name}.1"))


def metrics_files(path: str | Path) -> list[Path]:
    """``path`` and its rotated files that exist, oldest first."""
    p = Path(path)
    rotated = sorted(
        (q for q in p.parent.glob(f"{p.name}.*") if q.suffix[1:].isdigit()),
        key=lambda q: -int(q.suffix[1:]),
    )
    return [*rotated, *([p] if p.exists() else [])]


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every line of ``path`` and its rotated files, oldest first, parsed."""
    out: list[dict[str, Any]] = []
    for f in metrics_files(path):
        with f.open() as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out


def prune_dead_letters(directory: str | Path, max_bytes: float) -> int:
    """Remove dead-letter files, oldest batch first, until the directory holds at most
    ``max_bytes``; returns how many dead letters (lines) went."""
    try:
        entries = [e for e in os.scandir(directory) if _BATCH.match(e.name)]
    except FileNotFoundError:
        return 0
    sized = [(int(_BATCH.match(e.name).group(1)), e.name, e.stat().st_size) for e in entries]  # type: ignore[union-attr]
    total = sum(size for _, _, size in sized)
    dropped = 0
    for _, name, size in sorted(sized):
        if total <= max_bytes:
            break
        path = os.path.join(directory, name)
        with contextlib.suppress(FileNotFoundError):
            with open(path) as f:
                lines = sum(1 for _ in f)
            os.remove(path)
            dropped += lines
            total -= size
    return dropped
