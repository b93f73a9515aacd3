"""Smoke tests of the benchmark scripts: each runs its smallest configuration in this
process (``main([...])``), its JSON lines read from stdout.

The lines a script records go to a temporary directory (``STREAMSCALE_RESULTS_DIR``),
and every test checks that the repository's ``benchmarks/results`` did not change.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"
RESULTS = BENCH / "results"

Run = Callable[..., list[dict[str, Any]]]


def load(script: str) -> ModuleType:
    """``benchmarks/<script>.py`` as a module (its sibling modules importable)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_smoke_{script}", BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (a dataclass looks its module up)
    spec.loader.exec_module(mod)
    return mod


def _results_state() -> dict[str, int]:
    return {p.name: p.stat().st_size for p in RESULTS.glob("*.jsonl")}


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object (other output, e.g. a profile's
    table, is not a line)."""
    return [json.loads(x) for x in text.splitlines() if x.startswith("{") and x.endswith("}")]


@pytest.fixture
def run_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Run]:
    """``run_bench(script, *args, **kw)``: the script's ``main`` with ``args`` (and the
    keywords its ``main`` takes, e.g. ``spark``), returning its JSON lines. After the
    test, nothing was added to ``benchmarks/results``."""
    before = _results_state()
    monkeypatch.setenv("STREAMSCALE_RESULTS_DIR", str(tmp_path / "results"))

    def run(script: str, *args: str, **kw: Any) -> list[dict[str, Any]]:
        mod = load(script)
        monkeypatch.setattr(sys, "argv", [str(BENCH / f"{script}.py"), *args])
        rc = mod.main(list(args), **kw)
        assert rc in (None, 0), f"{script} exited {rc}"
        return json_lines(capsys.readouterr().out)

    yield run
    assert _results_state() == before, "a smoke test wrote into benchmarks/results"


@pytest.fixture
def run_script(tmp_path: Path) -> Iterator[Callable[..., list[dict[str, Any]]]]:
    """``run_script(script, *args, timeout=...)``: ``python benchmarks/<script>.py args`` in
    a process of its own (a script that patches the runtime's modules, or builds a
    session with its own settings), returning its JSON lines; it must exit 0."""
    before = _results_state()
    env = {**os.environ, "STREAMSCALE_RESULTS_DIR": str(tmp_path / "results")}

    def run(script: str, *args: str, timeout: float = 300.0) -> list[dict[str, Any]]:
        proc = subprocess.run(
            [sys.executable, str(BENCH / f"{script}.py"), *args],
            capture_output=True, text=True, env=env, timeout=timeout, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json_lines(proc.stdout)

    yield run
    assert _results_state() == before, "a smoke test wrote into benchmarks/results"


def recorded(tmp_path: Path, bench: str) -> list[dict[str, Any]]:
    """The lines a script recorded under ``bench`` in the test's results directory."""
    path = tmp_path / "results" / f"{bench}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
