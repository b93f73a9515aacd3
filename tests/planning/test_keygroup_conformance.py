"""Conformance of every key-group balancer (paper 003): MILP, ALBIC, Flux, PoTC, COLA.

Every key group on exactly one node; the migration budget never exceeded;
nothing moved into N_r; collocated sets never split; deterministic for a
seed; unchanged when ids are relabelled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscale.planning.balancing.albic import albic
from streamscale.planning.balancing.cola import cola
from streamscale.planning.balancing.flux import flux
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import migrations
from streamscale.planning.balancing.milp import solve_milp
from streamscale.planning.balancing.potc import potc

Run = Callable[[KeyGroupProblem, int | None, int], BalanceResult]
_FAST = {"time_limit_s": 10.0, "deterministic_limit": 0.02}

BALANCERS: dict[str, tuple[Run, bool]] = {
    # name: (run, honours the migration budget)
    "milp": (lambda p, b, s: solve_milp(p, max_migrations=b, seed=s, **_FAST), True),
    "milp-cpsat": (
        lambda p, b, s: solve_milp(p, max_migrations=b, seed=s, solver="cpsat", **_FAST),
        True,
    ),
    "milp-colocated": (
        lambda p, b, s: solve_milp(p, max_migrations=b, seed=s, collocate=[[0, p.k - 1]], **_FAST),
        True,
    ),
    "albic": (lambda p, b, s: albic(p, max_migrations=b, seed=s, **_FAST), True),
    "flux": (lambda p, b, s: flux(p, max_migrations=b), True),
    "potc": (lambda p, b, s: potc(p, seed=s), True),
    "cola": (lambda p, b, s: cola(p, seed=s), False),
}


@st.composite
def problems(draw: Any) -> tuple[KeyGroupProblem, int | None]:
    n = draw(st.integers(2, 4))
    k = draw(st.integers(1, 8))
    load = draw(st.lists(st.floats(0.0, 3.0, allow_nan=False), min_size=k, max_size=k))
    asg = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k))
    removing = draw(st.lists(st.integers(0, n - 1), max_size=n - 1, unique=True))
    edges = draw(
        st.lists(
            st.tuples(st.integers(0, k - 1), st.integers(0, k - 1), st.floats(0.0, 50.0)),
            max_size=2 * k,
        )
    )
    budget = draw(st.one_of(st.none(), st.integers(0, 4)))
    p = KeyGroupProblem.build(
        [f"g{i}" for i in range(k)],
        [f"n{j}" for j in range(n)],
        load,
        asg,
        removing=[f"n{j}" for j in removing],
        traffic=edges,
    )
    return p, budget


def _relabel(p: KeyGroupProblem) -> KeyGroupProblem:
    return p.replace(
        groups=[f"other-{g}" for g in p.groups],
        nodes=[f"host-{n}" for n in p.nodes],
        removing=[f"host-{p.nodes[j]}" for j in np.flatnonzero(p.removing)],
    )


@pytest.mark.parametrize("name", sorted(BALANCERS))
@settings(max_examples=20, deadline=None)
@given(case=problems(), seed=st.integers(0, 3))
def test_balancer_conformance(
    name: str, case: tuple[KeyGroupProblem, int | None], seed: int
) -> None:
    p, budget = case
    run, honours_budget = BALANCERS[name]
    res = run(p, budget, seed)
    a = res.assignment
    assert a.shape == (p.k,)
    assert ((a >= 0) & (a < p.n)).all()  # every key group on exactly one node
    if honours_budget and budget is not None:
        assert migrations(p, a) <= budget
    moved_in = (a != p.assignment) & p.removing[a]
    assert not moved_in.any()  # nothing moves into N_r
    for s in res.collocated:  # collocated sets are never split
        assert len(set(a[list(s)].tolist())) == 1
    if name == "milp-colocated" and budget is None:
        assert a[0] == a[p.k - 1]
    again = run(p, budget, seed)
    assert np.array_equal(again.assignment, a)  # deterministic for a seed
    other = run(_relabel(p), budget, seed)
    assert np.array_equal(other.assignment, a)  # ids do not matter
