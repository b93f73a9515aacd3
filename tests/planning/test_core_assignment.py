from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.errors import InfeasibleError, ModelError
from streamscale.planning.placement.core_assignment import (
    PHI0,
    AssignmentProblem,
    assign_cores,
    migration_cost,
    naive_ec,
)


def _all_assignments(cap: list[int], k: list[int]):  # type: ignore[no-untyped-def]
    n = len(cap)
    per_exec = [[c for c in itertools.product(range(kj + 1), repeat=n) if sum(c) == kj] for kj in k]
    for cols in itertools.product(*per_exec):
        x = np.array(cols, dtype=np.int64).T
        if np.all(x.sum(axis=1) <= cap):
            yield x


def _brute(p: AssignmentProblem) -> float:
    return min(
        migration_cost(p.current, x, p.state)
        for x in _all_assignments(list(p.capacity), list(p.target))
    )


def test_two_nodes_free_core_beats_donor() -> None:
    # A (100 B) holds both cores of n0 and must shrink to 1; B (60 B) on n1 grows to 2.
    # Taking n1's free core moves nothing; taking A's core on n0 would move 30 B.
    cur = np.array([[2, 0], [0, 1]])
    p = AssignmentProblem((2, 2), cur, (1, 2), (100.0, 60.0), (0, 1))
    r = assign_cores(p)
    assert r.cost == pytest.approx(0.0) == _brute(p)
    assert r.x.tolist() == [[1, 0], [0, 2]]


def test_two_nodes_full_cluster_known_cost() -> None:
    # Full cluster: A (n0: 2 cores) grows to 3 and must take B's core on n1;
    # A then keeps 2/3 of its state on n0: C = 100·(2/2 − 2/3) = 33.3 B, the optimum.
    cur = np.array([[2, 0], [0, 2]])
    p = AssignmentProblem((2, 2), cur, (3, 1), (100.0, 60.0), (0, 1))
    r = assign_cores(p)
    assert r.cost == pytest.approx(100 / 3) == pytest.approx(_brute(p))
    assert r.x.sum(axis=0).tolist() == [3, 1] and r.remote_cores == 1


def test_data_intensive_stays_home_and_phi_doubles() -> None:
    # Executor 0 is data intensive (4 MB/s per core) with home n0, which is full of
    # executor 1's cores; it displaces one of them, which moves to n1.
    cur = np.array([[1, 1], [0, 0]])
    p = AssignmentProblem((2, 2), cur, (2, 1), (10.0, 10.0), (0, 0), data_rate=(8e6, 0.0))
    r = assign_cores(p)
    assert r.x[:, 0].tolist() == [2, 0] and r.x[:, 1].tolist() == [0, 1]
    assert r.data_intensive == (0,) and r.attempts == 1
    # two data-intensive executors that cannot both fit at home: φ doubles until
    # one of them is no longer data intensive
    cur = np.array([[1, 1], [0, 0]])
    p = AssignmentProblem((2, 2), cur, (2, 2), (10.0, 10.0), (0, 0), data_rate=(8e6, 2e6))
    r = assign_cores(p)
    assert r.attempts > 1 and r.phi > PHI0
    assert r.x[:, 0].tolist() == [2, 0] and r.x.sum(axis=0).tolist() == [2, 2]


def test_single_core_donor_costs_its_whole_state() -> None:
    # n0 (2 cores) holds A's only core (200 MB) and one of B's two (6.6 MB; its other
    # core is on n1, which has a free core). Data-intensive C (home n0) needs a core
    # there: displacing A moves all 200 MB to n1, displacing B moves half of B, 3.3 MB.
    cur = np.array([[1, 1, 0], [0, 1, 0]])
    p = AssignmentProblem(
        (2, 2), cur, (1, 2, 1), (200e6, 6.6e6, 0.0), (0, 0, 0), data_rate=(0.0, 0.0, 8e6)
    )
    r = assign_cores(p)
    assert r.data_intensive == (2,)
    assert r.x.tolist() == [[1, 0, 1], [0, 2, 0]]
    assert r.cost == pytest.approx(3.3e6)


def test_data_intensive_executor_gives_up_inherited_remote_cores() -> None:
    # C (data intensive, home n0) holds a core on n0 and one on n1; constraint (c)
    # brings both home, where a free core waits
    cur = np.array([[1, 0], [1, 1]])
    p = AssignmentProblem((3, 2), cur, (2, 1), (10e6, 1e6), (0, 1), data_rate=(16e6, 0.0))
    r = assign_cores(p)
    assert r.data_intensive == (0,)
    assert r.x.tolist() == [[2, 0], [0, 1]]


