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
:class:`~streamscale.runtime.spark.driver.graph.JobGraph` that a topology YAML with
those operators and edges builds, and runs it with
:func:`~streamscale.runtime.spark.driver.dag.run_graph`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Edge, Operator, Topology
from streamscale.runtime.run_config import RUN_SETTINGS

__all__ = ["KeyedStream", "Stream", "WindowedStream", "stream"]


@dataclass(slots=True)
class _Builder:
    name: str
    source_df: Any | None
    operators: list[Operator] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    available_now: bool = RUN_SETTINGS["available_now"].default

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

    def keyed_upstream(self, names: tuple[str, ...]) -> set[str]:
        """The keyed operators among ``names`` and everything upstream of them."""
        keyed = {e.dst for e in self.edges if e.grouping == "key"}
        seen: set[str] = set()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(e.src for e in self.edges if e.dst == n)
        return seen & keyed


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

    def key_by(
        self, key: str | Sequence[str], *, executors: int = 2, shards: int = 16
    ) -> KeyedStream:
        """Group by ``key`` (a column name, or a list of names for :meth:`KeyedStream.agg`)
        for a keyed (stateful, elastic) operator."""
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise StreamscaleError("key_by needs column names", item=f"key_by({key!r})")
        return KeyedStream(self, keys, executors, shards)

    def drop_duplicates(
        self,
        cols: str | Sequence[str],
        *,
        within: str | float | None = None,
        executors: int = 2,
        shards: int = 16,
        name: str | None = None,
    ) -> Stream:
        """Spark's ``dropDuplicatesWithinWatermark(cols)`` as an elastic keyed operator.

        Needs ``withWatermark`` on the input: a row whose ``cols`` were seen within
        ``within`` (default: the watermark's delay, as Spark) of an earlier kept row's
        event time is dropped, as are late rows; the kept rows pass unchanged.
        """
        from streamscale.runtime.spark.compat.event_time import watermark_of
        from streamscale.runtime.spark.keyed.agg.dedup import Dedup

        keys = (cols,) if isinstance(cols, str) else tuple(cols)
        b = self._b
        n = b.fresh(name or "dedup")
        wm = watermark_of(b.source_df.schema) if b.source_df is not None else None
        gap = None if within is None else _interval(within, "within")
        fn = Dedup.build(keys, watermark=wm, within=gap, item=f"operator {n}")
        if self._from == ("source",) and b.source_df is not None:
            fn.resolve(b.source_df, item=f"operator {n}")
        b.functions[n] = fn
        op = Operator(name=n, key=",".join(keys), instances=executors, shards=shards)
        b.add(op, self._from, grouping="key")
        return Stream(b, (n,))

    dropDuplicates = drop_duplicates  # Spark's name

    def join(
        self,
        other: Stream,
        on: str | Sequence[str],
        *,
        within: tuple[str, str, str | float, str | float] | None = None,
        how: str = "inner",
        executors: int = 2,
        shards: int = 16,
        name: str | None = None,
    ) -> Stream:
        """A stream-stream join as an elastic keyed operator, with Spark's semantics.

        Rows of this stream (the left side) and ``other`` (the right side) with equal
        ``on`` columns (a null never equals) and, with ``within=(lt, rt, lower, upper)``,
        ``right.rt BETWEEN left.lt + lower AND left.lt + upper`` are joined; the output has
        Spark's columns for ``left.join(right, on=on, how=how)``: the ``on`` columns once,
        then the left side's other columns, then the right side's (none for
        ``left_semi``). Both sides derive from the job's one source, so the query's
        watermark (``withWatermark`` on it) is the minimum of the sides' as Spark's
        default rule gives; each side's time column must carry that event time.

        As Spark's ``StreamingSymmetricHashJoinExec``: a side's rows at or behind the
        previous batch's watermark are late and dropped; each side's rows are buffered
        until the watermark shows no future row of the other side can match them (left:
        ``wm - upper``, right: ``wm + lower``); ``left``/``right``/``full`` outer joins
        emit a buffered row of their outer side that never matched, with nulls, when it
        leaves the state; ``left_semi`` emits each left row once, at its first match.

        Parameters
        ----------
        other
            The right side (a stream of the same job, not this one).
        on
            Join column(s), the same name and type on both sides.
        within
            ``(left time column, right time column, lower, upper)``; bounds in seconds
            (any sign) or Spark interval strings (``"-5 seconds"``). Required by every
            ``how`` but ``inner``, as by Spark (with ``withWatermark`` on the input).
        how
            ``inner``, ``left``, ``right``, ``full`` or ``left_semi``.
        executors, shards
            The keyed operator's executors and shards per executor.
        name
            Operator name (default ``join``).

        Examples
        --------
        Bids (``side == "L"``) joined with the asks of the same key from 3 s before to
        5 s after them; a bid without one comes out with nulls once the watermark
        passes (``events``: Parquet files of these columns).

        >>> import streamscale  # doctest: +SKIP
        >>> from pyspark.sql import SparkSession
        >>> spark = SparkSession.builder.master("local[2]").getOrCreate()
        >>> src = (spark.readStream.schema("side string, k string, t timestamp, v long")
        ...        .parquet("events").withWatermark("t", "10 seconds"))
        >>> def bids(pdf):
        ...     return pdf[pdf.side == "L"].rename(columns={"v": "price"})[["k", "t", "price"]]
        >>> def asks(pdf):
        ...     out = pdf[pdf.side == "R"].rename(columns={"t": "at", "v": "size"})
        ...     return out[["k", "at", "size"]]
        >>> s = streamscale.stream(src)
        >>> left, right = s.map_batches(bids), s.map_batches(asks)
        >>> out = left.join(right, on="k", within=("t", "at", -3, "5 seconds"), how="left")
        >>> out.to("parquet", path="joined").run(checkpoint="ck", duration_s=60)
        """
        from streamscale.runtime.spark.compat.event_time import watermark_of
        from streamscale.runtime.spark.keyed.agg.join_spec import Join

        if not isinstance(other, Stream) or other._b is not self._b:
            raise StreamscaleError("join needs a stream of the same job", item="join")
        keys = (on,) if isinstance(on, str) else tuple(on)
        b = self._b
        n = b.fresh(name or "join")
        item = f"operator {n}"
        wm = watermark_of(b.source_df.schema) if b.source_df is not None else None
        # Both sides derive from the one source; when a keyed operator's (cached) output
        # is upstream of either, each side is cut from its lineage (Join.tagged).
        keyed = b.keyed_upstream(self._from) | b.keyed_upstream(other._from)
        fn = Join.build(
            keys, how=how, left_from=self._from, right_from=other._from,
            within=within, watermark=wm, item=item, cut_lineage=bool(keyed),
        )  # fmt: skip
        for side, s in (("left", self), ("right", other)):
            schema = _declared_schema(b, s._from)
            if schema is not None:
                fn.check_side(schema, side, item=item)  # refuse before the query starts
        b.functions[n] = fn
        op = Operator(name=n, key=",".join(keys), instances=executors, shards=shards)
        b.add(op, self._from + other._from, grouping="key")
        return Stream(b, (n,))

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
        duration_s: float | None = None,
        out: str | Path | None = None,
        max_batches: int | None = None,
        spark: Any | None = None,
        policy: str | None = None,
        params: dict[str, Any] | None = None,
        seed: int | None = None,
        state_url: str | None = None,
        on_batch: Any | None = None,
        resources: Any | None = None,
    ) -> Any:
        """Run the whole job this stream belongs to; returns a
        :class:`~streamscale.runtime.spark.driver.dag.GraphResult`.

        ``policy`` (``elastic`` unless given, as ``streamscale run``; ``static``, …)
        plans every keyed operator after each batch; ``params`` are its and the
        controller's settings; ``duration_s`` defaults as ``--duration``. All are parsed
        once, by :func:`~streamscale.runtime.run_config.parse_run`, before the query starts.
        ``state_url`` is where keyed state lives (default ``checkpoint/state``; e.g.
        ``s3://bucket/prefix?endpoint=…``); ``on_batch`` is called with each committed
        batch's record; ``resources``: executors that follow the plan
        (:mod:`~streamscale.runtime.spark.executors.resources`)."""
        from streamscale.runtime.run_config import parse_run

        given = {"duration_s": duration_s, "max_batches": max_batches, "policy": policy,
                 "seed": seed, "state_url": state_url}  # fmt: skip
        cfg = parse_run({k: v for k, v in given.items() if v is not None}, params)
        from streamscale.runtime.spark.driver.dag import run_graph
        from streamscale.runtime.spark.driver.graph import JobGraph

        graph = JobGraph.build(self._b.topology(), self._b.functions)
        df = self._b.source_df
        session = spark if spark is not None else getattr(df, "sparkSession", None)
        if session is None:
            raise StreamscaleError("no SparkSession: pass spark=", item="run")
        # absolute: executors resolve a relative path against their own working directory
        return run_graph(
            session,
            graph,
            duration_s=cfg.duration_s,
            checkpoint=Path(checkpoint).absolute(),
            out=None if out is None else Path(out).absolute(),
            max_batches=cfg.max_batches,
            source_df=df,
            policy=cfg.policy,
            params=cfg.params,
            seed=cfg.seed,
            state_url=cfg.state_url,
            available_now=self._b.available_now,
            on_batch=on_batch,
            resources=resources,
        )


