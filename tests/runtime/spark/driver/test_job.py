"""The job API: building from Python and from YAML, and its one-line errors (no Spark)."""

from __future__ import annotations

import contextlib
import itertools
import re
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.runtime.spark.driver.job import Job
from streamscale.runtime.spark.keyed.functions import calculator, identity

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def test_microbench_yaml_resolves_functions_and_source() -> None:
    job = Job.from_yaml(EXAMPLES / "microbench.yaml")
    assert (job.source, job.keyed, job.before, job.after) == ("gen", "calc", (), ())
    assert job.functions["calc"] is calculator
    assert job.source_format == "streamscale_generator"
    assert job.source_options["rate"] == "1500" and job.source_options["alpha"] == "0.5"
    assert job.cost_ms == 1.0
    assert [s.format for s in job.sinks] == ["none"]


def _chain(*, sink: dict | None = None, extra_keyed: bool = False) -> Topology:
    ops = [
        Operator("src", kind="source", params={"format": "x", "trigger_s": 0.5, "keys": 10}),
        Operator("pre", function="streamscale.runtime.spark.keyed.functions:identity"),
        Operator(
            "calc", key="key", function="streamscale.runtime.spark.keyed.functions:calculator"
        ),
        Operator("post", key="key" if extra_keyed else None),
        Operator("out", kind="sink", params=sink or {}),
    ]
    names = [o.name for o in ops]
    return Topology.build("c", ops, [Edge(a, b) for a, b in itertools.pairwise(names)])


def test_stateless_operators_around_the_keyed_one() -> None:
    job = Job.build(_chain(sink={"format": "parquet", "path": "o"}), {"post": identity})
    assert (job.before, job.keyed, job.after) == (("pre",), "calc", ("post",))
    assert job.functions["pre"] is identity and job.trigger_s == 0.5
    assert job.source_options == {"keys": "10"}
    assert job.sinks[0].format == "parquet" and job.sinks[0].path == "o"


@pytest.mark.parametrize(
    ("topo", "functions", "msg"),
    [
        (lambda: _chain(), {}, "operator post: no function given"),
        (lambda: _chain(extra_keyed=True), {"post": identity}, "exactly one keyed operator"),
        (lambda: _chain(sink={"format": "csv"}), {"post": identity}, "sink format 'csv'"),
        (lambda: _chain(sink={"format": "jsonl"}), {"post": identity}, "needs a 'path'"),
        (lambda: _chain(), {"post": "nowhere:fn"}, "cannot import 'nowhere'"),
        (lambda: _chain(), {"post": "no-colon"}, "module:function"),
    ],
)
def test_bad_jobs_name_the_offending_item(topo, functions, msg: str) -> None:
    with pytest.raises(StreamscaleError, match=re.escape(msg)):
        Job.build(topo(), functions)


def test_branching_topology_is_rejected() -> None:
    topo = Topology.build(
        "b",
        [
            Operator("src", kind="source"),
            Operator("a", key="k"),
            Operator("b"),
            Operator("out", kind="sink"),
        ],
        [Edge("src", "a"), Edge("src", "b"), Edge("a", "out"), Edge("b", "out")],
    )
    with pytest.raises(StreamscaleError, match="linear pipeline"):
        Job.build(topo, {"a": calculator, "b": identity})


def test_simple_job_passes_params_to_the_function() -> None:
    job = Job.simple("count", calculator, source_options={"rate": 5}, params={"x": 1})
    assert job.operator.params == {"x": 1}
    assert job.source_options == {"rate": "5"}


def _accepts(topo: Topology) -> bool:
    """Brute force: whether Job.build takes ``topo`` (every operator given a function, so
    only the shape and the sinks decide)."""
    try:
        Job.build(topo, {op.name: identity for op in topo.operators})
    except StreamscaleError as exc:
        assert exc.item is not None
        return False
    return True


def _shapes() -> list[Topology]:
    from streamscale.model.io import load_topology

    out = []
    for p in sorted(EXAMPLES.glob("*.yaml")):
        with contextlib.suppress(StreamscaleError):  # not a topology file
            out.append(load_topology(p))
    src = Operator(name="s", kind="source")
    k = Operator(name="k", key="key")
    k2 = Operator(name="k2", key="key")
    m = Operator(name="m")
    sinks = [{}, {"format": "console"}, {"format": "csv", "path": "x"}, {"format": "parquet"},
             {"format": "jsonl", "path": "x"}, {"function": "a:b"}, {"rows": -1}]  # fmt: skip
    for params in sinks:
        out.append(Topology.build("t", [src, k, Operator(name="o", kind="sink", params=params)],
                                  [Edge("s", "k", grouping="key"), Edge("k", "o")]))  # fmt: skip
    o = Operator(name="o", kind="sink")
    o2 = Operator(name="o2", kind="sink")
    out += [
        Topology.build("two", [src, k, k2, o], [Edge("s", "k"), Edge("k", "k2"), Edge("k2", "o")]),
        Topology.build("none", [src, m, o], [Edge("s", "m"), Edge("m", "o")]),
        Topology.build(
            "fan",
            [src, k, m, o, o2],
            [Edge("s", "k"), Edge("k", "m"), Edge("k", "o2"), Edge("m", "o")],
        ),
        Topology.build(
            "union",
            [src, m, k, o],
            [Edge("s", "m"), Edge("s", "k"), Edge("m", "k"), Edge("k", "o")],
        ),
        Topology.build(
            "sinks",
            [src, m, k, o, o2],
            [Edge("s", "m"), Edge("m", "k"), Edge("k", "o"), Edge("k", "o2")],
        ),
    ]
    return out


def test_linear_shape_is_what_job_build_takes() -> None:
    from streamscale.runtime.spark.driver.job import linear_shape

    shapes = _shapes()
    verdicts = [linear_shape(t) for t in shapes]
    assert verdicts == [_accepts(t) for t in shapes]
    assert any(verdicts) and not all(verdicts)
