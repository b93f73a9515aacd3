from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.planning.balancing.shard_balance import balance_shards, imbalance, task_loads
from tests.planning import _reference as ref


def test_hand_case_one_best_move() -> None:
    # task 0 holds 4+3+1 = 8, task 1 holds 2: δ = 8/5 = 1.6. Moving the 4 leaves
    # (4, 6), the 3 leaves (5, 5), the 1 leaves (7, 3): the 3 moves, δ = 1.
    r = balance_shards([4.0, 3.0, 1.0, 2.0], [0, 0, 0, 1], 2, theta=1.2)
    assert r.delta_before == pytest.approx(1.6)
    assert r.tasks == (0, 1, 0, 1) and r.moves == ((1, 0, 1),)
    assert r.delta_after == pytest.approx(1.0) and r.rounds == 1


def test_already_balanced_moves_nothing() -> None:
    r = balance_shards([1.0] * 8, [0, 1] * 4, 2)
    assert r.moves == () and r.delta_after == 1.0


def test_k_increase_fills_new_tasks() -> None:
    loads = np.ones(64)
    r = balance_shards(loads, [0, 1] * 32, 4, theta=1.2)
    per = task_loads(loads, r.tasks, 4)
    assert imbalance(per) <= 1.2
    # only shards that end on the new tasks move
    assert len(r.moves) == int(per[2] + per[3])


def test_k_decrease_moves_only_orphans_when_balanced() -> None:
    loads = np.ones(60)
    cur = [s % 4 for s in range(60)]
    r = balance_shards(loads, cur, 3)
    assert {s for s, _, _ in r.moves} == {s for s in range(60) if s % 4 == 3}
    assert all(old is None for _, old, _ in r.moves)
    assert r.delta_after == pytest.approx(1.0)


def test_ties_at_the_max_still_progress() -> None:
    # three tasks tie at the max; a single move cannot lower δ but rounds continue
    r = balance_shards([1.0] * 12, [0] * 4 + [1] * 4 + [2] * 4 + [], 4, theta=1.0)
    assert r.delta_after == pytest.approx(1.0)
    assert len(r.moves) == 3


def test_errors() -> None:
    with pytest.raises(ModelError):
        balance_shards([1.0], [0], 0)
    with pytest.raises(ModelError):
        balance_shards([1.0, 2.0], [0], 1)
    with pytest.raises(ModelError):
        balance_shards([-1.0], [0], 1)


@given(
    loads=st.lists(st.floats(0.0, 100.0), min_size=1, max_size=64),
    k_old=st.integers(1, 8),
    k_new=st.integers(1, 8),
    theta=st.sampled_from([1.0, 1.1, 1.2, 2.0]),
    seed=st.integers(0, 1000),
)
def test_conformance(loads: list[float], k_old: int, k_new: int, theta: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cur = [int(t) for t in rng.integers(0, k_old, len(loads))]
    r = balance_shards(loads, cur, k_new, theta=theta)
    assert len(r.tasks) == len(loads) and all(0 <= t < k_new for t in r.tasks)
    per = task_loads(loads, r.tasks, k_new)
    assert r.delta_after == pytest.approx(imbalance(per))
    assert r.delta_after <= r.delta_before + 1e-9  # never increases δ
    moved = {s for s, _, _ in r.moves}
    assert moved == {s for s in range(len(loads)) if cur[s] != r.tasks[s]}
    # orphans always move; a survivor moves only during rounds
    assert {s for s in range(len(loads)) if cur[s] >= k_new} <= moved
    # stops at θ, or because no single move from max to min lowers the pair's max
    if r.delta_after > theta + 1e-9:
        hi, lo = int(np.argmax(per)), int(np.argmin(per))
        on_hi = [loads[s] for s in range(len(loads)) if r.tasks[s] == hi]
        assert all(max(per[hi] - w, per[lo] + w) >= per[hi] - 1e-9 for w in on_hi)
    assert balance_shards(loads, cur, k_new, theta=theta) == r
    # relabeling tasks relabels the result
    perm = list(rng.permutation(max(k_old, k_new)))
    if k_old == k_new:
        r2 = balance_shards(loads, [perm[t] for t in cur], k_new, theta=theta)
        assert r2.delta_after == pytest.approx(r.delta_after) or r2.delta_after <= theta


def test_all_orphans_spread_heaviest_first() -> None:
    r = balance_shards([5.0, 4.0, 3.0, 3.0, 1.0], [None] * 5, 3, theta=10.0)
    assert task_loads([5.0, 4.0, 3.0, 3.0, 1.0], r.tasks, 3).tolist() == [5.0, 5.0, 6.0]
    assert r.rounds == 0 and len(r.moves) == 5


def _instance(rng: np.random.Generator, z: int, k_old: int) -> tuple[np.ndarray, list[int | None]]:
    kind = int(rng.integers(0, 5))
    if kind == 0:
        w = rng.random(z)
    elif kind == 1:
        w = rng.integers(0, 4, z).astype(float)  # ties and idle shards
    elif kind == 2:
        w = np.ones(z)  # the model's even spread: every move ties
    elif kind == 3:
        w = rng.zipf(1.5, z) / 7.0
    else:
        w = np.round(rng.random(z), 1) * 0.1  # ties up to rounding
    cur = [None if rng.random() < 0.1 else int(rng.integers(0, k_old)) for _ in range(z)]
    return w, cur


@pytest.mark.parametrize("seed", range(3))
def test_same_result_as_the_scanning_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(400):
        z, k, k_old = int(rng.integers(0, 60)), int(rng.integers(1, 9)), int(rng.integers(1, 10))
        w, cur = _instance(rng, z, k_old)
        theta = float(rng.choice([1.0, 1.05, 1.2, 2.0, np.inf]))
        rounds = None if rng.random() < 0.8 else int(rng.integers(0, 5))
        got = balance_shards(w, cur, k, theta=theta, max_rounds=rounds)
        assert got == ref.balance_shards(w, cur, k, theta=theta, max_rounds=rounds)
        assert all(type(t) is int for t in got.tasks)


def test_same_result_as_the_scanning_reference_at_scale() -> None:
    rng = np.random.default_rng(7)
    for _ in range(6):
        z, k, k_old = (
            int(rng.integers(500, 2000)),
            int(rng.integers(2, 200)),
            int(rng.integers(1, 200)),
        )
        w, cur = _instance(rng, z, k_old)
        assert balance_shards(w, cur, k, theta=1.05) == ref.balance_shards(w, cur, k, theta=1.05)
