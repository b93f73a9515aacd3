"""The public API: what a user types comes from ``import streamscale``, typed, with
Spark's own method names, signatures and defaults wherever Spark has the method."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import streamscale
from streamscale.errors import StreamscaleError
from tests.test_docs import ROOT, fenced_blocks
from tests.test_docs_blocks import section

PUBLIC = {
    "stream": "streamscale.runtime.spark.api",
    "Stream": "streamscale.runtime.spark.api",
    "KeyedStream": "streamscale.runtime.spark.api",
    "WindowedStream": "streamscale.runtime.spark.api",
    "session": "streamscale.runtime.spark.app",
    "Executors": "streamscale.runtime.spark.app",
    "RunResult": "streamscale.runtime.spark.driver.result",
    "GraphBatch": "streamscale.runtime.spark.driver.graph_batch",
    "StreamingQuery": "streamscale.runtime.spark.driver.query",
    "StreamscaleError": "streamscale.errors",
}
SPARK_METHODS = ("applyInPandasWithState", "transformWithStateInPandas", "transformWithState")


def test_every_public_name_comes_from_import_streamscale() -> None:
    assert set(streamscale.__all__) == {*PUBLIC, "__version__"}
    for name, module in PUBLIC.items():
        assert getattr(streamscale, name) is getattr(importlib.import_module(module), name)
        assert name in dir(streamscale)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = streamscale.nope  # type: ignore[attr-defined]


def _public_callables() -> list[tuple[str, Callable[..., object]]]:
    out: list[tuple[str, Callable[..., object]]] = [
        ("stream", streamscale.stream),
        ("session", streamscale.session),
    ]
    for cls in (streamscale.Stream, streamscale.KeyedStream, streamscale.WindowedStream,
                streamscale.Executors, streamscale.StreamingQuery):  # fmt: skip
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                out.append((f"{cls.__name__}.{name}", fn))
    return out


@pytest.mark.parametrize(
    ("name", "fn"), _public_callables(), ids=[n for n, _ in _public_callables()]
)
def test_the_public_surface_is_typed(name: str, fn: Callable[..., object]) -> None:
    """Every parameter annotated, and no ``Any``/``object`` (or missing) return type."""
    sig = inspect.signature(fn)
    assert sig.return_annotation not in (inspect.Signature.empty, "Any", "object"), name
    for p in sig.parameters.values():
        if p.name != "self":
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name})"
    assert fn.__doc__, name


def test_key_by_returns_streams_whose_spark_methods_return_streams() -> None:
    for method in SPARK_METHODS:
        assert inspect.signature(getattr(streamscale.KeyedStream, method)).return_annotation == "S"
    # KeyedStream binds the Spark methods' stream type to Stream
    (base,) = streamscale.KeyedStream.__orig_bases__  # type: ignore[attr-defined]
    assert base.__args__[0].__forward_arg__ == "Stream"


@pytest.mark.parametrize("method", SPARK_METHODS)
def test_spark_methods_have_sparks_own_signature(method: str) -> None:
    from pyspark.sql import GroupedData

    spark_fn = getattr(GroupedData, method, None)
    if spark_fn is None:
        pytest.skip(f"the installed pyspark has no GroupedData.{method}")
    ours = inspect.signature(getattr(streamscale.KeyedStream, method)).parameters
    theirs = inspect.signature(spark_fn).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]


def test_the_old_keyword_for_instances_is_refused_naming_the_new_one() -> None:
    from streamscale.runtime.spark.api import Stream
    from streamscale.runtime.spark.api_graph import Builder

    s = Stream(Builder("job", None), ("source",))
    for call in (
        lambda: s.key_by("k", executors=2),  # type: ignore[call-arg]
        lambda: s.drop_duplicates("k", executors=2),  # type: ignore[call-arg]
        lambda: s.join(s, on="k", executors=2),  # type: ignore[call-arg]
    ):
        with pytest.raises(StreamscaleError, match=r"^\w+: executors= is now instances= "):
            call()
    with pytest.raises(StreamscaleError, match=r"^key_by: unexpected keyword argument 'shard'$"):
        s.key_by("k", shard=2)  # type: ignore[call-arg]
    with pytest.raises(StreamscaleError, match=r"instances must be a whole number >= 1, not 0"):
        s.key_by("k", instances=0)
    assert s.key_by("k", instances=3, shards=5).instances == 3


def test_executors_are_checked_when_given() -> None:
    e = streamscale.Executors(cores=2, max=4, min=2)
    conf = e.conf()
    assert (conf["spark.executor.cores"], conf["spark.cores.max"]) == ("2", "8")
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    with pytest.raises(StreamscaleError, match=r"^Executors: min \(3\) must not exceed max \(2\)$"):
        streamscale.Executors(max=2, min=3)
    with pytest.raises(StreamscaleError, match="executors need a cluster master"):
        streamscale.session("local[1]", executors=e)


@pytest.mark.slow
def test_the_readme_quick_start_type_checks(tmp_path: Path) -> None:
    """mypy on the README's quick start as written: no error, and what a user holds is
    streamscale's own types (not ``Any``)."""
    pytest.importorskip("mypy")
    blocks = fenced_blocks(section((ROOT / "README.md").read_text(), "Quick start"), ("python",))
    reveal = "\nreveal_type(counts)\nreveal_type(result)\nreveal_type(b)\nreveal_type(tws)\n"
    (tmp_path / "quick_start.py").write_text(
        "import streamscale\nspark = streamscale.session('local[2]')\n" + "\n".join(blocks) + reveal
    )
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / ".mypy"), "--python-executable", sys.executable,
         "quick_start.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:]
    revealed = [line.split('Revealed type is "')[1].rstrip('"') for line in
                res.stdout.splitlines() if "Revealed type" in line]  # fmt: skip
    assert revealed == [
        "streamscale.runtime.spark.api.Stream",
        "streamscale.runtime.spark.driver.result.RunResult",
        "streamscale.runtime.spark.driver.graph_batch.GraphBatch",
        "streamscale.runtime.spark.api.Stream",
    ]


