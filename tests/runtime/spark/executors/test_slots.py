"""The slot map: which live executor stands for which planned node (pure, no Spark)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamscale.runtime.spark.executors.slots import (
    assign_slots,
    keepers_first,
    node_demand,
    release_order,
    steer_to_ready,
)

NODES = [f"executor-{i}" for i in range(6)]


def test_demand_counts_units_per_node_and_ignores_unknown_nodes() -> None:
    placement = {"a#0": "executor-1", "a#1": "executor-1", "b#0": "executor-4", "c#0": "local"}
    assert node_demand(placement, NODES[:5]) == {
        "executor-0": 0, "executor-1": 2, "executor-2": 0, "executor-3": 0, "executor-4": 1,
    }  # fmt: skip


def test_new_executors_take_the_most_loaded_open_nodes_and_old_pairs_stay() -> None:
    demand = {"executor-0": 1, "executor-1": 0, "executor-2": 3, "executor-3": 2}
    got = assign_slots({"executor-0": "7"}, ["7", "9", "12"], demand)
    # 7 keeps its node; 9 (older) takes the busiest open node, 12 the next
    assert got == {"executor-0": "7", "executor-2": "9", "executor-3": "12"}


def test_a_dead_executor_frees_its_node() -> None:
    demand = {"executor-0": 1, "executor-1": 1}
    got = assign_slots({"executor-0": "1", "executor-1": "2"}, ["2", "5"], demand)
    assert got == {"executor-1": "2", "executor-0": "5"}


def test_scale_in_releases_the_unused_nodes_executor_first_then_the_newest() -> None:
    slots = {"executor-0": "1", "executor-1": "2", "executor-2": "3"}
    demand = {"executor-0": 2, "executor-1": 0, "executor-2": 2}
    assert release_order(slots, ["1", "2", "3"], demand) == ["2", "3", "1"]


def test_scale_in_releases_a_late_registration_before_the_executors_the_run_started_with() -> None:
    # settle saw 2 and 3; 0 and 1 (launched first, registered late) came after it: with
    # no placement demand, scaling 4 -> 2 releases 1 and 0, not the warm 3 and 2
    alive = keepers_first(["0", "1", "2", "3"], {"2", "3"})
    assert alive == ["2", "3", "0", "1"]
    assert release_order({}, alive, {})[:2] == ["1", "0"]
    # no settle (a run that never waited): the order is the given one
    assert keepers_first(["0", "1", "2"], set()) == ["0", "1", "2"]


@given(
    prev=st.dictionaries(st.sampled_from(NODES), st.sampled_from("0123456789"), max_size=6),
    alive=st.lists(st.sampled_from("0123456789"), unique=True, max_size=6),
    counts=st.lists(st.integers(0, 4), min_size=6, max_size=6),
)
def test_every_live_executor_gets_one_node_and_surviving_pairs_are_kept(
    prev: dict[str, str], alive: list[str], counts: list[int]
) -> None:
    # a previous map is one-to-one
    seen: set[str] = set()
    prev = {n: e for n, e in prev.items() if not (e in seen or seen.add(e))}
    demand = dict(zip(NODES, counts, strict=True))
    got = assign_slots(prev, alive, demand)
    assert sorted(got.values()) == sorted(alive)
    assert set(got) <= set(NODES)
    for n, e in prev.items():
        if e in alive:
            assert got[n] == e
    # no open node with more units is left while a less loaded one got an executor
    fresh = {n for n in got if n not in prev or prev[n] not in alive}
    empty = [n for n in NODES if n not in got]
    if fresh and empty:
        assert min(demand[n] for n in fresh) >= max(demand[n] for n in empty)


def test_units_of_cold_executors_go_to_the_least_loaded_ready_one() -> None:
    # executor 4 just arrived: its two units go to 2 (empty), then to 1 and 2 in turn
    chosen = {"a": "4", "b": "1", "c": "4", "d": "1"}
    assert steer_to_ready(["a", "b", "c", "d"], chosen, ["1", "2"]) == {
        "b": "1", "d": "1", "a": "2", "c": "2",
    }  # fmt: skip
    # nothing chosen (placement not enforced): round robin, oldest first
    assert steer_to_ready(["x", "y", "z"], {}, ["7", "3"]) == {"x": "7", "y": "3", "z": "7"}
    # no ready executor: nothing pinned
    assert steer_to_ready(["x"], {"x": "4"}, []) == {}


@given(
    units=st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
    chosen=st.dictionaries(st.sampled_from("abcdefghij"), st.sampled_from("0123456")),
    ready=st.lists(st.sampled_from("0123456"), unique=True, max_size=7),
)
def test_steering_puts_every_unit_on_a_ready_executor(
    units: list[str], chosen: dict[str, str], ready: list[str]
) -> None:
    got = steer_to_ready(units, chosen, ready)
    if not ready:
        assert got == {}
        return
    assert set(got) == set(units) and set(got.values()) <= set(ready)
    for u in units:  # a unit already on a ready executor stays there
        if chosen.get(u) in ready:
            assert got[u] == chosen[u]
    # the moved units never make an executor busier than needed: each went to a least
    # loaded executor, so the loads of executors that received moved units differ by <= 1
    moved = [u for u in units if chosen.get(u) not in ready]
    load = {e: sum(1 for v in got.values() if v == e) for e in ready}
    took = {got[u] for u in moved}
    if took:
        assert max(load[e] for e in took) <= min(load.values()) + 1
