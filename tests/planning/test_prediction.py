"""Predicted stable rate and resource use of a mapping (paper 004, §8.5)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.model import Edge, ModelPoint, Operator, PerformanceModel, Topology
from streamscale.planning.prediction import predict

Y = PerformanceModel.build(
    "y",
    [
        ModelPoint(1, 10, 40, 10),
        ModelPoint(2, 18, 70, 20),
        ModelPoint(3, 24, 90, 30),
        ModelPoint(4, 22, 95, 40),
    ],
)
Z = PerformanceModel.build("z", [ModelPoint(1, 10, 80, 10)])


def chain(*tasks: str) -> Topology:
    ops = [Operator("src", "source"), *(Operator(f"t{i}", task=t) for i, t in enumerate(tasks))]
    ops.append(Operator("out", "sink"))
    names = [o.name for o in ops]
    return Topology.build("c", ops, [Edge(a, b) for a, b in itertools.pairwise(names)])


def test_shuffle_vs_weighted_hand_checked() -> None:
    topo = chain("y")
    a = {"t0#0": "v/0", "t0#1": "v/0", "t0#2": "v/0", "t0#3": "v/1"}
    p = predict(topo, {"y": Y}, a)
    # equal shares: each thread may take min(24/3, 10/1) = 8 t/s → 4 × 8 = 32
    assert p.rate == pytest.approx(32) and p.limit == "task t0"
    # at 32 t/s: v/0 gets 24 (its peak, 90 % CPU), v/1 gets 8 of its 10 → 40 % × 0.8
    assert p.slot_cpu == pytest.approx({"v/0": 90.0, "v/1": 32.0})
    assert p.vm_cpu["v"] == pytest.approx(122.0)
    w = predict(topo, {"y": Y}, a, routing="weighted")
    assert w.rate == pytest.approx(34)  # 24 + 10: every slot at its capacity
    assert w.slot_cpu == pytest.approx({"v/0": 90.0, "v/1": 40.0})


def test_rates_scale_with_selectivity_and_fan_in() -> None:
    topo = Topology.build(
        "fan",
        [
            Operator("s", "source"),
            Operator("a", task="y"),
            Operator("b", task="y"),
            Operator("j", task="y"),
            Operator("o", "sink"),
        ],
        [Edge("s", "a"), Edge("s", "b"), Edge("a", "j"), Edge("b", "j"), Edge("j", "o")],
    )
    a = {"a#0": "v/0", "b#0": "v/1", "j#0": "w/0"}
    p = predict(topo, {"y": Y}, a, resource_limits=False)
    assert p.rate == pytest.approx(5) and p.limit == "task j"  # j sees 2Ω, sustains 10


def test_resource_limit_caps_shared_slots() -> None:
    topo = chain("z", "z")
    a = {"t0#0": "v/0", "t1#0": "v/0"}
    assert predict(topo, {"z": Z}, a, resource_limits=False).rate == pytest.approx(10)
    p = predict(topo, {"z": Z}, a, vm_slots={"v": 1})
    assert p.rate == pytest.approx(100 / 16) and p.limit == "vm v cpu"


def test_unknown_task_is_an_error() -> None:
    with pytest.raises(ModelError, match="nope"):
        predict(chain("y"), {"y": Y}, {"nope#0": "v/0"})


@given(st.lists(st.integers(1, 6), min_size=1, max_size=5))
def test_weighted_never_below_shuffle(per_slot: list[int]) -> None:
    a = {}
    k = 0
    for s, q in enumerate(per_slot):
        for _ in range(q):
            a[f"t0#{k}"] = f"v/{s}"
            k += 1
    sh = predict(chain("y"), {"y": Y}, a, resource_limits=False)
    we = predict(chain("y"), {"y": Y}, a, resource_limits=False, routing="weighted")
    assert we.rate >= sh.rate - 1e-9
    # per-slot loads never exceed what the slot's threads sustain, so CPU ≤ model CPU
    for s, c in sh.slot_cpu.items():
        assert c <= Y.cpu(per_slot[int(s.split("/")[1])]) + 1e-6
