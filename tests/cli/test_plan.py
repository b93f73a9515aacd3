from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamscale.cli.app import main
from streamscale.model import load_plan

EXAMPLES = Path(__file__).parents[2] / "examples"
TOPO = str(EXAMPLES / "microbench.yaml")
CLUSTER = str(EXAMPLES / "cluster.yaml")
SNAP = str(EXAMPLES / "microbench-snapshot.yaml")
CURRENT = str(EXAMPLES / "microbench-plan.yaml")


def _run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["--json", "plan", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_default_pipeline_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "new.yaml"
    data = _run_json(
        capsys,
        TOPO,
        "--cluster", CLUSTER,
        "--snapshot", SNAP,
        "--current", CURRENT,
        "--param", "latency_target_ms=2",
        "--save", str(out),
    )  # fmt: skip
    names = [(s["family"], s["name"]) for s in data["steps"]]
    assert names == [("allocator", "queueing"), ("placer", "elasticutor"), ("balancer", "shard")]
    alloc = data["steps"][0]["figures"]
    assert alloc["status"] == "met" and alloc["expected_latency_ms"] <= 2
    bal = data["steps"][2]["figures"]
    assert bal["delta_after"] <= 1.2 < bal["delta_before"]
    assert data["diff"]["migration_bytes"] == 0  # new cores stay on the executors' nodes
    plan = load_plan(out)
    assert plan.allocation.total == alloc["cores_total"] == data["diff"]["units"]


def test_human_output_and_rc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", TOPO, "--cluster", CLUSTER, "--snapshot", SNAP, "--current", CURRENT]) == 0
    text = capsys.readouterr().out
    assert "allocator queueing" in text and "cores_per_node" in text and "delta_after" in text
    data = _run_json(
        capsys,
        TOPO,
        "--cluster", CLUSTER,
        "--snapshot", SNAP,
        "--current", CURRENT,
        "--allocator", "queueing",
        "--balancer", "rc",
    )  # fmt: skip
    rc = data["steps"][1]["figures"]
    assert rc["shard_moves"] > 0 and list(rc["cores"]) == ["calc"]


def test_naive_ec_seeded(capsys: pytest.CaptureFixture[str]) -> None:
    args = [TOPO, "--cluster", CLUSTER, "--snapshot", SNAP, "--current", CURRENT]
    args += ["--placer", "naive-ec", "--seed", "5"]
    first = _run_json(capsys, "--allocator", "queueing", *args)
    second = _run_json(capsys, "--allocator", "queueing", *args)
    assert first["plan"] == second["plan"]


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "plan", "--list"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {(r["family"], r["name"]) for r in rows}
    assert {("allocator", "queueing"), ("placer", "elasticutor"), ("placer", "naive-ec")} <= got
    assert {("balancer", "shard"), ("balancer", "rc")} <= got


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([TOPO], "--cluster"),
        ([], "TOPOLOGY"),
        ([TOPO, "--cluster", CLUSTER, "--param", "theta"], "key=value"),
        ([TOPO, "--cluster", CLUSTER, "--param", "theta=x"], "theta: must be a number"),
        ([TOPO, "--cluster", CLUSTER, "--placer", "nope"], "nope"),
    ],
)
def test_errors_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0