def _restricted_best(p: AssignmentProblem) -> float:
    """Optimum over assignments where growing executors only gain cores, others only lose."""
    cur = np.asarray(p.current)
    short = [j for j, k in enumerate(p.target) if cur[:, j].sum() < k]
    best = np.inf
    for x in _all_assignments(list(p.capacity), list(p.target)):
        ok = all(
            (x[:, j] >= cur[:, j]).all() if j in short else (x[:, j] <= cur[:, j]).all()
            for j in range(cur.shape[1])
        )
        if ok:
            best = min(best, migration_cost(cur, x, p.state))
    return best


@st.composite
def one_short(draw: st.DrawFn) -> AssignmentProblem:
    n = draw(st.integers(2, 3))
    m = draw(st.integers(2, 3))
    cap = [draw(st.integers(2, 3)) for _ in range(n)]
    cur = np.zeros((n, m), dtype=np.int64)
    for j in range(m):  # every executor has its state somewhere
        free = [i for i in range(n) if cur[i].sum() < cap[i]]
        cur[draw(st.sampled_from(free)), j] += 1
    for _ in range(sum(cap) - m):  # a full cluster: every core is someone's
        free = [i for i in range(n) if cur[i].sum() < cap[i]]
        cur[draw(st.sampled_from(free)), draw(st.integers(0, m - 1))] += 1
    k = [int(c) for c in cur.sum(axis=0)]
    donor = draw(st.sampled_from([j for j in range(m) if k[j] > 1]))
    short = draw(st.sampled_from([j for j in range(m) if j != donor]))
    k[short] += 1
    k[donor] -= 1
    state = [draw(st.sampled_from([1e6, 3.3e6, 6.6e6, 2e8])) for _ in range(m)]
    home = [draw(st.integers(0, n - 1)) for _ in range(m)]
    return AssignmentProblem(tuple(cap), cur, tuple(k), tuple(state), tuple(home))


@settings(max_examples=80)
@given(one_short())
def test_one_core_short_matches_brute_force(p: AssignmentProblem) -> None:
    # a full cluster, one core to move from a shrinking executor to a growing one:
    # Algorithm 1's move (least C⁻ + C⁺) is the cheapest such assignment
    r = assign_cores(p)
    assert r.cost == pytest.approx(_restricted_best(p), abs=1e-3)


def test_errors() -> None:
    with pytest.raises(InfeasibleError):
        AssignmentProblem((1, 1), np.zeros((2, 2)), (2, 1), (1.0, 1.0), (0, 1))
    with pytest.raises(ModelError, match="instance 1"):
        AssignmentProblem((2, 2), np.zeros((2, 2)), (1, 0), (1.0, 1.0), (0, 1))
    with pytest.raises(ModelError, match="shape"):
        AssignmentProblem((2, 2), np.zeros((3, 2)), (1, 1), (1.0, 1.0), (0, 1))


@st.composite
def problems(draw: st.DrawFn) -> AssignmentProblem:
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 5))
    cap = [draw(st.integers(1, 4)) for _ in range(n)]
    cur = np.zeros((n, m), dtype=np.int64)
    for i in range(n):
        for _ in range(draw(st.integers(0, cap[i]))):
            cur[i, draw(st.integers(0, m - 1))] += 1
    budget = sum(cap)
    k = [1] * m
    if m > budget:
        k = [1] * budget
        cur = cur[:, :budget]
        m = budget
    extra = draw(st.integers(0, budget - m))
    for _ in range(extra):
        k[draw(st.integers(0, m - 1))] += 1
    state = [draw(st.floats(0.0, 1e6)) for _ in range(m)]
    home = [draw(st.integers(0, n - 1)) for _ in range(m)]
    rate = [draw(st.sampled_from([0.0, 1e5, 1e6, 4e6])) for _ in range(m)]
    return AssignmentProblem(tuple(cap), cur, tuple(k), tuple(state), tuple(home), tuple(rate))


def _feasible(p: AssignmentProblem, x: np.ndarray) -> None:
    assert x.shape == np.asarray(p.current).shape
    assert x.min() >= 0
    assert x.sum(axis=0).tolist() == list(p.target)
    assert np.all(x.sum(axis=1) <= np.asarray(p.capacity))


@given(problems())
def test_algorithm1_conformance(p: AssignmentProblem) -> None:
    r = assign_cores(p)
    _feasible(p, r.x)
    cur = np.asarray(p.current)
    for j in r.data_intensive:  # constraint (c): only local cores, inherited ones too
        for i in range(len(p.capacity)):
            if i != p.home[j]:
                assert r.x[i, j] == 0
    assert r.cost == pytest.approx(migration_cost(cur, r.x, p.state))
    again = assign_cores(p)
    assert np.array_equal(again.x, r.x) and again.phi == r.phi
    if np.asarray(p.capacity).sum() <= 6 and sum(p.target) <= 6:
        assert r.cost >= _brute(p) - 1e-6


@given(problems(), st.integers(0, 3))
def test_naive_conformance(p: AssignmentProblem, seed: int) -> None:
    r = naive_ec(p, seed=seed)
    _feasible(p, r.x)
    assert np.array_equal(naive_ec(p, seed=seed).x, r.x)
