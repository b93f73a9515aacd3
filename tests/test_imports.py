"""The import structure of ``src/streamscale``, read from the source (docs/architecture.md).

The graph is built with :mod:`ast`, nothing is imported: every ``import`` and
``from … import`` naming a streamscale module counts, at module level, inside a
function (a lazy import) or under ``TYPE_CHECKING`` alike. An edge goes to the
module named (``from streamscale.sim import protocols`` is an edge to
``streamscale.sim.protocols``; ``from streamscale.model import Plan`` to the package
``streamscale.model``). The implicit import of a module's parent packages is not an
edge.

Two rules: no circle between modules, and no import from a layer to a higher one
(two layers of one rank do not import each other either). The same two rules hold
between the rooms of the runtime (:data:`ROOMS`): no circle between rooms, no import
from a room to a higher one. The only exceptions are the edges of :data:`ALLOWED`
and :data:`ROOM_ALLOWED`, each documented in docs/architecture.md ("Exceptions"); an
exception whose edge is gone fails too, so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "streamscale"

#: The layers, lowest first; the layers of one tuple share a rank. A module belongs to
#: the layer with the longest matching prefix (``streamscale`` alone is the package's
#: ``__init__``, the public Python API).
LAYERS: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = (
    (("base", ("streamscale.errors", "streamscale.settings", "streamscale.formatting")),),
    (("model", ("streamscale.model",)),),
    (("planning", ("streamscale.planning",)),),
    (("control", ("streamscale.control",)),),
    (("runtime", ("streamscale.runtime",)), ("sim", ("streamscale.sim",))),
    (("profiling", ("streamscale.profiling",)), ("scenarios", ("streamscale.scenarios",))),
    (("nexmark", ("streamscale.nexmark",)),),
    (("experiments", ("streamscale.experiments",)),),
    (("api", ("streamscale",)),),
    (("cli", ("streamscale.cli",)),),
)

#: (importer, imported) -> reason; each is listed in docs/architecture.md ("Exceptions").
ALLOWED: dict[tuple[str, str], str] = {}

#: The rooms of the runtime (docs/architecture.md, "The runtime's rooms"), lowest first,
#: as :data:`LAYERS` are: a room imports modules of its own room and of lower rooms only,
#: and two rooms of one rank do not import each other. ``streamscale.runtime`` alone is
#: the run's settings (``runtime/run_config.py``); ``streamscale.runtime.spark`` alone,
#: the Python API (``runtime/spark/api.py``).
ROOMS: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = (
    (
        ("routing", ("streamscale.runtime.spark.routing",)),
        ("sources", ("streamscale.runtime.spark.sources",)),
        ("compat", ("streamscale.runtime.spark.compat",)),
        ("cluster", ("streamscale.runtime.spark.cluster",)),
    ),
    (("state", ("streamscale.runtime.spark.state",)),),
    (("run_config", ("streamscale.runtime",)),),
    (("executors", ("streamscale.runtime.spark.executors",)),),
    (("keyed", ("streamscale.runtime.spark.keyed",)),),
    (("driver", ("streamscale.runtime.spark.driver",)),),
    (("api", ("streamscale.runtime.spark",)),),
)

#: (importer, imported) -> reason, between rooms; each is listed in docs/architecture.md
#: ("Exceptions").
ROOM_ALLOWED: dict[tuple[str, str], str] = {}


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package ``root``."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that module ``name`` (at ``path``) imports, anywhere in it."""
    top = next(iter(modules)).split(".")[0]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # ``from pkg import mod`` names the module; ``from mod import obj`` the module.
            targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            if len(targets) < len(node.names):
                targets.append(base)
        else:
            continue
        for target in targets:
            if target.split(".")[0] != top:
                continue
            hit = _resolve(target, modules)
            if hit is not None and hit != name:
                out.add(hit)
    return out


