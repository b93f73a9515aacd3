"""Writing a reproduction's results: ``results.json``, ``results.md`` and plots."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamscale.formatting import jsonable, markdown_table

__all__ = [
    "PROVENANCE_KEYS",
    "checkout_commit",
    "figures",
    "markdown_table",
    "provenance",
    "read_headline",
    "readme_block",
    "stamp_headline",
    "write_results",
]

#: what a headline record carries beside its figure: the run that produced it
PROVENANCE_KEYS = frozenset({"command", "commit", "utc", "wall_s"})


def write_results(out: Path, results: Mapping[str, Any], markdown: str) -> None:
    """Write ``results.json`` and ``results.md`` into ``out`` (created if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(jsonable(dict(results)), indent=2))
    (out / "results.md").write_text(markdown.rstrip() + "\n")


def read_headline(path: Path) -> list[dict[str, Any]]:
    """The headline records of a ``headline.jsonl`` file, one JSON object a line."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def readme_block(heads: Sequence[Mapping[str, Any]]) -> str:
    """The paper page's table of headline figures (docs/papers): paper, literal, tuned.

    A figure measured with one variant only shows "—" under the other.
    """
    by: dict[str, dict[str, Any]] = {}
    for h in heads:
        by.setdefault(h["figure"], {"paper": h["paper"]})[h["variant"]] = h["measured"]
    rows = [[f, v["paper"], v.get("literal", "—"), v.get("tuned", "—")] for f, v in by.items()]
    return markdown_table(["figure", "paper", "literal", "tuned"], rows)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, cwd=cwd, timeout=10, check=True
    )
    return done.stdout.strip()


def provenance(
    name: str,
    *,
    quick: bool,
    seed: int,
    wall_s: float,
    custom: bool = False,
    commit: str | None = None,
) -> dict[str, Any]:
    """The command, commit, UTC time and wall time of a run of reproduction ``name``,
    for its headline records.

    ``commit`` (default: :func:`checkout_commit` now) is the checkout the run started
    from. ``command`` is ``None`` for a custom :class:`Setup`, which no command
    reproduces.
    """
    command = None
    if not custom:
        command = f"streamscale reproduce {name}" + (" --quick" if quick else "")
        command += f" --seed {seed}"
    return {
        "command": command,
        "commit": checkout_commit() if commit is None else commit,
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1),
    }


def checkout_commit() -> str:
    """The checkout's HEAD (12 hex digits), with ``+dirty`` when the sources (``src``,
    ``pyproject.toml``, ``requirements.lock``; the committed headline files aside)
    differ from it, or ``unknown`` outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        top = Path(_git(here, "rev-parse", "--show-toplevel"))
        head = _git(top, "rev-parse", "--short=12", "HEAD")
        dirty = _git(
            top,
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            "src",
            "pyproject.toml",
            "requirements.lock",
            ":!src/streamscale/experiments/*headline.jsonl",
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def figures(heads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Headline records without their provenance: what two runs of one setup must agree on."""
    return [{k: v for k, v in h.items() if k not in PROVENANCE_KEYS} for h in heads]


def stamp_headline(path: Path, stamp: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Add ``stamp`` (a :func:`provenance`) to every record of the headline file ``path``
    that has none, rewrite the file and return its records."""
    heads = [h if set(h) >= PROVENANCE_KEYS else {**h, **stamp} for h in read_headline(path)]
    path.write_text("".join(json.dumps(h) + "\n" for h in heads))
    return heads
