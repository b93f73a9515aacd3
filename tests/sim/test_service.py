"""In-step service: exact sums, conservation and sojourns on random inputs."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.sim.service import _ceil_sum, phases, serve


@given(st.integers(-1, 500), st.integers(1, 8))
def test_ceil_sum_matches_brute_force(v: int, r: int) -> None:
    assert _ceil_sum(np.array([v]), r)[0] == sum(math.ceil(u / r) for u in range(1, v + 1))


def test_phases_of_the_papers_cost() -> None:
    assert phases(True, 0.5) == 1
    assert phases(False, 0.5) == 4
    assert phases(False, 1.0) == 1


pools = st.lists(
    st.tuples(st.floats(0, 50), st.integers(0, 60), st.sampled_from([1, 1, 2, 4])),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(pools, st.sampled_from([1, 4]), st.floats(100.0, 20000.0), st.integers(0, 2**31))
def test_serve_conserves_tuples_and_bounds_area(
    spec: list[tuple[float, int, int]], r: int, mu: float, seed: int
) -> None:
    q = np.array([p[0] for p in spec])
    a = np.array([p[1] for p in spec], dtype=float)
    k = np.array([p[2] for p in spec], dtype=float)
    dt = 0.01
    res = serve(np.random.default_rng(seed), q, a, k, np.full(q.size, mu), r, dt)
    carried = np.floor(q)
    assert (res.done >= 0).all()
    assert (res.done <= np.ceil(q) + a + 1e-9).all()
    # never more completions than the cores can serve, nor tuple-seconds above the most held
    assert (res.area >= 0).all()
    assert (res.area <= (np.ceil(q) + a) * dt + 1e-12).all()
    assert res.arrival_pool.size == int(a.sum())
    assert np.array_equal(np.bincount(res.arrival_pool, minlength=q.size), a.astype(int))
    # an arrival waits at least its own service time, at most everything ahead of it
    bound = (np.ceil(q) + a)[res.arrival_pool] / (k[res.arrival_pool] * mu) + 1 / mu
    assert (res.arrival_wait >= 1 / mu - 1e-12).all()
    assert (res.arrival_wait <= bound + 1e-9).all()
    assert (carried >= 0).all()
