"""Reading and writing model files (YAML or JSON; the format is chosen by extension).

Every loader raises :class:`~streamscale.errors.ModelError` naming the file and
the offending item; unknown fields are errors, so a typo never passes silently.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from streamscale.errors import ModelError
from streamscale.model.cluster import Cluster, Node, VmType
from streamscale.model.performance import PerformanceModel
from streamscale.model.plan import Allocation, Placement, Plan, Routing
from streamscale.model.snapshot import NodeStats, OperatorStats, ShardStats, Snapshot, Traffic
from streamscale.model.topology import Edge, Operator, Topology

__all__ = [
    "TOP_LEVEL_KEYS",
    "FileKind",
    "check_keys",
    "detect_kind",
    "dump",
    "load",
    "load_cluster",
    "load_models",
    "load_plan",
    "load_snapshot",
    "load_topology",
    "read_document",
    "save",
]

FileKind = Literal["topology", "cluster", "models", "snapshot", "plan"]
T = TypeVar("T")


def read_document(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a mapping."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ModelError("is a directory, not a file", item=str(p)) from None
    except OSError as exc:
        raise ModelError(exc.strerror or "cannot read", item=str(p)) from None
    except UnicodeDecodeError as exc:
        raise ModelError(f"not UTF-8 text (byte {exc.start})", item=str(p)) from None
    try:
        doc = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {first}", item=str(p)
        ) from None
    if not isinstance(doc, dict):
        what = "empty" if doc is None else f"a {type(doc).__name__}"
        raise ModelError(f"expected a mapping at the top level, found {what}", item=str(p))
    return doc


#: The top-level keys each kind of file may hold (anything else is a typo and an error).
TOP_LEVEL_KEYS: dict[str, frozenset[str]] = {
    "topology": frozenset({"kind", "name", "operators", "edges", "description"}),
    "cluster": frozenset({"kind", "name", "nodes", "vm_types", "description"}),
    "models": frozenset({"kind", "models", "task", "points", "approximate", "source"}),
    "snapshot": frozenset(
        {"kind", "time", "operators", "shards", "edges", "traffic", "nodes"}
        | {"batch_overhead_s", "cycle_target_s"}
    ),
    "plan": frozenset({"kind", "allocation", "placement", "routing"}),
}
_ARTICLE = {
    "topology": "a topology",
    "cluster": "a cluster",
    "models": "a models",
    "snapshot": "a snapshot",
    "plan": "a plan",
}


def check_keys(doc: Mapping[str, Any], kind: FileKind, where: str) -> None:
    """Reject top-level keys a ``kind`` file cannot hold, naming the first and the known ones."""
    for key in doc:
        if key not in TOP_LEVEL_KEYS[kind]:
            known = ", ".join(sorted(TOP_LEVEL_KEYS[kind]))
            raise ModelError(
                f"unknown top-level key {key!r} in {_ARTICLE[kind]} file (known: {known})",
                item=where,
            )


def detect_kind(doc: Mapping[str, Any]) -> FileKind:
    """Which kind of file ``doc`` is: an explicit ``kind`` field, else by its keys."""
    kind = doc.get("kind")
    if kind is not None:
        if kind not in ("topology", "cluster", "models", "snapshot", "plan"):
            raise ModelError(f"unknown kind {kind!r}", item="kind")
        return kind  # type: ignore[no-any-return]
    if "operators" in doc and "edges" in doc:
        return "topology"
    if "nodes" in doc or "vm_types" in doc:
        return "cluster" if not isinstance(doc.get("nodes"), Mapping) else "snapshot"
    if "models" in doc or "points" in doc:
        return "models"
    if {"allocation", "placement", "routing"} & doc.keys():
        return "plan"
    if {"shards", "operators", "traffic"} & doc.keys():
        return "snapshot"
    raise ModelError("cannot tell what kind of file this is (add a 'kind' field)", item="file")


def _make(cls: type[T], raw: Any, item: str, **rename: str) -> T:
    if not isinstance(raw, Mapping):
        raise ModelError("expected a mapping", item=item)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for k, v in raw.items():
        name = rename.get(k, k)
        if name not in fields:
            raise ModelError(f"unknown field {k!r}", item=item)
        kwargs[name] = v
    try:
        obj = cls(**kwargs)
    except TypeError as exc:
        raise ModelError(str(exc).split(".__init__() ")[-1], item=item) from None
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        v = getattr(obj, f.name)
        want = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        if not isinstance(want, str):
            continue
        if v is None:
            if "None" not in want:
                raise ModelError(f"field {f.name!r} needs a value, got null", item=item)
            continue
        if want.startswith(("float", "int")) and (
            isinstance(v, bool) or not isinstance(v, int | float)
        ):
            raise ModelError(f"field {f.name!r} must be a number, got {v!r}", item=item)
        if want.startswith(("float", "int")) and not math.isfinite(v):
            raise ModelError(f"field {f.name!r} must be finite, got {v!r}", item=item)
        if want.startswith("str") and not isinstance(v, str):
            raise ModelError(f"field {f.name!r} must be a string, got {v!r}", item=item)
        if want.startswith("bool") and not isinstance(v, bool):
            raise ModelError(f"field {f.name!r} must be true or false, got {v!r}", item=item)
        if want.startswith(("Mapping", "dict")) and not isinstance(v, Mapping):
            raise ModelError(f"field {f.name!r} must be a mapping, got {v!r}", item=item)
        if want.startswith("int") and isinstance(v, float):
            if not v.is_integer():
                raise ModelError(f"field {f.name!r} must be an integer, got {v!r}", item=item)
            object.__setattr__(obj, f.name, int(v))
    return obj


def _list(doc: Mapping[str, Any], key: str, where: str) -> list[Any]:
    v = doc.get(key, [])
    if v is None:
        return []
    if not isinstance(v, list):
        raise ModelError(f"{key!r} must be a list", item=where)
    return v


def topology_from_dict(doc: Mapping[str, Any], *, where: str = "topology") -> Topology:
    """A validated :class:`Topology` from a mapping (the file format; ``from``/``to`` for edges).

    Examples
    --------
    >>> t = topology_from_dict({"name": "wc",
    ...                         "operators": [{"name": "src", "kind": "source", "rate": 100.0},
    ...                                       {"name": "out", "kind": "sink"}],
    ...                         "edges": [{"from": "src", "to": "out"}]})
    >>> t.names, dump(t)["edges"]
    (('src', 'out'), [{'from': 'src', 'to': 'out', 'grouping': 'shuffle', 'selectivity': 1.0}])
    >>> topology_from_dict({"operators": [{"name": "src", "kind": "source", "rte": 1}]})
    Traceback (most recent call last):
    ...
    streamscale.errors.ModelError: topology: operator src: unknown field 'rte'
    """
    ops = [
        _make(Operator, o, f"{where}: operator {o.get('name', i) if isinstance(o, Mapping) else i}")
        for i, o in enumerate(_list(doc, "operators", where))
    ]
    edges = []
    for i, e in enumerate(_list(doc, "edges", where)):
        label = f"{e.get('from', '?')}->{e.get('to', '?')}" if isinstance(e, Mapping) else str(i)
        edges.append(_make(Edge, e, f"{where}: edge {label}", **{"from": "src", "to": "dst"}))
    try:
        return Topology.build(str(doc.get("name") or where), ops, edges)
    except ModelError as exc:
        raise ModelError(str(exc), item=where) from None


def cluster_from_dict(doc: Mapping[str, Any], *, where: str = "cluster") -> Cluster:
    nodes = [_make(Node, n, f"{where}: node {i}") for i, n in enumerate(_list(doc, "nodes", where))]
    vms = [
        _make(VmType, v, f"{where}: vm_type {i}")
        for i, v in enumerate(_list(doc, "vm_types", where))
    ]
    try:
        return Cluster.build(nodes, vms)
    except ModelError as exc:
        raise ModelError(str(exc), item=where) from None


def models_from_dict(
    doc: Mapping[str, Any], *, where: str = "models"
) -> dict[str, PerformanceModel]:
    raw = _list(doc, "models", where) if "models" in doc else [doc]
    out: dict[str, PerformanceModel] = {}
    for m in raw:
        if not isinstance(m, Mapping):
            raise ModelError("each model must be a mapping", item=where)
        try:
            model = PerformanceModel.from_dict(m)
        except ModelError as exc:
            raise ModelError(str(exc), item=where) from None
        out[model.task] = model
    return out


def _number(v: Any, item: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ModelError(f"must be a number, got {v!r}", item=item)
    return float(v)


def _mapping(doc: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    v = doc.get(key) or {}
    if not isinstance(v, Mapping):
        raise ModelError(f"{key!r} must be a mapping", item=where)
    return v


def snapshot_from_dict(doc: Mapping[str, Any], *, where: str = "snapshot") -> Snapshot:
    ops, nodes, edges = (_mapping(doc, k, where) for k in ("operators", "nodes", "edges"))
    try:
        return Snapshot.build(
            time=_number(doc.get("time", 0.0), f"{where}: time"),
            operators={
                k: _make(OperatorStats, v, f"{where}: operator {k}") for k, v in ops.items()
            },
            shards=[
                _make(ShardStats, s, f"{where}: shard {i}")
                for i, s in enumerate(_list(doc, "shards", where))
            ],
            edges={str(k): _number(v, f"{where}: edge {k}") for k, v in edges.items()},
            traffic=[
                _make(Traffic, t, f"{where}: traffic {i}")
                for i, t in enumerate(_list(doc, "traffic", where))
            ],
            nodes={k: _make(NodeStats, v, f"{where}: node {k}") for k, v in nodes.items()},
            batch_overhead_s=_number(
                doc.get("batch_overhead_s", 0.0), f"{where}: batch_overhead_s"
            ),
            cycle_target_s=_number(doc.get("cycle_target_s", 0.0), f"{where}: cycle_target_s"),
        )
    except ModelError as exc:
        raise ModelError(str(exc), item=where) from None


def plan_from_dict(doc: Mapping[str, Any], *, where: str = "plan") -> Plan:
    alloc = _mapping(doc, "allocation", where)
    cores = _mapping(alloc, "cores", f"{where}: allocation")
    tables = _mapping(_mapping(doc, "routing", where), "tables", f"{where}: routing")
    place = _mapping(_mapping(doc, "placement", where), "nodes", f"{where}: placement")
    for name, k in cores.items():
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ModelError(
                f"cores must be a non-negative integer, got {k!r}", item=f"{where}: instance {name}"
            )
    for name, t in tables.items():
        if not isinstance(t, list | tuple):
            raise ModelError("routing table must be a list", item=f"{where}: routing {name}")
    slots = alloc.get("slots")
    if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 0):
        raise ModelError(f"slots must be a non-negative integer, got {slots!r}", item=where)
    return Plan(
        Allocation({str(k): int(v) for k, v in cores.items()}, slots),
        Placement({str(k): str(v) for k, v in place.items()}),
        Routing({str(k): tuple(str(x) for x in v) for k, v in tables.items()}),
    )


_FROM = {
    "topology": topology_from_dict,
    "cluster": cluster_from_dict,
    "models": models_from_dict,
    "snapshot": snapshot_from_dict,
    "plan": plan_from_dict,
}


def load(path: str | Path, kind: FileKind | None = None) -> Any:
    """Load any model file; ``kind`` is what the caller needs, else the kind is detected.

    A file whose own kind (its ``kind`` field, else its keys) differs from ``kind`` is refused
    with one line saying what it is and what was expected.
    """
    doc = read_document(path)
    try:
        found: FileKind | None = detect_kind(doc)
    except ModelError as exc:
        if kind is None:
            raise ModelError(str(exc), item=str(path)) from None
        found = None
    explicit = doc.get("kind") is not None
    if (
        kind is not None
        and found is not None
        and found != kind
        and (explicit or not doc.keys() <= TOP_LEVEL_KEYS[kind])
    ):
        raise ModelError(
            f"is {_ARTICLE[found]} file; this needs {_ARTICLE[kind]} file", item=str(path)
        )
    k = kind or found
    assert k is not None
    check_keys(doc, k, str(path))
    return _FROM[k](doc, where=str(path))


def load_topology(path: str | Path) -> Topology:
    return load(path, "topology")  # type: ignore[no-any-return]


def load_cluster(path: str | Path) -> Cluster:
    return load(path, "cluster")  # type: ignore[no-any-return]


def load_models(path: str | Path) -> dict[str, PerformanceModel]:
    return load(path, "models")  # type: ignore[no-any-return]


def load_snapshot(path: str | Path) -> Snapshot:
    return load(path, "snapshot")  # type: ignore[no-any-return]


def load_plan(path: str | Path) -> Plan:
    return load(path, "plan")  # type: ignore[no-any-return]


def _plain(obj: Any) -> Any:
    if isinstance(obj, PerformanceModel):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def dump(obj: Any) -> dict[str, Any]:
    """A plain mapping for any model object, in the shape the loaders read back."""
    if isinstance(obj, Topology):
        ops = [{k: v for k, v in _plain(o).items() if v not in (None, {})} for o in obj.operators]
        edges = []
        for e in obj.edges:
            d = {"from": e.src, "to": e.dst, "grouping": e.grouping, "selectivity": e.selectivity}
            if e.tuple_bytes is not None:
                d["tuple_bytes"] = e.tuple_bytes
            edges.append(d)
        return {"kind": "topology", "name": obj.name, "operators": ops, "edges": edges}
    if isinstance(obj, Cluster):
        return {"kind": "cluster", **_plain(obj)}
    if isinstance(obj, Mapping) and all(isinstance(v, PerformanceModel) for v in obj.values()):
        return {"kind": "models", "models": [m.to_dict() for m in obj.values()]}
    if isinstance(obj, Snapshot | Plan):
        return {"kind": "snapshot" if isinstance(obj, Snapshot) else "plan", **_plain(obj)}
    raise TypeError(f"cannot dump {type(obj).__name__}")


def save(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as YAML or JSON (by extension)."""
    p = Path(path)
    doc = dump(obj)
    text = (
        json.dumps(doc, indent=2) if p.suffix == ".json" else yaml.safe_dump(doc, sort_keys=False)
    )
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"cannot write: {exc.strerror or exc}", item=str(p)) from None
