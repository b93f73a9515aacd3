"""Writing a reproduction's results: ``results.json``, ``results.md`` and plots."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streamscale.formatting import jsonable, markdown_table

__all__ = ["markdown_table", "read_headline", "readme_block", "write_results"]


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
