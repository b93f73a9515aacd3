"""LSA and MBA (paper 004, §6): hand-checked tiny DAGs, the paper's Linear DAG, properties."""

from __future__ import annotations

import itertools
import math
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.model import (
    Edge,
    ModelPoint,
    Operator,
    PerformanceModel,
    Topology,
    load_models,
    load_topology,
)
from streamscale.planning.allocation.model_based import (
    allocate,
    allocate_lsa,
    allocate_mba,
    bundle_needs,
    slots_needed,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAPER = resources.files("streamscale") / "data" / "paper_models.yaml"


def chain(*tasks: str) -> Topology:
    ops = [Operator("src", "source")]
    ops += [Operator(f"t{i}", task=t) for i, t in enumerate(tasks)]
    ops.append(Operator("out", "sink"))
    names = [o.name for o in ops]
    return Topology.build("chain", ops, [Edge(a, b) for a, b in itertools.pairwise(names)])


def model(task: str, *pts: tuple[int, float, float, float]) -> PerformanceModel:
    return PerformanceModel.build(task, [ModelPoint(*p) for p in pts])


X = model("x", (1, 10, 20, 10))
Y = model("y", (1, 10, 40, 10), (2, 18, 70, 20), (3, 24, 90, 30), (4, 22, 95, 40))


def test_lsa_hand_checked() -> None:
    r = allocate_lsa(chain("x"), {"x": X}, 25)
    (t,) = r.tasks
    assert (t.threads, t.cpu, t.memory) == (3, 50.0, 25.0)  # 2 full threads + half a thread
    assert r.slots == 1
    exact = allocate_lsa(chain("x"), {"x": X}, 30).tasks[0]
    assert (exact.threads, exact.cpu) == (3, 60.0)  # no trailing thread when ω is a multiple


def test_mba_hand_checked() -> None:
    r = allocate_mba(chain("y"), {"y": Y}, 60)
    (t,) = r.tasks
    # ω̂ = 24 at τ̂ = 3: two bundles (200 %), rest 12 needs T(12) = 2 threads at C(2), M(2)
    assert (t.threads, t.cpu, t.memory) == (8, 270.0, 220.0)
    assert r.slots == 3
    one = allocate_mba(chain("y"), {"y": Y}, 5).tasks[0]
    assert (one.threads, one.cpu, one.memory) == (1, 20.0, 5.0)  # one thread, scaled by 5/10
    whole = allocate_mba(chain("y"), {"y": Y}, 48).tasks[0]
    assert (whole.threads, whole.cpu) == (6, 200.0)


def test_rates_propagate_through_the_dag() -> None:
    t = load_topology(EXAMPLES / "diamond.yaml")
    models = load_models(PAPER)
    r = allocate_lsa(t, models, 100)
    assert {x.task: x.rate for x in r.tasks}["write"] == 400


def test_paper_linear_dag_slots() -> None:
    """§8.4.1: LSA 7/13/25 (+3 by RSM = 28), LSA 242 % CPU and 623 % memory at 50 t/s;
    MBA 4/7/15 in the paper, 4/7/14 with the approximate models read off it."""
    t = load_topology(EXAMPLES / "linear.yaml")
    models = load_models(PAPER)
    lsa = [allocate_lsa(t, models, r) for r in (50, 100, 200)]
    mba = [allocate_mba(t, models, r) for r in (50, 100, 200)]
    assert [a.slots for a in lsa] == [7, 13, 25]
    assert [a.slots for a in mba] == [4, 7, 14]
    assert round(lsa[0].total_cpu) == 242 and round(lsa[0].total_memory) == 623
    blob = {x.task: x for x in mba[1].tasks}["blob"]
    assert (blob.threads, round(blob.cpu), round(blob.memory)) == (170, 315, 326)
    assert {x.task: x.threads for x in lsa[1].tasks}["blob"] == 50


def test_missing_model_names_the_operator() -> None:
    with pytest.raises(ModelError, match="t0"):
        allocate_mba(chain("nope"), {"x": X}, 10)
    with pytest.raises(ModelError):
        allocate("fifo", chain("x"), {"x": X}, 10)


def test_bundle_needs_matches_mba() -> None:
    a = allocate_mba(chain("y"), {"y": Y}, 60).tasks[0]
    assert bundle_needs(Y, 60, a.threads) == (2, a.cpu, a.memory)


# -- properties -----------------------------------------------------------------
@st.composite
def models_st(draw: st.DrawFn, task: str) -> PerformanceModel:
    n = draw(st.integers(1, 5))
    threads = sorted(draw(st.sets(st.integers(2, 30), min_size=n - 1, max_size=n - 1)))
    pts = []
    for q in [1, *threads]:
        pts.append(
            ModelPoint(
                q,
                draw(st.floats(1, 500)),
                draw(st.floats(1, 100)),
                draw(st.floats(0.5, 100)),
            )
        )
    return PerformanceModel.build(task, pts)


@given(
    st.lists(st.sampled_from("abc"), min_size=1, max_size=5),
    st.fixed_dictionaries({k: models_st(k) for k in "abc"}),
    st.floats(1, 2000),
)
def test_allocation_properties(tasks: list[str], models: dict, rate: float) -> None:
    topo = chain(*tasks)
    for alg in ("lsa", "mba"):
        r = allocate(alg, topo, models, rate)
        assert r.slots * 100 >= r.total_cpu - 1e-6 and r.slots * 100 >= r.total_memory - 1e-6
        assert r.slots == slots_needed(r.total_cpu, r.total_memory)
        for t in r.tasks:
            m = models[topo.operator(t.task).task]
            assert t.threads >= 1
            # the threads are enough for the rate under the allocator's own assumption
            if alg == "lsa":
                assert t.threads * m.rate(1) >= t.rate - 1e-6
            else:
                b = math.floor(t.rate / m.peak_rate + 1e-6)
                assert t.threads >= b * m.peak_threads
        assert allocate(alg, topo, models, rate) == r


@given(
    st.lists(st.sampled_from("abc"), min_size=1, max_size=4),
    st.fixed_dictionaries({k: models_st(k) for k in "abc"}),
    st.floats(1, 500),
)
def test_allocation_relabel_invariant(tasks: list[str], models: dict, rate: float) -> None:
    topo = chain(*tasks)
    renamed = Topology.build(
        "renamed",
        [
            Operator("x" + o.name[::-1], o.kind, task=o.task) if o.kind == "operator" else o
            for o in topo.operators
        ],
        [
            Edge(*("x" + n[::-1] if n.startswith("t") else n for n in (e.src, e.dst)))
            for e in topo.edges
        ],
    )
    for alg in ("lsa", "mba"):
        a, b = allocate(alg, topo, models, rate), allocate(alg, renamed, models, rate)
        assert [(t.threads, t.cpu, t.memory) for t in a.tasks] == [
            (t.threads, t.cpu, t.memory) for t in b.tasks
        ]
        assert a.slots == b.slots
