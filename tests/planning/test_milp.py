"""MILP key-group balancer (paper 003, §4.3.1): hand-checked optima and the two lemmas."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamscale.planning.balancing.keygroups import KeyGroupProblem
from streamscale.planning.balancing.metrics import load_distance, migrations
from streamscale.planning.balancing.milp import solve_milp

# Nodes A..D hold [4,4], [3,3], [2,2], [1,1]: mean 5, deviations +3, +1, -1, -3.
LOADS = [4, 4, 3, 3, 2, 2, 1, 1]
ASSIGN = [0, 0, 1, 1, 2, 2, 3, 3]


def _hand() -> KeyGroupProblem:
    return KeyGroupProblem.build([f"g{i}" for i in range(8)], ["A", "B", "C", "D"], LOADS, ASSIGN)


def _brute(problem: KeyGroupProblem, budget: int) -> float:
    best = np.inf
    for a in itertools.product(range(problem.n), repeat=problem.k):
        arr = np.array(a)
        if migrations(problem, arr) <= budget:
            best = min(best, load_distance(problem, arr))
    return best


@pytest.mark.parametrize("solver", ["highs", "cpsat"])
@pytest.mark.parametrize(("budget", "optimum"), [(0, 3.0), (1, 1.0), (2, 1.0), (4, 0.0)])
def test_hand_checked_optimum_under_migration_budget(
    budget: int, optimum: float, solver: str
) -> None:
    # budget 1: move a 4 from A to D -> loads 4,6,4,6 (delta 1); budget 4: {4,1},{4,1},{3,2},{3,2}.
    p = _hand()
    res = solve_milp(p, max_migrations=budget, solver=solver)
    assert migrations(p, res.assignment) <= budget
    assert load_distance(p, res.assignment) == pytest.approx(optimum)


def test_hand_optimum_matches_brute_force_for_budget_3() -> None:
    p = _hand()
    res = solve_milp(p, max_migrations=3)
    assert load_distance(p, res.assignment) == pytest.approx(_brute(p, 3))


def test_cost_budget_limits_moves_by_state_size() -> None:
    # Moving a 4 (cost 10) is the only single move reaching delta 1; a cost budget of 5 forbids it.
    cost = [10, 10, 1, 1, 1, 1, 1, 1]
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(8)], ["A", "B", "C", "D"], LOADS, ASSIGN, cost=cost
    )
    res = solve_milp(p, max_cost=5)
    moved = res.assignment != p.assignment
    assert p.cost[moved].sum() <= 5
    assert not moved[:2].any()


def test_heterogeneous_capacity_shifts_the_target() -> None:
    # Node B is twice as big: the balanced state puts twice the load there.
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(6)], ["A", "B"], [1] * 6, [0] * 6, capacity=[1, 2]
    )
    res = solve_milp(p)
    assert (res.assignment == 1).sum() == 4
    assert load_distance(p, res.assignment) == pytest.approx(0.0)


def test_resource_caps_are_respected() -> None:
    # Memory: group 0 is big; node B may hold at most 1 unit, so group 0 must stay on A.
    mem = np.array([[5.0], [1.0], [1.0], [1.0]])
    caps = np.array([[10.0], [1.0]])
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(4)],
        ["A", "B"],
        [3, 1, 1, 1],
        [0, 0, 0, 0],
        resources=mem,
        resource_caps=caps,
    )
    res = solve_milp(p)
    assert res.assignment[0] == 0
    used_b = mem[res.assignment == 1].sum()
    assert used_b <= 1.0


def _scale_in_problem(seed: int) -> KeyGroupProblem:
    rng = np.random.default_rng(seed)
    k, n = 18, 6
    load = rng.uniform(0.5, 2.0, k)
    asg = np.arange(k) % n
    return KeyGroupProblem.build(
        [f"g{i}" for i in range(k)], [f"n{j}" for j in range(n)], load, asg, removing=["n4", "n5"]
    )


@pytest.mark.parametrize("solver", ["highs", "cpsat"])
@pytest.mark.parametrize("seed", range(3))
def test_lemma1_nothing_moves_into_removed_nodes(seed: int, solver: str) -> None:
    p = _scale_in_problem(seed)
    for budget in (1, 3, None):
        res = solve_milp(
            p, solver=solver, max_migrations=budget, time_limit_s=5, deterministic_limit=0.05
        )
        into = (res.assignment != p.assignment) & p.removing[res.assignment]
        assert not into.any()


@pytest.mark.parametrize("solver", ["highs", "cpsat"])
@pytest.mark.parametrize("seed", range(3))
def test_lemma2_enough_budget_drains_removed_nodes(seed: int, solver: str) -> None:
    p = _scale_in_problem(seed)
    res = solve_milp(p, solver=solver, time_limit_s=5, deterministic_limit=0.05)
    assert not p.removing[res.assignment].any()


def test_scale_in_drains_gradually_within_budget() -> None:
    p = _scale_in_problem(0)
    rounds = 0
    while p.removing[p.assignment].any() and rounds < 10:
        res = solve_milp(p, max_migrations=2, time_limit_s=5, deterministic_limit=0.05)
        assert migrations(p, res.assignment) <= 2
        p = p.replace(assignment=res.assignment)
        rounds += 1
    assert not p.removing[p.assignment].any()
    assert rounds >= 3  # 6 groups on N_r, 2 per round


def test_collocated_sets_and_pins_are_honoured() -> None:
    p = _hand()
    res = solve_milp(p, max_migrations=4, collocate=[[0, 6]], pinned=[(6, 3)])
    assert res.assignment[0] == res.assignment[6] == 3


def test_windowed_model_reduces_imbalance_on_a_large_instance() -> None:
    rng = np.random.default_rng(1)
    n, k = 20, 200
    load = rng.uniform(0.8, 1.2, k)
    load[:20] *= 1.8  # nodes 0.. get heavier groups
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(k)], [f"n{j}" for j in range(n)], load, np.arange(k) % n
    )
    res = solve_milp(p, max_migrations=10, exact_up_to=0, time_limit_s=1.0)
    assert migrations(p, res.assignment) <= 10
    assert load_distance(p, res.assignment) < load_distance(p)
    assert res.method == "milp"


def test_greedy_fallback_when_the_solver_returns_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamscale.planning.balancing import milp as milp_module
    from streamscale.planning.balancing.milp_window import Step

    monkeypatch.setattr(
        milp_module, "solve_window_highs", lambda *a, **k: Step(None, "TIME_LIMIT", 2.0)
    )
    p = _hand()
    res = solve_milp(p, max_migrations=3, collocate=[[0, 6]], pinned=[(6, 3)])
    assert res.method == "greedy-fallback"
    assert "greedy fallback" in res.notes[0]
    assert res.assignment[0] == res.assignment[6] == 3
    assert migrations(p, res.assignment) <= 3


def _small_scale_in(seed: int) -> tuple[KeyGroupProblem, int]:
    rng = np.random.default_rng(seed)
    k, n = 6, 4
    load = rng.integers(1, 6, k).astype(float)
    asg = rng.integers(0, n, k)
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(k)], [f"n{j}" for j in range(n)], load, asg, removing=["n3"]
    )
    return p, int(rng.integers(1, 4))


def _brute_scale_in(p: KeyGroupProblem, budget: int) -> float:
    """Least δ over every allocation within the budget that moves nothing into N_r."""
    best = np.inf
    for a in itertools.product(range(p.n), repeat=p.k):
        arr = np.array(a)
        moved = arr != p.assignment
        if moved.sum() <= budget and not (moved & p.removing[arr]).any():
            best = min(best, load_distance(p, arr))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_scale_in_round_reaches_the_brute_force_optimum(seed: int) -> None:
    p, budget = _small_scale_in(seed)
    res = solve_milp(p, max_migrations=budget)
    assert migrations(p, res.assignment) <= budget
    assert load_distance(p, res.assignment) == pytest.approx(_brute_scale_in(p, budget))


def test_finish_drain_trades_balance_for_a_drained_node() -> None:
    # Seed 0: budget 2, the best round keeps δ at 5/3; forcing both groups off
    # n3 (finish_drain) ends at 19/3, hence off by default.
    p, budget = _small_scale_in(0)
    assert budget == 2
    assert _brute_scale_in(p, budget) == pytest.approx(5 / 3)
    forced = solve_milp(p, max_migrations=budget, finish_drain=True)
    assert not p.removing[forced.assignment].any()
    assert load_distance(p, forced.assignment) == pytest.approx(19 / 3)
    assert load_distance(p, solve_milp(p, max_migrations=budget).assignment) == pytest.approx(5 / 3)
