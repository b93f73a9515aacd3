"""Adapters lsa/mba + dsm/rsm/sam through the registry (paper 004)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from streamscale.errors import InfeasibleError, ModelError, StreamscaleError
from streamscale.model import Cluster, Node, VmType, load_cluster, load_models, load_topology
from streamscale.planning import PlanningContext, compose, entries

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PAPER = resources.files("streamscale") / "data" / "paper_models.yaml"


def ctx(dag: str = "linear", rate: float = 100, cluster: Cluster | None = None, **params: object):
    return PlanningContext(
        topology=load_topology(EXAMPLES / f"{dag}.yaml"),
        cluster=cluster or load_cluster(EXAMPLES / "cluster.yaml"),
        models=load_models(PAPER),
        rate=rate,
        params=params,
    )


def test_registered() -> None:
    names = {(e.family, e.name) for e in entries()}
    assert {("allocator", "lsa"), ("allocator", "mba")} <= names
    assert {("placer", "dsm"), ("placer", "rsm"), ("placer", "sam")} <= names


@pytest.mark.parametrize("placer", ["dsm", "rsm", "sam"])
def test_compose_mba(placer: str) -> None:
    c = ctx()
    plan, figs, _ = compose(c, steps=[("allocator", "mba"), ("placer", placer)])
    alloc = figs["allocator:mba"]
    assert alloc["slots"] == 7 and alloc["threads"]["blob"] == 170
    assert plan.allocation.cores == alloc["threads"]
    units = {f"{t}#{k}" for t, n in alloc["threads"].items() for k in range(n)}
    assert set(plan.placement.nodes) == units
    f = figs[f"placer:{placer}"]
    # ρ = 7 bought as §7.1 reads it: a D3 (4 slots), then the smallest VM covering the
    # other 3, a D3: 8 slots at 2 x $0.392 = $0.784 an hour
    assert f["slots_available"] == 8 and f["extra_slots"] == 0
    assert f["price_per_hour"] == pytest.approx(0.784)
    assert 0 < f["predicted_rate"] <= f["predicted_rate_weighted"] + 1e-9
    assert set(f["vm_cpu_percent"]) == {v["name"] for v in f["vms"]}
    json.dumps(figs)  # figures are JSON-able


def test_sam_on_mba_meets_the_planned_rate_with_weighted_routing() -> None:
    _, figs, _ = compose(ctx(rate=200), steps=[("allocator", "mba"), ("placer", "sam")])
    f = figs["placer:sam"]
    assert f["extra_slots"] == 0
    assert f["predicted_rate_weighted"] == pytest.approx(200, rel=1e-6)
    assert f["predicted_rate"] < 200  # shuffle grouping starves the partial bundles


@pytest.mark.parametrize("placer", ["dsm", "rsm", "sam"])
def test_acquisition_readings(placer: str) -> None:
    # MBA at 100 t/s on Linear asks ρ = 7: §7.1 buys D3 + D3 (8 slots), §8.2 D3 + D2 + D1.
    steps = [("allocator", "mba"), ("placer", placer)]
    _, cover, _ = compose(ctx(), steps=steps)
    _, exact, _ = compose(ctx(acquisition="exact"), steps=steps)
    c, e = cover[f"placer:{placer}"], exact[f"placer:{placer}"]
    # MBA's ρ counts the slots its bundles fill, so every mapper places them in ρ slots
    # (no extra slot): cover 4 + 4 = 8 slots at 2 x 0.392 = $0.784 an hour; exact
    # 4 + 2 + 1 = 7 slots at 0.392 + 0.196 + 0.098 = $0.686
    assert c["extra_slots"] == e["extra_slots"] == 0
    assert [(v["type"], v["slots"]) for v in c["vms"]] == [("D3", 4), ("D3", 4)]
    assert [(v["type"], v["slots"]) for v in e["vms"]] == [("D3", 4), ("D2", 2), ("D1", 1)]
    assert c["price_per_hour"] == pytest.approx(0.784)
    assert e["price_per_hour"] == pytest.approx(0.686)
    with pytest.raises(StreamscaleError, match="acquisition: must be one of cover, exact"):
        compose(ctx(acquisition="half"), steps=steps)


def test_rsm_slot_choice_param() -> None:
    # LSA + RSM, Diamond at 50 t/s: Table's 17 threads lie 8/3/3/3 on the best-fit
    # slots (the default) and 14/3 on the first-fit ones (the Diamond ablation's rows).
    steps = [("allocator", "lsa"), ("placer", "rsm")]

    def table_per_slot(**params: object) -> list[int]:
        plan, _, _ = compose(ctx("diamond", rate=50, **params), steps=steps)
        per: dict[str, int] = {}
        for unit, slot in plan.placement.nodes.items():
            if unit.split("#")[0] == "table":
                per[slot] = per.get(slot, 0) + 1
        return sorted(per.values(), reverse=True)

    assert table_per_slot() == table_per_slot(rsm_slot_choice="best-fit") == [8, 3, 3, 3]
    assert table_per_slot(rsm_slot_choice="first-fit") == [14, 3]
    with pytest.raises(StreamscaleError, match="rsm_slot_choice"):
        compose(ctx(rsm_slot_choice="first"), steps=steps)


def test_fixed_nodes_and_failures() -> None:
    small = Cluster.build([Node("vm1", cores=1)])
    with pytest.raises(InfeasibleError, match="insufficient resources"):
        compose(ctx(cluster=small), steps=[("allocator", "lsa"), ("placer", "rsm")])
    five = Cluster.build([Node(f"d3-{i}", cores=4) for i in range(5)])
    plan, figs, _ = compose(
        ctx(rate=50, cluster=five), steps=[("allocator", "mba"), ("placer", "sam")]
    )
    assert set(plan.placement.nodes.values()) <= {f"d3-{i}/{s}" for i in range(5) for s in range(4)}
    assert figs["placer:sam"]["vms_bought"] == 0


def test_user_errors() -> None:
    c = PlanningContext(
        topology=load_topology(EXAMPLES / "linear.yaml"),
        cluster=Cluster.build([], [VmType("D1", 1, 3.5, 0.1)]),
        rate=10,
    )
    with pytest.raises(ModelError, match="models"):
        compose(c, steps=[("allocator", "mba")])
    with pytest.raises(ModelError, match="allocator"):
        compose(ctx(), steps=[("placer", "sam")])


def test_plan_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    from streamscale.cli.app import main

    code = main(
        [
            "--json",
            "plan",
            str(EXAMPLES / "linear.yaml"),
            "--cluster",
            str(EXAMPLES / "cluster.yaml"),
            "--models",
            str(PAPER),
            "--rate",
            "50",
            "--allocator",
            "lsa",
            "--placer",
            "rsm",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [(st["family"], st["name"]) for st in data["steps"]] == [
        ("allocator", "lsa"),
        ("placer", "rsm"),
    ]
    # LSA at 50 t/s from the one-thread figures (rate t/s, CPU %, memory % of a slot):
    # parse (310, 85, 22.98): one thread at 50/310 -> 13.71 % CPU, 3.706 % memory;
    # pi (105, 90, 2): one at 50/105 -> 42.857 %, 0.952 %; blob (2, 6.74, 23.92):
    # ⌊50/2⌋ = 25 threads -> 168.5 %, 598 %; write (60000, 30, 10): one -> 0.025 %;
    # table (3, 1, 1.2): 16 threads and one at 2/3 -> 16.667 %, 20 %. ρ = max(⌈2.418⌉,
    # ⌈6.227⌉) = 7 slots, bought as a D3 and a D3 covering the other 3 ($0.784 an hour).
    alloc = data["steps"][0]["figures"]
    assert alloc["threads"] == {"parse": 1, "pi": 1, "blob": 25, "write": 1, "table": 17}
    assert alloc["total_cpu_percent"] == pytest.approx(241.758, abs=1e-3)
    assert alloc["total_memory_percent"] == pytest.approx(622.667, abs=1e-3)
    assert alloc["slots"] == 7
    rsm = data["steps"][1]["figures"]
    assert [v["type"] for v in rsm["vms"]] == ["D3", "D3"] and rsm["slots_available"] == 8
    assert rsm["price_per_hour"] == pytest.approx(0.784)
    assert "slot_map" in rsm