@dataclass(frozen=True, slots=True)
class KeyedStream:
    """A stream grouped by key columns; :meth:`process` or :meth:`agg` adds the keyed
    operator."""

    _s: Stream
    keys: tuple[str, ...]
    executors: int
    shards: int

    @property
    def key(self) -> str:
        """The key column (a ``process`` operator has one)."""
        if len(self.keys) != 1:
            raise StreamscaleError(
                "process() takes one key column (agg() takes several)", item=f"key_by{self.keys}"
            )
        return self.keys[0]

    def agg(
        self,
        *aggs: Any,
        mode: str = "update",
        max_collect: int | None = None,
        name: str | None = None,
    ) -> Stream:
        """A keyed aggregation: ``pyspark.sql.functions`` aggregates of each group.

        Spark computes each batch's partial aggregates before the shuffle; each task
        merges them into its shards' state, Arrow tables (see
        :mod:`~streamscale.runtime.spark.keyed.agg`). The output has Spark's columns for
        ``df.groupBy(keys).agg(*aggs)``.

        Parameters
        ----------
        *aggs
            ``count``, ``sum``, ``min``, ``max``, ``avg``/``mean``, ``first``/``last``
            (``ignorenulls`` too), ``count_distinct`` (exact), ``collect_list`` and
            ``collect_set`` Columns, optionally aliased; anything else is refused.
        mode
            ``update`` (the groups changed this batch, with their full values, as
            Spark's update mode) or ``complete`` (every group, every batch).
        max_collect
            Most values one group's ``collect_list``/``collect_set`` may hold (required
            with them; a batch exceeding it fails, naming the group).
        name
            Operator name (default ``agg``).
        """
        return _add_agg(self, aggs, mode, max_collect, name, None)

    def window(
        self,
        time_col: str,
        size: str | float | None = None,
        slide: str | float | None = None,
        *,
        session_gap: str | float | None = None,
    ) -> WindowedStream:
        """Event-time windows of ``time_col``: as Spark's ``window(time_col, size, slide)``
        (aligned to the epoch; tumbling, or sliding with ``slide``), or with
        ``session_gap`` as Spark's ``session_window(time_col, gap)``.

        ``size``, ``slide`` and ``session_gap`` are Spark interval strings
        (``"10 seconds"``) or seconds.
        """
        if (size is None) == (session_gap is None) or (session_gap is not None and slide):
            raise StreamscaleError(
                "window() takes a size (and a slide) or a session_gap", item=f"window {time_col}"
            )
        if session_gap is not None:
            return WindowedStream(self, (time_col, _interval(session_gap, "gap"), None), True)
        assert size is not None
        step = None if slide is None else _interval(slide, "slide")
        return WindowedStream(self, (time_col, _interval(size, "size"), step))

    def process(self, fn: Callable[..., Any], *, name: str | None = None, **params: Any) -> Stream:
        """A keyed operator ``fn(rows, state: dict, **params) -> pandas.DataFrame | None``.

        ``fn`` may also be a Spark 4 ``StatefulProcessor`` (``transformWithStateInPandas``);
        ``params`` are then :func:`~streamscale.runtime.spark.compat.processor.from_processor`'s
        options (``time_mode``, ``clock``, ``timer_order``, ``timer_bucket_ms``)."""
        from streamscale.runtime.spark.compat.processor import from_processor, is_processor

        key = self.key
        if is_processor(fn):
            fn, params = from_processor(fn, key, **params), {}
        b = self._s._b
        n = b.fresh(_name(fn, name))
        b.functions[n] = fn
        op = Operator(
            name=n, key=key, instances=self.executors, shards=self.shards, params=dict(params)
        )
        b.add(op, self._s._from, grouping="key")
        return Stream(b, (n,))


