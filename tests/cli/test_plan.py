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
    # By hand: the snapshot's shard loads summed per instance (64 shards each) are
    # a = 0.5575, 0.58721, 0.79777, 1.05756 cores (μ = 1000 t/s, λ0 = 3000 t/s). The
    # queueing allocator starts at ⌊a⌋ + 1 = 1, 1, 1, 2 cores: E[T_j] = 2.260, 2.423, 4.945
    # (M/M/1: 1 / (1000 - 797.77) s) and 1.388 ms (M/M/2, Erlang C 0.366), so E[T] =
    # Σ a_j E[T_j] / Σ a_j = 2.698 ms > 2. One more core cuts E[T] by 0.218, 0.260, 0.999
    # or 0.118 ms; calc[2]'s (M/M/2: Erlang C 0.227, 1.189 ms) is the most, and E[T] =
    # (0.5575 x 2.260 + 0.58721 x 2.423 + 0.79777 x 1.189 + 1.05756 x 1.388) / 3 = 1.6997 ms
    # meets the 2 ms target: 1 + 1 + 2 + 2 = 6 cores.
    alloc = data["steps"][0]["figures"]
    assert alloc["status"] == "met"
    assert alloc["cores"] == {"calc[0]": 1, "calc[1]": 1, "calc[2]": 2, "calc[3]": 2}
    assert alloc["cores_total"] == 6
    assert alloc["expected_latency_ms"] == pytest.approx(1.6997, abs=1e-3)
    # each executor that gains a core starts it empty: δ = max / mean = a / (a / 2) = 2;
    # balancing stops at δ <= θ = 1.2 (its end point is the rounds', not derived here)
    bal = data["steps"][2]["figures"]
    assert bal["delta_before"] == pytest.approx(2.0)
    assert bal["delta_after"] <= 1.2 and bal["above_theta"] == 0
    # the two new cores stay on their executors' nodes (n3, n4: 4 cores, 1 used each):
    # two core moves (calc[2] and calc[3] each gain a unit), no state crosses nodes
    assert data["diff"]["units"] == 6 and data["diff"]["core_moves"] == 2
    assert data["diff"]["migration_bytes"] == 0 and data["diff"]["remote_shard_moves"] == 0
    plan = load_plan(out)
    assert plan.allocation.total == 6


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
    # At the default 10 ms target the allocator's start, 1, 1, 1, 2 cores (E[T] = 2.698 ms,
    # derived in test_default_pipeline_json), already meets it: 5 cores. RC pools them as
    # one operator of 5 units, so every one of the 256 shards changes unit, and each that
    # changes node carries its 32 KB of state.
    alloc = data["steps"][0]["figures"]
    assert alloc["cores"] == {"calc[0]": 1, "calc[1]": 1, "calc[2]": 1, "calc[3]": 2}
    assert alloc["expected_latency_ms"] == pytest.approx(2.6984, abs=1e-3)
    rc = data["steps"][1]["figures"]
    assert rc["cores"] == {"calc": 5} and rc["shard_moves"] == 256
    assert rc["migration_bytes"] == rc["remote_moves"] * 32768


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
