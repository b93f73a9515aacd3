"""Acquisition, DSM, RSM and SAM (paper 004, §7): Fig. 4 worked example, hand cases, properties."""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import InfeasibleError, ModelError
from streamscale.model import VmType
from streamscale.planning.placement.slots import (
    MappingResult,
    TaskDemand,
    Vm,
    acquire,
    map_adding_slots,
    map_dsm,
    map_rsm,
    map_sam,
)

CATALOG = (VmType("D1", 1, 3.5, 0.098), VmType("D2", 2, 7.0, 0.196), VmType("D3", 4, 14.0, 0.392))
FIG4_VMS = (Vm("v1", 2), Vm("v2", 2), Vm("v3", 2))


def test_acquire_largest_first_then_smallest_covering() -> None:
    assert [v.kind for v in acquire(9, CATALOG)] == ["D3", "D3", "D1"]
    assert [v.kind for v in acquire(7, CATALOG)] == ["D3", "D3"]  # rest 3 → smallest ≥ 3 is D3
    assert [v.kind for v in acquire(6, CATALOG)] == ["D3", "D2"]
    assert [v.name for v in acquire(5, CATALOG)] == ["D3-1", "D1-2"]
    assert sum(v.price_per_hour for v in acquire(8, CATALOG)) == pytest.approx(0.784)
    # §8.2's reading: the rest in D2/D1 so the slots sum to ρ exactly
    assert [v.kind for v in acquire(7, CATALOG, reading="exact")] == ["D3", "D2", "D1"]
    assert [v.kind for v in acquire(9, CATALOG, reading="exact")] == ["D3", "D3", "D1"]
    for rho in range(1, 30):
        assert sum(v.slots for v in acquire(rho, CATALOG, reading="exact")) == rho
        assert 0 <= sum(v.slots for v in acquire(rho, CATALOG)) - rho <= 1  # rest 3 buys a D3
    no_d1 = [t for t in CATALOG if t.slots != 1]
    assert [v.kind for v in acquire(5, no_d1, reading="exact")] == ["D3", "D2"]
    with pytest.raises(ModelError, match="acquisition"):
        acquire(3, CATALOG, reading="half")  # type: ignore[arg-type]
    with pytest.raises(ModelError):
        acquire(3, ())


def test_fig4_dsm_round_robin() -> None:
    """Fig. 4: threads 5/4/3/5 on 6 slots of three 2-slot VMs."""
    d = [TaskDemand("B", 5), TaskDemand("O", 4), TaskDemand("Y", 3), TaskDemand("G", 5)]
    per = map_dsm(d, FIG4_VMS).per_slot()
    assert per == {
        "v1/0": {"B": 1, "O": 1, "G": 1},
        "v1/1": {"B": 1, "O": 1, "G": 1},
        "v2/0": {"B": 1, "O": 1, "G": 1},
        "v2/1": {"B": 1, "Y": 1, "G": 1},
        "v3/0": {"B": 1, "Y": 1, "G": 1},
        "v3/1": {"O": 1, "Y": 1},
    }


@pytest.mark.parametrize("literal", [False, True])
def test_fig4_sam_bundles(literal: bool) -> None:
    """Fig. 4: bundles of 2/3/3/4 threads; B3..B4 take s31, O4, G5 and B5 share s32."""
    d = [
        TaskDemand("B", 5, bundle=2, cpu=2.3, mem=2.2, bundles=None if literal else 2),
        TaskDemand("O", 4, bundle=3, cpu=1.3, mem=1.2, bundles=None if literal else 1),
        TaskDemand("Y", 3, bundle=3, cpu=1.0, mem=1.0, bundles=None if literal else 1),
        TaskDemand("G", 5, bundle=4, cpu=1.3, mem=1.2, bundles=None if literal else 1),
    ]
    r = map_sam(d, FIG4_VMS)
    assert r.per_slot() == {
        "v1/0": {"B": 2},
        "v1/1": {"O": 3},
        "v2/0": {"Y": 3},
        "v2/1": {"G": 4},
        "v3/0": {"B": 2},
        "v3/1": {"O": 1, "G": 1, "B": 1},
    }
    assert r.assignment["B#4"] == "v3/1" and r.assignment["O#3"] == "v3/1"


