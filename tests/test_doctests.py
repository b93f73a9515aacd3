"""Every docstring example under ``src/streamscale`` runs and prints what it shows.

One test per module holding an example (``>>>`` in its source), found from the file tree
without importing anything at collection; the module's examples run with the standard
:mod:`doctest` (``ELLIPSIS`` on), so a failure names the module and the example. Modules
whose examples need a running SparkSession or files are in :data:`EXCLUDED`, each with
its reason; an excluded module that no longer holds an example fails, so the list only
shrinks.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "streamscale"

#: module -> why its examples are not run here
EXCLUDED: dict[str, str] = {
    "streamscale.runtime.spark.api": "the join example reads Parquet files into a running query",
}


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` under ``src``."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def with_examples() -> list[str]:
    """Every module under ``src/streamscale`` whose source holds ``>>>``, sorted."""
    return sorted(module_name(p) for p in SRC.rglob("*.py") if ">>>" in p.read_text())


@pytest.mark.parametrize("name", [m for m in with_examples() if m not in EXCLUDED])
def test_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name}: '>>>' in the source but no docstring example found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_the_exclusions_still_hold_examples() -> None:
    assert set(EXCLUDED) <= set(with_examples())


def test_a_wrong_output_fails() -> None:
    """The runner used above reports a wrong printed result as a failure."""
    test = doctest.DocTestParser().get_doctest(">>> 1 + 1\n3\n", {}, "wrong", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda _: None)
    assert runner.summarize(verbose=False).failed == 1
