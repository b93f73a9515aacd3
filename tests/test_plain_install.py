"""A plain ``pip install streamscale`` (no extras) runs the data pipeline and the elastic
policy; a command that needs the ``papers`` extra says so in one line.

The test environment has every extra installed, so a plain install is emulated: a
``sitecustomize`` module on ``PYTHONPATH`` replaces the path finder of ``sys.meta_path``
with one that does not see the extras' modules (:data:`streamscale.errors.EXTRAS`):
importing one fails and ``importlib.util.find_spec`` answers ``None``, as without them. Every Python process of the run loads it — the driver and Spark's Python
workers alike (Spark passes ``PYTHONPATH`` on to them) — so an import of an extra
anywhere on the pipeline's path fails the run. (A fresh virtual environment would need
the network or a wheel cache; this needs neither.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.errors import EXTRAS
from tests.test_docs import ROOT, fenced_blocks
from tests.test_docs_blocks import section

BLOCKED = tuple(m for modules in EXTRAS.values() for m in modules)

SITECUSTOMIZE = f"""
import sys
from importlib.machinery import PathFinder


class _PlainInstall(PathFinder):
    # the path finder, blind to the extras' modules, as a plain install has them

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.split(".")[0] in {BLOCKED!r}:
            return None
        return PathFinder.find_spec(fullname, path, target)


sys.meta_path[:] = [_PlainInstall if f is PathFinder else f for f in sys.meta_path]
"""


def plain_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that sees no extra installed."""
    site = tmp_path / "plain-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


def run_plain(tmp_path: Path, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=plain_env(tmp_path), cwd=tmp_path,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_the_base_install_declares_the_protobuf_sparks_state_api_needs() -> None:
    """pyspark's ``transformWithStateInPandas`` (the ``restart-ds2`` baseline) imports the
    protobuf code generated for its state messages, which refuses a protobuf runtime older
    than the one that generated it; pyspark does not declare protobuf (the development
    install had it only through OR-Tools, of the ``papers`` extra), so the base
    dependencies must, from that version on, and the lock must pin such a version."""
    import tomllib
    from importlib.util import find_spec

    from packaging.requirements import Requirement
    from packaging.version import Version

    pyspark = find_spec("pyspark")
    assert pyspark is not None and pyspark.origin is not None
    generated = Path(pyspark.origin).parent / "sql" / "streaming" / "proto" / "StateMessage_pb2.py"
    m = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*"
        r"(\d+),\s*(\d+),\s*(\d+),",
        generated.read_text(),
    )
    assert m is not None, generated
    needed = Version(".".join(m.groups()))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(d) for d in project["dependencies"]]
    protobuf = [r for r in declared if r.name == "protobuf"]
    assert len(protobuf) == 1, "the base dependencies do not declare protobuf"
    lows = [Version(s.version) for s in protobuf[0].specifier if s.operator in (">=", "==")]
    assert lows and max(lows) >= needed, (str(protobuf[0].specifier), str(needed))
    pins = re.findall(r"^protobuf==(\S+)$", (ROOT / "requirements.lock").read_text(), re.M)
    assert len(pins) == 1 and Version(pins[0]) in protobuf[0].specifier, pins


def test_the_extras_are_blocked(tmp_path: Path) -> None:
    res = run_plain(tmp_path, "import matplotlib")
    assert res.returncode == 1 and "No module named 'matplotlib'" in res.stderr


def test_the_pipeline_and_the_elastic_policy_import_without_extras(tmp_path: Path) -> None:
    code = (
        "import importlib, pkgutil, streamscale\n"
        "for pkg in ('model', 'control', 'runtime'):\n"
        "    p = importlib.import_module('streamscale.' + pkg)\n"
        "    for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "import streamscale.cli.app\n"
        "from streamscale.control.policies import check_policy\n"
        "check_policy('elastic')\n"
        "streamscale.stream, streamscale.session, streamscale.Executors\n"
    )
    res = run_plain(tmp_path, code)
    assert res.returncode == 0, res.stderr[-3000:]


def test_a_command_needing_the_papers_extra_says_so_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from streamscale.cli.app import main\n"
        "sys.exit(main(['reproduce', 'elasticutor', '--quick', '--out', 'out']))\n"
    )
    res = run_plain(tmp_path, code)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.splitlines() == [
        "streamscale: error: ortools: needs the 'papers' extra: pip install \"streamscale[papers]\""
    ]
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_a_planner_needing_the_papers_extra_says_so_in_one_line(tmp_path: Path) -> None:
    code = (
        "from streamscale.errors import StreamscaleError\n"
        "from streamscale.planning.balancing import cola\n"
        "try:\n"
        "    cola.metis_split(None, [0, 1, 2], 2)\n"
        "except StreamscaleError as exc:\n"
        "    print(exc)\n"
    )
    res = run_plain(tmp_path, code)
    assert (
        res.stdout.strip()
        == "pymetis: needs the 'papers' extra: pip install \"streamscale[papers]\""
    )


@pytest.mark.spark
@pytest.mark.slow
def test_the_readme_quick_start_runs_without_extras(tmp_path: Path) -> None:
    """The README's quick start, as written, in a process (and Spark workers) where no
    extra is installed: the default policy (elastic) plans every batch."""
    blocks = fenced_blocks(section((ROOT / "README.md").read_text(), "Quick start"), ("python",))
    prelude = "import streamscale\nspark = streamscale.session('local[2]', shuffle_partitions=2)\n"
    check = (
        "\nassert result.batches == 2, result.batches\n"
        "assert result.records[-1].policy == 'elastic', result.records[-1].policy\n"
        "assert 'applied' in result.records[-1].extra and result.records[-1].cores\n"
        "try:\n"
        "    import matplotlib\n"
        "except ModuleNotFoundError:\n"
        "    print('PLAIN-OK')\n"
    )
    script = tmp_path / "quick_start.py"
    script.write_text(prelude + "\n".join(blocks) + check)
    res = run_plain(tmp_path, f"exec(open({str(script)!r}).read())", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "PLAIN-OK" in res.stdout
