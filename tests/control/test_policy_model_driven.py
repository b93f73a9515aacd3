"""The ``model-driven`` live policy (paper 004): sizing, mapping and re-sizing by hand."""

from __future__ import annotations

import math

import pytest

from streamscale.control.policies import initial_plan, make_policy
from streamscale.errors import StreamscaleError
from streamscale.model import ModelPoint, PerformanceModel, Plan, instance_of
from tests.control._jobs import chain, snapshot


def _threads(plan: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for unit in plan.placement.nodes:
        out[instance_of(unit)] = out.get(instance_of(unit), 0) + 1
    return out


@pytest.mark.parametrize("mapper", ["dsm", "rsm", "sam"])
@pytest.mark.parametrize("allocator", ["lsa", "mba"])
def test_start_sizes_threads_from_cost_and_rate(allocator: str, mapper: str) -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2, rate=1500.0)
    params = {"allocator": allocator, "mapper": mapper}
    plan = initial_plan("model-driven", topo, cluster, params=params)
    # one thread serves 1000/s at 1 ms per tuple: ceil(1500 / 1000) = 2 threads per operator
    assert plan.allocation.cores == {"a": 2, "b": 2}
    assert _threads(plan) == {"a": 2, "b": 2}
    # ρ = ceil(Σ CPU) = ceil(1.5 + 1.5) = 3 slots: the two leading 2-core nodes
    assert set(plan.placement.nodes.values()) <= {"executor-0", "executor-1"}
    for e in range(2):
        for inst in (f"a[{e}]", f"b[{e}]"):
            assert set(plan.routing.tables[inst]) <= set(plan.placement.nodes)


def test_mba_bundles_threads_at_the_profiled_peak() -> None:
    topo, cluster = chain(instances=1, shards=4, nodes=4, cores=4, rate=4000.0)
    # two threads reach the peak 1800/s on one slot; one thread serves 1000/s
    model = PerformanceModel.build(
        "a", [ModelPoint(1, 1000.0, 50.0, 10.0), ModelPoint(2, 1800.0, 100.0, 20.0)]
    )
    models = {"a": model, "b": PerformanceModel.build("b", list(model.points))}
    mba = initial_plan("model-driven", topo, cluster, params={"allocator": "mba"}, models=models)
    lsa = initial_plan("model-driven", topo, cluster, params={"allocator": "lsa"}, models=models)
    # MBA: floor(4000 / 1800) = 2 bundles of 2 threads, 400/s left needs 1 thread → 5
    assert mba.allocation.cores == {"a": 5, "b": 5}
    # LSA: 4000 / 1000 = 4 threads, nothing left
    assert lsa.allocation.cores == {"a": 4, "b": 4}


def test_resizes_only_when_the_rate_departs_from_what_the_threads_serve() -> None:
    topo, cluster = chain(instances=2, shards=4, nodes=4, cores=2, rate=2000.0)
    pol = make_policy("model-driven", topo, cluster, params={"resize_tolerance": 0.2})
    plan = initial_plan("model-driven", topo, cluster)
    assert plan.allocation.cores == {"a": 2, "b": 2}  # 2 threads serve 2000/s
    loads = [0.25] * 8
    # within the band [0.8 × 2000, 2000]: routing only, threads kept
    for rate in (2000.0, 1700.0):
        d = pol.decide(snapshot(loads, loads, rate=rate), plan, 1.0)
        assert (d.plan or plan).allocation.cores == {"a": 2, "b": 2}
    # short: more threads, ceil(2600 / 1000) = 3
    d = pol.decide(snapshot(loads, loads, rate=2600.0), plan, 1.0)
    assert d.plan is not None and d.plan.allocation.cores == {"a": 3, "b": 3}
    # far below what 3 threads serve (1500 < 0.8 × 3000): ceil(1500 / 1000) = 2 threads
    big = d.plan
    d = pol.decide(snapshot(loads, loads, rate=1500.0), big, 2.0)
    assert d.plan is not None and d.plan.allocation.cores == {"a": 2, "b": 2}
    assert d.scale == "down"
    nodes = set(d.plan.placement.nodes.values())
    slots = math.ceil(2 * 1.5)
    assert nodes <= {f"executor-{i}" for i in range(math.ceil(slots / 2))}


def test_unknown_mapper_is_rejected_naming_it() -> None:
    topo, cluster = chain()
    with pytest.raises(StreamscaleError, match="mapper"):
        make_policy("model-driven", topo, cluster, params={"mapper": "nope"})
    with pytest.raises(StreamscaleError, match="max_migrations"):
        make_policy("model-driven", topo, cluster, params={"max_migrations": 3})
