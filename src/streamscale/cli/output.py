"""Human (rich) or machine (JSON) output, chosen once by the global ``--json`` flag."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from streamscale.formatting import jsonable

__all__ = ["Output", "jsonable"]


@dataclass
class Output:
    json: bool = False

    @property
    def console(self) -> Console:
        return Console(highlight=False, soft_wrap=True)

    def emit(self, data: Any) -> None:
        """Print ``data`` as JSON (``--json``); human renderers call :meth:`table`/:meth:`line`."""
        print(json.dumps(jsonable(data), indent=2, sort_keys=False))

    def line(self, text: str) -> None:
        if not self.json:
            self.console.print(text)

    def table(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        if self.json:
            return
        t = Table(title=title, title_justify="left")
        for c in columns:
            t.add_column(c)
        for r in rows:
            t.add_row(*(_fmt(v) for v in r))
        self.console.print(t)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
