"""Every declared setting is parsed in one place: its :class:`~streamscale.settings.Schema`.

The test walks every schema of the package (module-level schemas, the policies'
declarations, the planners' registrations and the run schema) and reads the source
tree (``ast``) for the ways a value gets parsed or defaulted a second time:

* ``float(params.get("NAME"))`` / ``int(p["NAME"])`` — a re-parse (coercion) of a
  setting's value outside the schema module;
* ``params.get("NAME", default)`` — a second default for the setting;
* for the run-level settings (they travel as keyword arguments), on the run path
  (``cli/``, ``runtime/spark/``, ``control/``): a parameter or dataclass field called
  ``NAME`` with a literal default (``trigger_s: float = 1.0``,
  ``policy: str = "static"``) — a second default for the setting.

Each finding names the file, the line and the setting. The few settings that are not
defaults but a scenario's own choice are listed in :data:`CHOICES`, each with why;
an entry that no longer matches anything fails too, so the list cannot rot.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import streamscale
from streamscale.settings import Schema

SRC = Path(streamscale.__file__).parent

#: ``(file relative to src/streamscale, setting)``: a literal that is a choice, not a default.
CHOICES: dict[tuple[str, str], str] = {
    ("runtime/spark/routing/hashing.py", "seed"): "a hash function's seed (another quantity)",
    (
        "runtime/spark/sources/sources.py",
        "seed",
    ): "the generator source's seed option (another quantity)",
    (
        "runtime/spark/executors/resources.py",
        "min_executors",
    ): "ExecutorResources' own keyword; both run paths pass the parsed value",
    (
        "runtime/spark/driver/graph_batch.py",
        "policy",
    ): "the name of the policy a batch ran under, a "
    "record field the driver fills in (no setting's default)",
}

#: Where run-level settings may carry literal defaults of their own: not on the run path.
_RUN_PATH = ("cli/", "runtime/spark/", "control/")

_COERCE = frozenset({"float", "int", "bool", "str"})


def _schemas() -> list[Schema]:
    """Every schema reachable from the package: module globals, policies, planners."""
    for mod in pkgutil.walk_packages([str(SRC)], prefix="streamscale."):
        if ".nexmark" in mod.name or mod.name.endswith("__main__"):
            continue
        importlib.import_module(mod.name)
    from streamscale.control.policies import specs
    from streamscale.planning.registry import entries

    found: dict[int, Schema] = {}

    def add(obj: object) -> None:
        if isinstance(obj, Schema):
            found[id(obj)] = obj
        elif isinstance(obj, dict):
            for v in obj.values():
                if isinstance(v, Schema):
                    found[id(v)] = v

    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith("streamscale.") and ".nexmark" not in name:
            for v in vars(module).values():
                add(v)
    for s in specs():
        add(s.settings)
    for e in entries():
        add(e.params)
    return list(found.values())


def _key(node: ast.AST) -> str | None:
    """The setting name a lookup reads: ``x.get("NAME" …)`` or ``x["NAME"]``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


def _params_get(node: ast.AST) -> bool:
    """``….params.get(…)`` or ``params.get(…)``: a lookup in a settings mapping."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr != "get" or not node.args:
        return False
    recv = node.func.value
    name = recv.attr if isinstance(recv, ast.Attribute) else getattr(recv, "id", "")
    return "param" in name


def _literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value is not None


def _findings(
    names: set[str], run_names: set[str], root: Path = SRC
) -> list[tuple[str, int, str, str]]:
    out: list[tuple[str, int, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "settings.py" or rel.startswith("nexmark/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            if call and node.func.id in _COERCE and node.args:  # type: ignore[attr-defined]
                for sub in ast.walk(node.args[0]):  # type: ignore[attr-defined]
                    k = _key(sub)
                    if k in names:
                        why = f"{node.func.id}() re-parses"  # type: ignore[attr-defined]
                        out.append((rel, node.lineno, k, why))  # type: ignore[attr-defined]
            if _params_get(node) and len(node.args) > 1:  # type: ignore[attr-defined]
                k = _key(node)
                if k in names:
                    out.append((rel, node.lineno, k, "a second default in .get()"))
                elif k is None:
                    out.append((rel, node.lineno, "*", "a setting looked up by a variable name"))
            if not rel.startswith(_RUN_PATH):
                continue
            field = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            if field and node.target.id in run_names and _literal(node.value):  # type: ignore[attr-defined]
                out.append((rel, node.lineno, node.target.id, "a literal default (field)"))  # type: ignore[attr-defined]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True))
                pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
                for arg, default in pairs:
                    if arg.arg in run_names and _literal(default):
                        out.append((rel, arg.lineno, arg.arg, "a literal default (parameter)"))
    return out


def test_every_setting_is_parsed_in_its_schema_only() -> None:
    schemas = _schemas()
    names = {s.name for sch in schemas for s in sch.settings}
    from streamscale.runtime.run_config import RUN_SETTINGS

    run_names = set(RUN_SETTINGS.names)
    assert {"latency_target_ms", "trigger_s", "policy", "theta"} <= names  # the walk sees them
    found = _findings(names, run_names)
    chosen = {(f, n) for f, _, n, _ in found if (f, n) in CHOICES}
    bad = [f"{f}:{line}: {n}: {why}" for f, line, n, why in found if (f, n) not in CHOICES]
    assert not bad, "settings parsed or defaulted outside their schema:\n" + "\n".join(bad)
    assert chosen == set(CHOICES), f"stale CHOICES: {sorted(set(CHOICES) - chosen)}"


def test_the_walk_finds_a_re_parse(tmp_path: Path) -> None:
    """The checks fire on the patterns they look for (a planted file on the run path)."""
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "probe.py").write_text(
        "def f(params, *, trigger_s: float = 1.0, seed: int | None = None):\n"
        "    a = float(params.get('latency_target_ms', 10.0))\n"
        "    return a, int(params['theta']), params['theta'], ctx.params.get(a, 2)\n",
        encoding="utf-8",
    )
    found = _findings({"latency_target_ms", "theta"}, {"trigger_s", "seed"}, tmp_path)
    assert sorted((f, line, n, why) for f, line, n, why in found) == [
        ("cli/probe.py", 1, "trigger_s", "a literal default (parameter)"),
        ("cli/probe.py", 2, "latency_target_ms", "a second default in .get()"),
        ("cli/probe.py", 2, "latency_target_ms", "float() re-parses"),
        ("cli/probe.py", 3, "*", "a setting looked up by a variable name"),
        ("cli/probe.py", 3, "theta", "int() re-parses"),
    ]