@dataclass(frozen=True, slots=True)
class WindowedStream:
    """A keyed stream in event-time windows; :meth:`agg` adds the windowed aggregation."""

    _k: KeyedStream
    spec: tuple[str, str, str | None]
    session: bool = False

    def agg(
        self,
        *aggs: Any,
        mode: str | None = None,
        max_collect: int | None = None,
        name: str | None = None,
        bounds: tuple[str, str] | None = None,
        wait_ms: float = 0.0,
    ) -> Stream:
        """Aggregates of each (window, key) group; the output has Spark's columns for
        ``df.groupBy(window(...), *keys).agg(*aggs)`` (with ``bounds=(start, end)``:
        the window struct as two timestamp columns of those names, first; ``wait_ms``:
        an emulated cost per input row, waited in the reduce task, for benchmarks).

        ``mode``: ``update`` (as :meth:`KeyedStream.agg`), ``append`` (each window
        once, when the query's watermark passes its end; needs ``withWatermark`` on the
        window's time column) or ``complete``; session windows have ``append`` (the
        default for them) and ``complete``, as in Spark. With the watermark on the time
        column, rows of windows that closed before the batch are dropped and closed
        windows leave the state, as in Spark.
        """
        if mode is None:
            mode = "append" if self.session else "update"
        return _add_agg(
            self._k, aggs, mode, max_collect, name, self.spec, self.session,
            bounds=bounds, wait_ms=wait_ms,
        )  # fmt: skip


