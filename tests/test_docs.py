"""The documentation site builds without a warning, and what it names exists.

* ``mkdocs build --strict`` (broken links and anchors are errors) into a temporary
  directory, with the reference pages generated from the code (``docs/hooks.py``);
* every ``streamscale ...`` command line in the README and the docs names a command
  that exists, with options that command takes, and every ``--param NAME=`` a
  declared setting;
* the shipped Grafana dashboard queries only series the exporter serves.

The code blocks of the tutorial and the README's quick start run in
``tests/test_docs_blocks.py`` (Spark).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
DASHBOARD = ROOT / "examples" / "grafana" / "streamscale-dashboard.json"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hooks = _hooks()


def fenced_blocks(text: str, langs: tuple[str, ...]) -> list[str]:
    """The bodies of the fenced code blocks of ``text`` in one of ``langs``, in order."""
    pattern = r"^```(\w*)[^\n]*\n(.*?)^```"
    return [b for lang, b in re.findall(pattern, text, re.S | re.M) if lang in langs]


def command_lines(text: str) -> list[str]:
    """Every ``streamscale ...`` command line: shell blocks (continuations joined) and
    inline code spans."""
    lines: list[str] = []
    for block in fenced_blocks(text, ("sh", "bash", "shell", "console")):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"\$\(|&&|;|\|", line):
                part = part.strip()
                if part.startswith("streamscale "):
                    lines.append(part)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    lines += [m for m in re.findall(r"`(streamscale [^`]+)`", prose)]
    return lines


def _tokens(line: str) -> list[str]:
    line = line.split(" #", 1)[0]
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def check_command(line: str, tree: dict[str, set[str]], groups: set[str]) -> list[str]:
    """What in ``line`` does not exist: a sub-command, or an option of its command."""
    tokens = [t.strip("[]()…,.") for t in _tokens(line)[1:]]
    path, problems = "streamscale", []
    for tok in tokens:
        if not tok:
            continue
        if tok.startswith("--"):
            for name in tok.split("=", 1)[0].split("/"):  # --a/--b: either option
                if name not in tree[path] | {"--help"}:
                    problems.append(f"{line!r}: {path} has no option {name}")
        elif path in groups:
            if tok.isupper():  # a placeholder: streamscale COMMAND --help
                break
            if f"{path} {tok}" not in tree:
                problems.append(f"{line!r}: no command {path} {tok}")
                break
            path = f"{path} {tok}"
    return problems


def test_site_builds_strict_with_the_generated_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "WARNING" not in res.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for path, _ in hooks.commands():
        assert f"<code>{path}</code>" in cli, path
    settings = (site / "reference" / "settings" / "index.html").read_text()
    from streamscale.control.policies import specs
    from streamscale.runtime.run_config import RUN_SETTINGS

    for s in RUN_SETTINGS.settings:
        assert f"<code>{s.name}</code>" in settings, s.name
    for spec in specs():
        assert f"<code>{spec.name}</code>" in settings, spec.name
        for s in spec.settings.settings:
            assert f"<code>{s.name}</code>" in settings, (spec.name, s.name)
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "key_by" in api and "from_group_state" in api


def test_every_documented_command_and_option_exists() -> None:
    tree = {path: {o for q in cmd.params for o in (*q.opts, *q.secondary_opts)}
            for path, cmd in hooks.commands()}  # fmt: skip
    groups = {path for path, cmd in hooks.commands() if hooks._is_group(cmd)}
    seen, problems = 0, []
    for page in PAGES:
        for line in command_lines(page.read_text()):
            seen += 1
            problems += [
                f"{page.relative_to(ROOT)}: {p}" for p in check_command(line, tree, groups)
            ]
    assert seen > 50
    assert problems == []


def test_the_command_check_catches_what_does_not_exist() -> None:
    tree = {path: {o for q in cmd.params for o in (*q.opts, *q.secondary_opts)}
            for path, cmd in hooks.commands()}  # fmt: skip
    groups = {path for path, cmd in hooks.commands() if hooks._is_group(cmd)}
    assert check_command("streamscale run job.yaml --duration 5", tree, groups) == []
    assert check_command("streamscale cluster start", tree, groups)
    assert check_command("streamscale run job.yaml --durations 5", tree, groups)
    assert check_command("streamscale --json cluster status --dir d", tree, groups) == []


def test_every_documented_param_is_a_declared_setting() -> None:
    names = hooks.setting_names()
    used: dict[str, set[str]] = {}
    for page in PAGES:
        for name in re.findall(r"--param[ =]([a-z][a-z0-9_]*)=", page.read_text()):
            used.setdefault(name, set()).add(str(page.relative_to(ROOT)))
    assert len(used) >= 8
    assert {n: sorted(p) for n, p in used.items() if n not in names} == {}


def test_readme_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(links) > 20
    assert [x for x in links if "://" not in x and not (ROOT / x).exists()] == []


def _served_series() -> set[str]:
    from streamscale.runtime.spark.driver.exporter import MetricsExporter

    exp = MetricsExporter(0, job="docs")
    try:
        served = set()
        for family in exp.registry.collect():
            served.add(family.name if family.type != "counter" else family.name + "_total")
        return served
    finally:
        exp.close()


def test_the_dashboard_queries_only_served_series_and_the_guide_lists_them_all() -> None:
    served = _served_series()
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    queried = {m for e in exprs for m in re.findall(r"streamscale_[a-z_]+", e)}
    assert queried and queried <= served, queried - served
    assert served <= queried  # every series has a panel
    guide = (DOCS / "how-to" / "prometheus.md").read_text()
    assert {s for s in served if f"`{s}`" not in guide} == set()


def test_every_page_is_in_the_nav() -> None:
    import yaml

    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, dict):
            return [p for v in nav.values() for p in pages(v)]
        if isinstance(nav, list):
            return [p for v in nav for p in pages(v)]
        return []

    listed = pages(cfg["nav"])
    assert len(listed) == len(set(listed))
    assert {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")} == set(listed)


def test_the_metrics_page_names_every_field_of_a_batch_line() -> None:
    from streamscale.runtime.spark.driver.graph_batch import LINE_FIELDS

    page = (DOCS / "metrics.md").read_text()
    part = page[page.index("## The fields of a batch line") :]
    table = part[: part.index("\n\n", part.index("| field |"))]
    named = set(re.findall(r"^\| `([a-z0-9_]+)`(?:, `([a-z0-9_]+)`)?", table, re.M))
    names = {n for pair in named for n in pair if n}
    assert names == set(LINE_FIELDS)
