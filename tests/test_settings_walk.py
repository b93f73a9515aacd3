"""Every declared setting is declared once: its :class:`~streamscale.settings.Schema`.

The test walks every schema of the package (module-level schemas, the policies'
declarations, the planners' registrations and the run schema) and reads the source
tree (``ast``) for the ways a value gets parsed or defaulted a second time:

* ``float(params.get("NAME"))`` / ``int(p["NAME"])`` — a re-parse (coercion) of a
  setting's value outside the schema module;
* ``params.get("NAME", default)`` — a second default for the setting;
* a parameter or a class field called ``NAME`` with a literal default
  (``theta: float = 1.2``, ``trigger_s: float = 1.0``) — a second default, whether
  it repeats the declared one or disagrees with it;
* a literal passed as ``NAME=…`` at a call site, or after the string ``"NAME"`` in a
  call (``get("partitions", int, 2)``) — a second default (or a second opinion).

A pure function takes such a value as a required keyword argument, or takes its default
from the declared setting (``theta: float = THETA.default``), which the walk accepts.

Each finding names the file, the line and the setting. ``experiments/`` and
``scenarios/`` are not walked for literals: a reproduction or a scenario states its own
configuration, and its values are choices made there. The few names that mean another
quantity where they appear, or values that are a choice rather than a default, are
listed in :data:`CHOICES`, each with why; an entry that no longer matches anything fails
too, so the list cannot rot.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
import sys
from pathlib import Path

import streamscale
from streamscale.settings import Schema

SRC = Path(streamscale.__file__).parent

#: ``(file relative to src/streamscale, setting)``: a literal that is a choice or another
#: quantity of the same name, not a second default of the setting.
CHOICES: dict[tuple[str, str], str] = {
    # the same name, another quantity
    ("runtime/spark/routing/hashing.py", "seed"): "a hash function's seed (another quantity)",
    ("runtime/spark/sources/sources.py", "seed"): "the generator source's seed option",
    ("runtime/spark/sources/sources.py", "alpha"): "the generator's Zipf skew, not the "
    "placers' balance share α",
    ("sim/workloads.py", "seed"): "a simulated workload's seed",
    ("sim/workloads.py", "alpha"): "a simulated workload's Zipf skew",
    ("nexmark/generator.py", "seed"): "the NEXMark generator's seed",
    ("nexmark/source.py", "seed"): "the NEXMark source's seed option",
    ("planning/allocation/ds2.py", "target_utilization"): "the Flink autoscaler's own "
    "job.autoscaler.utilization.target, which the DS2 baseline emulates",
    ("planning/allocation/ds2.py", "catch_up_s"): "the Flink autoscaler's own "
    "job.autoscaler.catch-up.duration (5 min), which the DS2 baseline emulates",
    ("planning/balancing/milp.py", "window"): "the MILP's neighbourhood size in nodes",
    ("planning/placement/optimal.py", "workers"): "CP-SAT's worker threads, not Storm workers",
    ("profiling/profiler.py", "utilization"): "a trial's measured busy share",
    ("profiling/profiler.py", "window"): "trials averaged per rate",
    ("profiling/spark_trial.py", "max_utilization"): "a trial's stability bound on the "
    "task's busy share (paper 004, §5.1), not the planner's sizing cap",
    ("profiling/spark_trial.py", "partitions"): "a trial's generator runs one source task",
    ("runtime/spark/cluster/cluster.py", "directory"): "the local cluster's working directory",
    ("runtime/spark/driver/collector.py", "interval_s"): "the trigger interval the collector "
    "counts the next batch over, not the controller's decision interval",
    ("runtime/spark/driver/graph_control.py", "interval_s"): "the trigger interval, passed "
    "to the collectors (as in collector.py)",
    ("runtime/spark/driver/watch.py", "admission"): "whether the run's own source takes an "
    "admission file (a flag), not the watch's admission factor",
    ("scenarios/native.py", "partitions"): "the Spark-native baseline's state partitions "
    "(default: the operator's instances), not the reader's source tasks",
    # choices
    (
        "runtime/spark/driver/graph_batch.py",
        "policy",
    ): "the name of the policy a batch ran under, a "
    "record field the driver fills in (no setting's default)",
    ("nexmark/streamscale_engine.py", "trigger_s"): "the NEXMark benchmark's batches run back "
    "to back (0), as its Spark-engine run does",
    ("nexmark/streamscale_engine.py", "policy"): "the NEXMark benchmark's engine comparison "
    "runs a fixed plan unless a policy is asked for",
    # unused literals the driver's one constructor overrides with the settings' values
    # (``make_watch`` passes SETTINGS' max_utilization, theta and catch_up_form)
    ("runtime/spark/driver/watch.py", "max_utilization"): "SourceWatch's field; make_watch "
    "passes the setting",
    ("runtime/spark/driver/watch.py", "theta"): "SourceWatch's field (1.0, never used); "
    "make_watch passes the setting (1.2)",
    ("runtime/spark/driver/watch.py", "catch_up_form"): "SourceWatch's field; make_watch "
    "passes the setting",
}

#: Not walked for literals: a reproduction's or a scenario's configuration is its choice.
_CHOSEN_HERE = ("experiments/", "scenarios/")

_COERCE = frozenset({"float", "int", "bool", "str"})

#: Callees whose keywords are Python's own (``zip(…, strict=True)``), or the declaration.
_NOT_A_SETTING = frozenset(dir(builtins)) | {"Setting", "dataclass", "field"}


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

    for name, module in list(sys.modules.items()):
        if name.startswith("streamscale.") and ".nexmark" not in name:
            for v in vars(module).values():
                add(v)
    for s in specs():
        add(s.settings)
    for e in entries():
        add(e.params)
    return list(found.values())


def _declared(schemas: list[Schema]) -> dict[str, set[object]]:
    """Each setting name with its declared defaults (several when planners differ)."""
    out: dict[str, set[object]] = {}
    for sch in schemas:
        for s in sch.settings:
            out.setdefault(s.name, set()).add(s.default)
    return out


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


_NONE = object()


def _value(node: ast.AST | None) -> object:
    """The literal's value (``-1.0`` included); ``_NONE`` when not a literal or ``None``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return _NONE if inner is _NONE or isinstance(inner, str | bool) else -inner  # type: ignore[operator]
    if isinstance(node, ast.Constant) and node.value is not None:
        return node.value
    return _NONE


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _literals(node: ast.AST) -> list[tuple[int, str, object, str]]:
    """``(line, name, value, where)`` for each literal given a name at ``node``."""
    out: list[tuple[int, str, object, str]] = []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        pos = a.posonlyargs + a.args
        pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True))
        pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
        out += [(x.lineno, x.arg, _value(d), "parameter") for x, d in pairs]
    elif isinstance(node, ast.ClassDef):
        out += [
            (st.lineno, st.target.id, _value(st.value), "field")
            for st in node.body
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
        ]
    elif isinstance(node, ast.Call) and _callee(node) not in _NOT_A_SETTING:
        out += [(k.value.lineno, k.arg, _value(k.value), "call") for k in node.keywords if k.arg]
        # an option read with a converter and a default: ``get("NAME", int, 2)``
        for name, conv, default in zip(node.args, node.args[1:], node.args[2:], strict=False):
            named = isinstance(name, ast.Constant) and isinstance(name.value, str)
            if named and not isinstance(conv, ast.Constant) and default is node.args[-1]:
                out.append((name.lineno, name.value, _value(default), "lookup"))  # type: ignore[attr-defined]
    return [t for t in out if t[2] is not _NONE]