def test_sam_fails_then_adding_slots_succeeds() -> None:
    d = [TaskDemand("A", 4, bundle=2, cpu=2.0, mem=2.0, bundles=2)]
    with pytest.raises(InfeasibleError, match="task A"):
        map_sam(d, acquire(1, CATALOG))
    r = map_adding_slots(map_sam, d, 1, CATALOG)
    assert r.extra_slots == 1 and len(r.slots) == 2


def test_rsm_hand_checked() -> None:
    """Per-slot memory binds: two 0.6-memory threads cannot share a slot; CPU is per VM."""
    d = [TaskDemand("A", 2, cpu1=0.2, mem1=0.6), TaskDemand("B", 2, cpu1=0.5, mem1=0.3)]
    r = map_rsm(d, (Vm("v1", 2),))
    # sweep 1: A#0 → v1/0, B#0 → v1/0 (0.6 + 0.3 ≤ 1); sweep 2: A#1 → v1/1, B#1 → v1/1
    assert r.per_slot() == {"v1/0": {"A": 1, "B": 1}, "v1/1": {"A": 1, "B": 1}}
    with pytest.raises(InfeasibleError, match="insufficient resources"):
        map_rsm([TaskDemand("A", 3, cpu1=0.2, mem1=0.6)], (Vm("v1", 2),))
    # network term: with room on both, the reference VM (distance 0) is preferred
    r2 = map_rsm([TaskDemand("A", 2, cpu1=0.1, mem1=0.1)], (Vm("v1", 1), Vm("v2", 1)))
    assert set(r2.assignment.values()) == {"v1/0"}


@pytest.mark.parametrize(
    ("choice", "b_slot"), [("first-fit", "v1/0"), ("best-fit", "v1/1"), ("worst-fit", "v1/0")]
)
def test_rsm_slot_choice_hand_checked(choice: str, b_slot: str) -> None:
    # A (memory 0.5) takes v1/0, leaving 0.5; C (0.6) does not fit there and takes
    # v1/1, leaving 0.4. B (0.3) fits both: first-fit → v1/0 (lowest-numbered),
    # best-fit → v1/1 (0.4 left, the fullest), worst-fit → v1/0 (0.5 left).
    d = [
        TaskDemand("A", 1, cpu1=0.1, mem1=0.5),
        TaskDemand("C", 1, cpu1=0.1, mem1=0.6),
        TaskDemand("B", 1, cpu1=0.1, mem1=0.3),
    ]
    r = map_rsm(d, (Vm("v1", 2),), slot_choice=choice)  # type: ignore[arg-type]
    assert r.assignment == {"A#0": "v1/0", "C#0": "v1/1", "B#0": b_slot}
    with pytest.raises(ModelError, match="unknown slot choice"):
        map_rsm(d, (Vm("v1", 2),), slot_choice="random")  # type: ignore[arg-type]


def test_rsm_default_best_fit_packs_a_vm_that_first_fit_cannot() -> None:
    """One 3-slot VM (CPU 3.0, memory 1.0 a slot), tasks swept A, B, C, two threads each.

    Memory a thread: A 0.5, B 0.7, C 0.2 (CPU 0.2 each, 1.2 in all, never binding).
    Best-fit (the default) — sweep 1: A#0 → slot 0 (all empty, lowest; left 0.5/1/1);
    B#0 (0.7) fits only slots 1 and 2 → slot 1 (0.5/0.3/1); C#0 (0.2) fits all three,
    the fullest is slot 1 (0.5/0.1/1). Sweep 2: A#1 (0.5) fits slots 0 and 2, the
    fullest is slot 0 (0/0.1/1); B#1 → slot 2 (0/0.1/0.3); C#1 fits slot 2 only.
    First-fit puts C#0 on slot 0 (0.3/0.3/1), so A#1 takes slot 2 (0.3/0.3/0.5) and
    B#1 (0.7) fits nowhere: the same VM is too small.
    """
    d = [
        TaskDemand("A", 2, cpu1=0.2, mem1=0.5),
        TaskDemand("B", 2, cpu1=0.2, mem1=0.7),
        TaskDemand("C", 2, cpu1=0.2, mem1=0.2),
    ]
    r = map_rsm(d, (Vm("v1", 3),))
    assert r.assignment == {
        "A#0": "v1/0",
        "B#0": "v1/1",
        "C#0": "v1/1",
        "A#1": "v1/0",
        "B#1": "v1/2",
        "C#1": "v1/2",
    }
    assert r == map_rsm(d, (Vm("v1", 3),), slot_choice="best-fit")
    with pytest.raises(InfeasibleError, match="task B"):
        map_rsm(d, (Vm("v1", 3),), slot_choice="first-fit")


