from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError, StreamscaleError
from streamscale.model import Edge, Operator, Topology, load_topology

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_diamond_rates_hand_checked() -> None:
    t = load_topology(EXAMPLES / "diamond.yaml")
    r = t.rates(100)
    assert r["src"] == 100
    assert [r[n] for n in ("parse", "pi", "blob", "table")] == [100, 100, 100, 100]
    assert r["write"] == 400  # fan-in of four 1:1 branches
    assert r["out"] == 400


def test_star_hub_sees_twice_the_rate() -> None:
    r = load_topology(EXAMPLES / "star.yaml").rates(50)
    assert r["blob"] == 50 and r["table"] == 50
    assert r["hub"] == 100 and r["parse"] == 100 and r["pi"] == 100 and r["out"] == 200


def test_selectivity_and_several_sources() -> None:
    t = Topology.build(
        "two",
        [
            Operator("a", "source", rate=10),
            Operator("b", "source", rate=30),
            Operator("j"),
            Operator("o", "sink"),
        ],
        [
            Edge("a", "j", selectivity=2.0),
            Edge("b", "j", selectivity=0.5),
            Edge("j", "o", selectivity=0.25),
        ],
    )
    r = t.rates()
    assert r["j"] == 10 * 2 + 30 * 0.5
    assert r["o"] == pytest.approx(35 * 0.25)
    assert t.edge_rates()["a->j"] == 20


@pytest.mark.parametrize(
    ("ops", "edges", "needle"),
    [
        ([Operator("s", "source"), Operator("s", "sink")], [], "duplicate operator"),
        (
            [Operator("s", "source"), Operator("o", "sink")],
            [Edge("s", "x")],
            "unknown operator 'x'",
        ),
        (
            [Operator("s", "source"), Operator("o", "sink")],
            [Edge("s", "o", selectivity=0)],
            "selectivity",
        ),
        ([Operator("o", "sink"), Operator("p")], [Edge("p", "o")], "no source"),
        ([Operator("s", "source"), Operator("p")], [Edge("s", "p")], "no sink"),
        (
            [Operator("s", "source"), Operator("a"), Operator("b"), Operator("o", "sink")],
            [Edge("s", "a"), Edge("a", "b"), Edge("b", "a"), Edge("b", "o")],
            "cycle through a, b",
        ),
        ([Operator("s", "source", cost_ms=-1), Operator("o", "sink")], [Edge("s", "o")], "cost_ms"),
    ],
)
def test_invalid_topologies_name_the_problem(ops, edges, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelError, match=needle):
        Topology.build("t", ops, edges)


def test_source_needs_positive_rate() -> None:
    t = load_topology(EXAMPLES / "linear.yaml")
    with pytest.raises(ModelError, match="src"):
        t.rates()
    with pytest.raises(ModelError, match="> 0"):
        t.rates(-5)


@st.composite
def dags(draw: st.DrawFn) -> tuple[Topology, float]:
    n = draw(st.integers(1, 8))
    names = [f"v{i}" for i in range(n)]
    edges = [Edge("src", names[0], selectivity=draw(st.floats(0.1, 4)))]
    for j in range(1, n):
        parents = draw(st.sets(st.integers(0, j - 1), min_size=1, max_size=j))
        edges += [
            Edge(names[i], names[j], selectivity=draw(st.floats(0.1, 4))) for i in sorted(parents)
        ]
    for i in range(n):
        if not any(e.src == names[i] for e in edges):
            edges.append(Edge(names[i], "out", selectivity=draw(st.floats(0.1, 4))))
    ops = [Operator("src", "source"), *(Operator(x) for x in names), Operator("out", "sink")]
    return Topology.build("g", ops, edges), draw(st.floats(0.5, 1e4))


@given(dags())
def test_random_dags_conserve_rates(case: tuple[Topology, float]) -> None:
    t, omega = case
    r = t.rates(omega)
    er = t.edge_rates(omega)
    for op in t.operators:
        if op.kind != "source":
            assert r[op.name] == pytest.approx(sum(er[e.name] for e in t.inputs(op.name)))
        for e in t.outputs(op.name):
            assert er[e.name] == pytest.approx(r[op.name] * e.selectivity)
    order = t.topological_order()
    for e in t.edges:
        assert order.index(e.src) < order.index(e.dst)


@given(st.text(max_size=200))
def test_any_garbage_file_is_a_streamscale_error(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    from streamscale.model import load

    p = tmp_path_factory.mktemp("g") / "f.yaml"
    p.write_text(text)
    with pytest.raises(StreamscaleError):
        load(p)


@given(
    st.dictionaries(
        st.sampled_from(
            ["name", "operators", "edges", "kind", "nodes", "vm_types", "points", "task"]
        ),
        st.recursive(
            st.none() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.text(max_size=5),
            lambda c: (
                st.lists(c, max_size=3)
                | st.dictionaries(
                    st.sampled_from(
                        ["name", "kind", "from", "to", "cores", "rate", "selectivity", "x"]
                    ),
                    c,
                    max_size=4,
                )
            ),
            max_leaves=12,
        ),
        max_size=5,
    )
)
def test_any_structured_garbage_is_a_streamscale_error_or_valid(
    tmp_path_factory, doc: dict
) -> None:  # type: ignore[no-untyped-def]
    import json

    from streamscale.model import load

    p = tmp_path_factory.mktemp("g") / "f.json"
    p.write_text(json.dumps(doc))
    with contextlib.suppress(StreamscaleError):
        load(p)