def import_graph(root: Path) -> nx.DiGraph:
    """Modules of the package at ``root`` and the imports between them."""
    modules = module_names(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, t) for t in imports_of(name, path, modules))
    return graph


def layer_of(
    module: str, layers: Iterable[Iterable[tuple[str, tuple[str, ...]]]]
) -> tuple[int, str]:
    """(rank, layer name) of ``module``: the layer whose prefix matches it the longest.

    A prefix without a dot (the root package) matches only itself.
    """
    best: tuple[int, int, str] | None = None
    for rank, group in enumerate(layers):
        for layer, prefixes in group:
            for p in prefixes:
                hit = module == p or ("." in p and module.startswith(p + "."))
                if hit and (best is None or len(p) > best[0]):
                    best = (len(p), rank, layer)
    if best is None:
        raise LookupError(f"{module}: in no layer")
    return best[1], best[2]


def circles(graph: nx.DiGraph, allowed: Iterable[tuple[str, str]] = ()) -> list[list[str]]:
    """Every group of modules that import each other (strongly connected), sorted."""
    g = graph.copy()
    g.remove_edges_from(list(allowed))
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def upward(
    graph: nx.DiGraph,
    layers: Iterable[Iterable[tuple[str, tuple[str, ...]]]],
    allowed: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """Imports into a higher layer, or into another layer of the same rank."""
    layers = [list(group) for group in layers]
    skip = set(allowed)
    bad = []
    for a, b in sorted(graph.edges):
        (ra, la), (rb, lb) = layer_of(a, layers), layer_of(b, layers)
        if (a, b) not in skip and (rb > ra or (rb == ra and la != lb)):
            bad.append(f"{a} ({la}) imports {b} ({lb})")
    return bad


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph(SRC)


def test_every_module_has_a_layer(graph: nx.DiGraph) -> None:
    unplaced = []
    for m in graph.nodes:
        try:
            layer_of(m, LAYERS)
        except LookupError as exc:
            unplaced.append(str(exc))
    assert unplaced == []


def test_no_import_circles(graph: nx.DiGraph) -> None:
    assert circles(graph, ALLOWED) == []


def test_no_upward_imports(graph: nx.DiGraph) -> None:
    assert upward(graph, LAYERS, ALLOWED) == []


def test_every_exception_is_still_needed_and_documented(graph: nx.DiGraph) -> None:
    gone = [edge for edge in ALLOWED if not graph.has_edge(*edge)]
    assert gone == [], "remove these from ALLOWED and docs/architecture.md"
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    undocumented = [f"{a} -> {b}" for a, b in ALLOWED if f"`{a}` → `{b}`" not in doc]
    assert undocumented == []


def test_the_documented_layer_order_is_the_tested_one() -> None:
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    line = next(x for x in doc.splitlines() if x.startswith("Layer order (lowest first):"))
    ranks = [r.strip() for r in line.split(":", 1)[1].strip().rstrip(".").split("<")]
    want = [" | ".join(name for name, _ in group) for group in LAYERS]
    assert ranks == want


def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_graph_sees_lazy_relative_and_type_checking_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "from pkg.low.a import A\n",
            "low/a.py": "A = 1\ndef f():\n    from pkg.high import h\n",
            "low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            "high/__init__.py": "",
            "high/h.py": "import pkg.low.b as b\nfrom ..low import a\nimport os\n",
        },
    )
    graph = import_graph(root)
    assert sorted(graph.edges) == [
        ("pkg.high.h", "pkg.low.a"),
        ("pkg.high.h", "pkg.low.b"),
        ("pkg.low", "pkg.low.a"),
        ("pkg.low.a", "pkg.high.h"),
        ("pkg.low.b", "pkg.low.a"),
    ]
    layers = ((("low", ("pkg.low",)),), (("high", ("pkg.high",)),))
    assert circles(graph) == [["pkg.high.h", "pkg.low.a", "pkg.low.b"]]
    assert upward(graph, layers) == ["pkg.low.a (low) imports pkg.high.h (high)"]
    assert circles(graph, [("pkg.low.a", "pkg.high.h")]) == []
    assert upward(graph, layers, [("pkg.low.a", "pkg.high.h")]) == []
    siblings = ((("low", ("pkg.low",)), ("high", ("pkg.high",))),)
    assert len(upward(graph, siblings)) == 3  # one rank: no layer imports the other