# -- properties -----------------------------------------------------------------
@st.composite
def demands_st(draw: st.DrawFn) -> list[TaskDemand]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        threads = draw(st.integers(1, 30))
        bundle = draw(st.integers(1, 10))
        bundles = draw(st.integers(0, threads // bundle))
        out.append(
            TaskDemand(
                f"t{i}",
                threads,
                cpu1=draw(st.floats(0.005, 1.0)),
                mem1=draw(st.floats(0.005, 1.0)),
                bundle=bundle,
                cpu=bundles + draw(st.floats(0.0, 1.0)),
                mem=bundles + draw(st.floats(0.0, 1.0)),
                bundles=bundles,
            )
        )
    return out


def _check_capacity(r: MappingResult, d: list[TaskDemand]) -> None:
    by = {x.task: x for x in d}
    vms = {v.name: v for v in r.vms}
    if r.algorithm == "rsm":
        vm_cpu: Counter[str] = Counter()
        for s, tasks in r.per_slot().items():
            assert sum(by[t].mem1 * n for t, n in tasks.items()) <= 1 + 1e-6
            vm_cpu[s.split("/")[0]] += sum(by[t].cpu1 * n for t, n in tasks.items())
        assert all(c <= vms[v].slots + 1e-6 for v, c in vm_cpu.items())
    if r.algorithm == "sam":
        for tasks in r.per_slot().values():
            full = [t for t, n in tasks.items() if n == by[t].bundle and len(tasks) == 1]
            if full:
                continue  # an exclusive full bundle
            partial = [t for t in tasks if tasks[t] < by[t].threads or by[t].bundles == 0]
            c = sum(max(0.0, by[t].cpu - by[t].bundles) for t in partial)
            m = sum(max(0.0, by[t].mem - by[t].bundles) for t in partial)
            assert c <= 1 + 1e-6 and m <= 1 + 1e-6


def _rename(d: list[TaskDemand]) -> list[TaskDemand]:
    from dataclasses import replace

    return [replace(x, task="z" + x.task[::-1]) for x in d]


MAPPERS = {
    "dsm": map_dsm,
    "rsm": map_rsm,
    "rsm-best-fit": partial(map_rsm, slot_choice="best-fit"),
    "rsm-worst-fit": partial(map_rsm, slot_choice="worst-fit"),
    "sam": map_sam,
}


@given(demands_st(), st.integers(1, 12), st.sampled_from(sorted(MAPPERS)))
def test_mapping_properties(d: list[TaskDemand], slots: int, alg: str) -> None:
    mapper = MAPPERS[alg]
    try:
        r = map_adding_slots(mapper, d, slots, CATALOG, max_extra=40)
    except InfeasibleError:
        assert alg != "dsm"
        return
    units = {f"{x.task}#{k}" for x in d for k in range(x.threads)}
    assert set(r.assignment) == units  # every thread mapped exactly once
    assert set(r.assignment.values()) <= set(r.slots)
    assert sum(len(v) for v in r.per_slot().values()) >= 1
    _check_capacity(r, d)
    assert map_adding_slots(mapper, d, slots, CATALOG, max_extra=40) == r  # deterministic
    renamed = map_adding_slots(mapper, _rename(d), slots, CATALOG, max_extra=40)
    back = {
        u.split("#")[0][1:][::-1] + "#" + u.split("#")[1]: s for u, s in renamed.assignment.items()
    }
    assert back == dict(r.assignment)  # relabel-invariant
