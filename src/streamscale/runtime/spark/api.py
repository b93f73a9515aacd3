"""The Python API: build a job graph from a streaming DataFrame, PySpark style.

::

    import streamscale
    s = streamscale.stream(spark.readStream.format("rate").load())
    e = s.map_batches(enrich, buckets=5)
    ranked = e.key_by("key", executors=2, shards=4).process(rank_in_key)
    totals = ranked.union(e.map_batches(odd_only)).key_by("bucket").process(bucket_totals)
    ranked.to("parquet", path="ranked")
    totals.to(lambda df, batch_id: ...)
    totals.run(checkpoint="ck", duration_s=60)

Every call adds an operator (or a sink) to one topology shared by the streams
derived from the same :func:`stream`; :meth:`Stream.run` builds the same
:class:`~streamscale.runtime.spark.graph.JobGraph` that a topology YAML with
those operators and edges builds, and runs it with
:func:`~streamscale.runtime.spark.dag.run_graph`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology

__all__ = ["KeyedStream", "Stream", "stream"]


@dataclass(slots=True)
class _Builder:
    name: str
    source_df: Any | None
    operators: list[Operator] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    available_now: bool = False

    def fresh(self, base: str) -> str:
        taken = {op.name for op in self.operators}
        if base not in taken:
            return base
        i = 2
        while f"{base}_{i}" in taken:
            i += 1
        return f"{base}_{i}"

    def add(self, op: Operator, inputs: tuple[str, ...], grouping: str = "shuffle") -> str:
        self.operators.append(op)
        for src in inputs:
            self.edges.append(Edge(src, op.name, grouping=grouping))
        return op.name

    def topology(self) -> Topology:
        return Topology.build(self.name, list(self.operators), list(self.edges))


def _name(fn: Any, given: str | None) -> str:
    return given or getattr(fn, "__name__", "op").strip("<>") or "op"


@dataclass(frozen=True, slots=True)
class Stream:
    """A stream of rows: the output of one operator (or a union of several)."""

    _b: _Builder
    _from: tuple[str, ...]

    def map_batches(
        self, fn: Callable[..., Any], *, name: str | None = None, **params: Any
    ) -> Stream:
        """A stateless operator ``fn(pandas.DataFrame, **params) -> pandas.DataFrame``."""
        n = self._b.fresh(_name(fn, name))
        self._b.functions[n] = fn
        self._b.add(Operator(name=n, params=dict(params)), self._from)
        return Stream(self._b, (n,))

    def key_by(self, key: str, *, executors: int = 2, shards: int = 16) -> KeyedStream:
        """Group by ``key`` for a keyed (stateful, elastic) operator."""
        return KeyedStream(self, key, executors, shards)

    def union(self, *others: Stream) -> Stream:
        """The union (by column name) of this stream and ``others`` (same columns)."""
        for o in others:
            if o._b is not self._b:
                raise StreamscaleError("cannot union streams of different jobs", item="union")
        return Stream(
            self._b, tuple(dict.fromkeys(self._from + sum((o._from for o in others), ())))
        )

    def to(
        self,
        sink: str | Callable[[Any, int], None],
        *,
        path: str | None = None,
        name: str | None = None,
        rows: int = 5,
    ) -> Stream:
        """Write every batch: a format (``parquet``, ``json``, ``csv``, ``console``,
        ``none``) or a function ``fn(df, batch_id)``. Returns this stream (fan-out)."""
        params: dict[str, Any] = {"rows": rows}
        if callable(sink):
            n = self._b.fresh(name or _name(sink, None) or "sink")
            params["format"] = "function"
            self._b.functions[n] = sink
        else:
            n = self._b.fresh(name or str(sink))
            params["format"] = sink
            if path is not None:
                params["path"] = path
        self._b.add(Operator(name=n, kind="sink", params=params), self._from)
        return self

    def topology(self) -> Topology:
        """The topology built so far (what a YAML file would describe)."""
        return self._b.topology()

    def run(
        self,
        *,
        checkpoint: str | Path,
        duration_s: float = 60.0,
        out: str | Path | None = None,
        max_batches: int | None = None,
        spark: Any | None = None,
        policy: str = "static",
        params: dict[str, Any] | None = None,
        seed: int | None = None,
        state_url: str | None = None,
    ) -> Any:
        """Run the whole job this stream belongs to; returns a
        :class:`~streamscale.runtime.spark.dag.GraphResult`.

        ``policy`` (``static``, ``elastic``, …) plans every keyed operator after each
        batch; ``params`` are its and the controller's settings (checked before the
        query starts); ``state_url`` is where keyed state lives (default
        ``checkpoint/state``; e.g. ``s3://bucket/prefix?endpoint=…``)."""
        from streamscale.control.controller import CONTROLLER_SETTINGS
        from streamscale.control.policies import POLICY_SETTINGS, check_params, check_policy
        from streamscale.settings import split_params

        check_policy(policy)
        pol, ctl = split_params(params or {}, POLICY_SETTINGS, CONTROLLER_SETTINGS)
        check_params(pol)
        from streamscale.runtime.spark.dag import run_graph
        from streamscale.runtime.spark.graph import JobGraph

        graph = JobGraph.build(self._b.topology(), self._b.functions)
        df = self._b.source_df
        session = spark if spark is not None else getattr(df, "sparkSession", None)
        if session is None:
            raise StreamscaleError("no SparkSession: pass spark=", item="run")
        return run_graph(
            session,
            graph,
            duration_s=duration_s,
            checkpoint=Path(checkpoint),
            out=None if out is None else Path(out),
            max_batches=max_batches,
            source_df=df,
            policy=policy,
            params={**pol, **ctl},
            seed=seed,
            state_url=state_url,
            available_now=self._b.available_now,
        )


@dataclass(frozen=True, slots=True)
class KeyedStream:
    """A stream grouped by a key; :meth:`process` adds the keyed operator."""

    _s: Stream
    key: str
    executors: int
    shards: int

    def process(self, fn: Callable[..., Any], *, name: str | None = None, **params: Any) -> Stream:
        """A keyed operator ``fn(rows, state: dict, **params) -> pandas.DataFrame | None``.

        ``fn`` may also be a Spark 4 ``StatefulProcessor`` (``transformWithStateInPandas``);
        ``params`` are then :func:`~streamscale.runtime.spark.processor.from_processor`'s
        options (``time_mode``, ``clock``, ``timer_order``, ``timer_bucket_ms``)."""
        from streamscale.runtime.spark.processor import from_processor, is_processor

        if is_processor(fn):
            fn, params = from_processor(fn, self.key, **params), {}
        b = self._s._b
        n = b.fresh(_name(fn, name))
        b.functions[n] = fn
        op = Operator(
            name=n, key=self.key, instances=self.executors, shards=self.shards, params=dict(params)
        )
        b.add(op, self._s._from, grouping="key")
        return Stream(b, (n,))


def stream(
    df: Any, *, name: str = "job", trigger_s: float = 0.0, available_now: bool = False
) -> Stream:
    """A job over ``df``, any streaming DataFrame (``spark.readStream…load()``).

    ``withWatermark`` on ``df`` is the query's watermark, as in Spark (see
    :mod:`~streamscale.runtime.spark.event_time`). ``available_now``: a run processes
    what the source holds, then the batches that advance the watermark and fire due
    timers, then stops (``trigger(availableNow=True)``)."""
    if not getattr(df, "isStreaming", False):
        raise StreamscaleError(
            "stream() needs a streaming DataFrame (spark.readStream...)", item=name
        )
    b = _Builder(name, df, available_now=bool(available_now))
    b.add(Operator(name="source", kind="source", params={"trigger_s": trigger_s}), ())
    return Stream(b, ("source",))
