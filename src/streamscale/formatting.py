"""Plain JSON values and markdown tables, shared by every layer that writes a report.

The command line (:mod:`streamscale.cli.output`), the reproductions
(:mod:`streamscale.experiments.report`) and the Spark demo write the same JSON and
tables; the helpers live here, below all of them (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["jsonable", "markdown_table"]


def jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become ``None`` so the output stays valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    return obj


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table; floats shown with 4 significant digits."""

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join([head, sep, *body])