def _same(value: object, defaults: set[object]) -> bool:
    return any(
        d is not None and value == d and isinstance(value, bool) == isinstance(d, bool)
        for d in defaults
    )


def _findings(
    declared: dict[str, set[object]], root: Path = SRC
) -> list[tuple[str, int, str, str]]:
    out: list[tuple[str, int, str, str]] = []
    names = set(declared)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "settings.py":
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
                continue  # reported once
            if rel.startswith(_CHOSEN_HERE):
                continue
            for line, name, value, where in _literals(node):
                if name not in names:
                    continue
                declared_as = ", ".join(sorted(repr(d) for d in declared[name]))
                how = "repeats" if _same(value, declared[name]) else "disagrees with"
                out.append(
                    (rel, line, name, f"{where} {value!r} {how} the setting ({declared_as})")
                )
    return out


def test_every_setting_is_declared_once() -> None:
    declared = _declared(_schemas())
    assert {"latency_target_ms", "trigger_s", "policy", "theta"} <= set(declared)  # seen
    found = _findings(declared)
    chosen = {(f, n) for f, _, n, _ in found if (f, n) in CHOICES}
    bad = [f"{f}:{line}: {n}: {why}" for f, line, n, why in found if (f, n) not in CHOICES]
    assert not bad, "settings parsed or defaulted outside their schema:\n" + "\n".join(bad)
    assert chosen == set(CHOICES), f"stale CHOICES: {sorted(set(CHOICES) - chosen)}"


def test_the_walk_finds_a_re_parse(tmp_path: Path) -> None:
    """The checks fire on the patterns they look for (planted files)."""
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "probe.py").write_text(
        "def f(params, *, trigger_s: float = 1.0, seed: int | None = None):\n"
        "    a = float(params.get('latency_target_ms', 10.0))\n"
        "    return a, int(params['theta']), params['theta'], ctx.params.get(a, 2)\n",
        encoding="utf-8",
    )
    (tmp_path / "planning").mkdir()
    (tmp_path / "planning" / "probe.py").write_text(
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class C:\n"
        "    theta: float = 1.0\n"
        "    partitions: int = THETA.default\n"
        "def g(x, theta=-1.2):\n"
        "    zip(x, x, strict=True)\n"
        "    return g(x, theta=1.2), opt(x, 'partitions', int, 2), opt(x, 'partitions', int, None)\n",
        encoding="utf-8",
    )
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "probe.py").write_text(
        "def h(theta=1.2):\n    return g(theta=1.2)\n", encoding="utf-8"
    )
    declared = {"latency_target_ms": {10.0}, "theta": {1.2}, "trigger_s": {1.0},
                "seed": {None}, "partitions": {2}, "strict": {False}}  # fmt: skip
    found = _findings(declared, tmp_path)
    assert sorted((f, line, n, why) for f, line, n, why in found) == [
        ("cli/probe.py", 1, "trigger_s", "parameter 1.0 repeats the setting (1.0)"),
        ("cli/probe.py", 2, "latency_target_ms", "a second default in .get()"),
        ("cli/probe.py", 2, "latency_target_ms", "float() re-parses"),
        ("cli/probe.py", 3, "*", "a setting looked up by a variable name"),
        ("cli/probe.py", 3, "theta", "int() re-parses"),
        ("planning/probe.py", 4, "theta", "field 1.0 disagrees with the setting (1.2)"),
        ("planning/probe.py", 6, "theta", "parameter -1.2 disagrees with the setting (1.2)"),
        ("planning/probe.py", 8, "partitions", "lookup 2 repeats the setting (2)"),
        ("planning/probe.py", 8, "theta", "call 1.2 repeats the setting (1.2)"),
    ]