def test_a_processor_written_for_time_mode_none_runs_available_now(tmp_path: Path) -> None:
    """Spark requires ``timeMode``; a processor given ``"None"`` runs under
    ``available_now`` (only processing time, which Spark runs at every trigger, is
    refused there)."""
    from types import SimpleNamespace

    from pyspark.sql import types as T
    from pyspark.sql.streaming import StatefulProcessor

    from streamscale.runtime.spark.compat.event_time import QueryClock
    from streamscale.runtime.spark.compat.processor import transform_with_state

    class Count(StatefulProcessor):
        def init(self, handle: object) -> None:
            pass

        def handleInputRows(self, key: object, rows: object, timerValues: object) -> object:
            return iter(())

    out = T.StructType([T.StructField("k", T.StringType())])
    source = SimpleNamespace(schema=out)

    def clock(time_mode: str) -> QueryClock:
        fn = transform_with_state(Count(), "k", out, "append", time_mode)
        graph = SimpleNamespace(keyed=["op"], nodes={"op": SimpleNamespace(fn=fn)})
        return QueryClock.build(graph, source, tmp_path, available_now=True)

    assert clock("None").modes == frozenset({"None"})
    with pytest.raises(StreamscaleError, match="available_now with a processing-time"):
        clock("ProcessingTime")


@pytest.mark.spark
@pytest.mark.slow
def test_a_session_reads_the_bundled_sources_by_name() -> None:
    """In a process of its own (no earlier registration): ``streamscale.session()``
    registers the bundled sources, so Spark's reader finds them by format name."""
    code = (
        "import streamscale\n"
        "spark = streamscale.session('local[1]')\n"
        "for name in ('streamscale_generator', 'streamscale_nexmark'):\n"
        "    print(name, spark.readStream.format(name).load().isStreaming)\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["streamscale_generator", "True", "streamscale_nexmark", "True"]