def _runtime(graph: nx.DiGraph) -> nx.DiGraph:
    return graph.subgraph(n for n in graph if n.split(".")[:2] == ["streamscale", "runtime"])


def room_graph(
    graph: nx.DiGraph,
    rooms: Iterable[Iterable[tuple[str, tuple[str, ...]]]],
    allowed: Iterable[tuple[str, str]] = (),
) -> nx.DiGraph:
    """The rooms of ``graph``'s modules and the imports between them (``allowed`` left out)."""
    rooms = [list(group) for group in rooms]
    skip = set(allowed)
    out = nx.DiGraph()
    out.add_nodes_from(layer_of(m, rooms)[1] for m in graph)
    for a, b in graph.edges:
        ra, rb = layer_of(a, rooms)[1], layer_of(b, rooms)[1]
        if ra != rb and (a, b) not in skip:
            out.add_edge(ra, rb)
    return out


def test_every_runtime_module_is_in_a_room(graph: nx.DiGraph) -> None:
    rooms = {layer_of(m, ROOMS)[1] for m in _runtime(graph)}
    assert rooms == {name for group in ROOMS for name, _ in group}


def test_the_rooms_import_only_lower_rooms(graph: nx.DiGraph) -> None:
    assert upward(_runtime(graph), ROOMS, ROOM_ALLOWED) == []


def test_no_circle_between_rooms(graph: nx.DiGraph) -> None:
    assert list(nx.simple_cycles(room_graph(_runtime(graph), ROOMS, ROOM_ALLOWED))) == []


def test_every_room_exception_is_still_needed_and_documented(graph: nx.DiGraph) -> None:
    gone = [edge for edge in ROOM_ALLOWED if not graph.has_edge(*edge)]
    assert gone == [], "remove these from ROOM_ALLOWED and docs/architecture.md"
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    undocumented = [f"{a} -> {b}" for a, b in ROOM_ALLOWED if f"`{a}` → `{b}`" not in doc]
    assert undocumented == []


def test_the_documented_room_order_is_the_tested_one() -> None:
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    line = next(x for x in doc.splitlines() if x.startswith("Room order (lowest first):"))
    ranks = [r.strip() for r in line.split(":", 1)[1].strip().rstrip(".").split("<")]
    want = [" | ".join(name for name, _ in group) for group in ROOMS]
    assert ranks == want


def test_the_room_graph_sees_a_circle_between_two_rooms(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "runtime/__init__.py": "",
            "runtime/spark/__init__.py": "",
            "runtime/spark/routing/__init__.py": "",
            "runtime/spark/routing/r.py": "def f():\n    from pkg.runtime.spark.keyed import k\n",
            "runtime/spark/keyed/__init__.py": "",
            "runtime/spark/keyed/k.py": "from pkg.runtime.spark.routing import r\n",
        },
    )
    g = import_graph(root)
    g = g.subgraph(n for n in g if n.count(".") == 4)  # the rooms' modules
    rooms = (
        (("routing", ("pkg.runtime.spark.routing",)),),
        (("keyed", ("pkg.runtime.spark.keyed",)),),
    )
    assert sorted(room_graph(g, rooms).edges) == [("keyed", "routing"), ("routing", "keyed")]
    assert (
        room_graph(
            g, rooms, [("pkg.runtime.spark.routing.r", "pkg.runtime.spark.keyed.k")]
        ).number_of_edges()
        == 1
    )
    assert upward(g, rooms) == [
        "pkg.runtime.spark.routing.r (routing) imports pkg.runtime.spark.keyed.k (keyed)"
    ]
