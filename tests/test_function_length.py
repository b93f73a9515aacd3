"""The driver stays in named steps: no function under ``src/streamscale/runtime`` is longer
than 100 lines (its signature and docstring included), counted from the source's AST."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).parents[1] / "src" / "streamscale" / "runtime"
LIMIT = 100


def long_functions(root: Path, limit: int) -> list[tuple[str, int]]:
    """``(file:function, lines)`` of every function under ``root`` longer than ``limit``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append((f"{path.relative_to(root)}:{node.name}", lines))
    return found


def test_no_runtime_function_is_longer_than_the_limit() -> None:
    assert long_functions(RUNTIME, LIMIT) == []


def test_the_count_finds_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path, LIMIT) == [("m.py:long", LIMIT + 1)]