def _declared_schema(b: _Builder, names: tuple[str, ...]) -> Any | None:
    """The schema of a stream when known before the query runs (the source's, or one
    stateless operator's declared ``output_schema``)."""
    if len(names) != 1:
        return None
    if names == ("source",):
        return None if b.source_df is None else b.source_df.schema
    declared = getattr(b.functions.get(names[0]), "output_schema", None)
    if isinstance(declared, str):
        from pyspark.sql import types as T

        return T._parse_datatype_string(declared)
    return declared if hasattr(declared, "fieldNames") else None


def _interval(v: str | float, what: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
        raise StreamscaleError(
            f"window {what} must be an interval string or seconds > 0", item=f"window {v!r}"
        )
    return f"{int(v * 1_000_000)} microseconds"


def _add_agg(
    k: KeyedStream,
    aggs: tuple[Any, ...],
    mode: str,
    max_collect: int | None,
    name: str | None,
    window: tuple[str, str, str | None] | None,
    session: bool = False,
    *,
    bounds: tuple[str, str] | None = None,
    wait_ms: float = 0.0,
) -> Stream:
    from streamscale.runtime.spark.compat.event_time import watermark_of
    from streamscale.runtime.spark.keyed.agg.spec import Aggregation

    b = k._s._b
    n = b.fresh(name or ("window_agg" if window else "agg"))
    wm = watermark_of(b.source_df.schema) if b.source_df is not None else None
    fn = Aggregation.build(
        k.keys, aggs, mode=mode, max_collect=max_collect, item=f"operator {n}",
        window=window, watermark=wm, session=session, bounds=bounds, wait_ms=wait_ms,
    )  # fmt: skip
    if k._s._from == ("source",) and b.source_df is not None:
        fn.resolve(b.source_df, item=f"operator {n}")  # refuse before the query starts
    b.functions[n] = fn
    op = Operator(name=n, key=",".join(k.keys), instances=k.executors, shards=k.shards)
    b.add(op, k._s._from, grouping="key")
    return Stream(b, (n,))


def stream(
    df: Any,
    *,
    name: str = "job",
    trigger_s: float | None = None,
    available_now: bool = RUN_SETTINGS["available_now"].default,
    source: tuple[str, Mapping[str, Any]] | None = None,
) -> Stream:
    """A job over ``df``, any streaming DataFrame (``spark.readStream…load()``).

    ``source``: the registered source ``df`` reads, as ``(format, options)`` — the same
    format and options its reader was given (``df`` may be derived from it: filtered,
    projected). At every batch boundary the controller then sees what that source
    offered beyond the running batch (:mod:`~streamscale.runtime.spark.sources.source_registry`:
    the bundled generator, trace replay, Nexmark, or any registered one) as a backlog in
    the first keyed operator's rows (the batch's rows per source tuple); without it a
    Python source's backlog is unknown (Spark's offsets tell it for Kafka and files). The
    mid-batch watch reads it too, in the source's tuples; the admission limit stays with
    a job's own source, whose reader takes it as an option. A format nobody registered
    with an offered schedule is refused, naming it.

    ``withWatermark`` on ``df`` is the query's watermark, as in Spark (see
    :mod:`~streamscale.runtime.spark.compat.event_time`). ``available_now``: a run processes
    what the source holds, then the batches that advance the watermark and fire due
    timers, then stops (``trigger(availableNow=True)``). ``trigger_s``: the micro-batch
    interval (:data:`~streamscale.runtime.run_config.TRIGGER_S`; unset: its default, as a YAML
    source)."""
    if not getattr(df, "isStreaming", False):
        raise StreamscaleError(
            "stream() needs a streaming DataFrame (spark.readStream...)", item=name
        )
    b = _Builder(name, df, available_now=bool(available_now))
    src: dict[str, Any] = {} if trigger_s is None else {"trigger_s": trigger_s}
    if source is not None:
        src.update(_declared_source(source, item=name))
    b.add(Operator(name="source", kind="source", params=src), ())
    return Stream(b, ("source",))


def _declared_source(source: Any, *, item: str) -> dict[str, Any]:
    """The source operator's ``format`` and options for ``stream(df, source=...)``:
    a registered source that knows what it offered, with options it accepts."""
    from streamscale.runtime.spark.sources.source_registry import check_options, source_offered

    try:
        fmt, options = source
        options = dict(options)
    except (TypeError, ValueError):
        raise StreamscaleError("source must be (format, options)", item=item) from None
    check_options(str(fmt), options, item=f"{item}: source")
    if source_offered(str(fmt), options) is None:
        raise StreamscaleError(
            "not a registered source that knows what it offered", item=f"{item}: source {fmt!r}"
        )
    return {"format": str(fmt), **options}
