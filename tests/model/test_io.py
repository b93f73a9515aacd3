from __future__ import annotations

from pathlib import Path

import pytest

from streamscale.errors import ModelError
from streamscale.model import (
    Allocation,
    Cluster,
    ModelPoint,
    NodeStats,
    OperatorStats,
    PerformanceModel,
    Placement,
    Plan,
    Routing,
    ShardStats,
    Snapshot,
    load,
    load_cluster,
    load_topology,
    save,
)

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize("name", ["linear", "diamond", "star", "microbench"])
def test_examples_round_trip(name: str, tmp_path: Path) -> None:
    t = load_topology(EXAMPLES / f"{name}.yaml")
    for ext in ("yaml", "json"):
        save(t, tmp_path / f"t.{ext}")
        assert load(tmp_path / f"t.{ext}") == t


def test_cluster_round_trip(tmp_path: Path) -> None:
    c = load_cluster(EXAMPLES / "cluster.yaml")
    assert c.total_cores == 24 and c.node("n3").capacity == 400
    save(c, tmp_path / "c.json")
    assert load(tmp_path / "c.json") == c


def test_snapshot_plan_models_round_trip(tmp_path: Path) -> None:
    snap = Snapshot.build(
        time=3.5,
        operators={"calc": OperatorStats(100, 90, 1000)},
        shards=[ShardStats("calc", 0, 0.25, 10, 32768)],
        nodes={"n1": NodeStats(150, 20, True)},
        batch_overhead_s=0.4,
        cycle_target_s=2.0,
    )
    plan = Plan(
        Allocation({"calc[0]": 2}),
        Placement({"calc[0]#0": "n1", "calc[0]#1": "n2"}),
        Routing({"calc[0]": ("calc[0]#0", "calc[0]#1")}),
    )
    models = {
        "pi": PerformanceModel.build("pi", [ModelPoint(1, 105, 90, 5), ModelPoint(2, 110, 95, 6)])
    }
    for obj, name in ((snap, "s.yaml"), (plan, "p.json"), (models, "m.yaml")):
        save(obj, tmp_path / name)
        assert load(tmp_path / name) == obj
    assert snap.marked_for_removal == {"n1"}
    # the batch figures are optional (0: unknown), and never negative
    (tmp_path / "old.yaml").write_text("time: 1.0\noperators: {}\n")
    assert load(tmp_path / "old.yaml").batch_overhead_s == 0.0
    with pytest.raises(ModelError, match="batch figures must be >= 0"):
        Snapshot.build(batch_overhead_s=-0.1)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nodes: [{name: a, cores: 0}]", "node a: cores must be in \\[1, 4096\\]"),
        ("nodes: [{name: a, cores: two}]", "'cores' must be a number"),
        ("nodes: [{name: a, corez: 2}]", "unknown field 'corez'"),
        ("operators: [{name: s, kind: source}]\nedges: []", "no sink"),
        ("a: [1, 2", "not valid YAML"),
        ("- 1\n- 2", "expected a mapping"),
        ("hello: 1", "cannot tell what kind"),
    ],
)
def test_errors_name_the_item(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ModelError, match=needle) as info:
        load(p)
    assert str(p) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(ModelError, match=r"nope\.yaml"):
        load("nope.yaml")


def test_uniform_cluster() -> None:
    c = Cluster.uniform(3, cores=4)
    assert c.names == ("n1", "n2", "n3") and c.total_cores == 12


@pytest.mark.parametrize(
    ("text", "kind", "needle"),
    [
        ("nodes: [{name: a, cores: 2}]\nvm_type: x", None, "unknown top-level key 'vm_type'"),
        ("nodes: [{name: a, cores: 2}]", "topology", "is a cluster file; this needs a topology"),
        ("kind: snapshot\ntime: 1.0", "plan", "is a snapshot file; this needs a plan"),
        ("nodes: [{name: a, cores: null}]", None, "'cores' needs a value"),
        ("nodes: [{name: [a], cores: 2}]", None, "'name' must be a string"),
        ("nodes: [{name: a, cores: .nan}]", None, "'cores' must be finite"),
        ("", None, "found empty"),
    ],
)
def test_files_are_checked_for_kind_keys_and_types(
    tmp_path: Path, text: str, kind: str | None, needle: str
) -> None:
    p = tmp_path / "f.yaml"
    p.write_text(text)
    with pytest.raises(ModelError, match=needle):
        load(p, kind)  # type: ignore[arg-type]


def test_unreadable_and_unwritable_files_name_the_path(tmp_path: Path) -> None:
    p = tmp_path / "bytes.yaml"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelError, match=r"bytes\.yaml: not UTF-8 text"):
        load(p)
    with pytest.raises(ModelError, match="cannot write"):
        save(load(EXAMPLES / "cluster.yaml"), tmp_path / "missing" / "c.yaml")
