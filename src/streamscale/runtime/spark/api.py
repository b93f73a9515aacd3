"""The Python API: build a job graph from a streaming DataFrame, PySpark style.

::

    import streamscale
    s = streamscale.stream(spark.readStream.format("rate").load())
    e = s.map_batches(enrich, buckets=5)
    ranked = e.key_by("key", instances=2, shards=4).process(rank_in_key)
    totals = ranked.union(e.map_batches(odd_only)).key_by("bucket").process(bucket_totals)
    ranked.to("parquet", path="ranked")
    totals.to(lambda df, batch_id: ...)
    query = totals.start(checkpoint="ck")      # runs until query.stop()

``stream(df).key_by(k)`` answers Spark's own stateful methods of ``df.groupBy(k)``
(``applyInPandasWithState``, ``transformWithStateInPandas``, ``transformWithState``)
with Spark's signatures, so a job moves over by replacing ``df.groupBy(k)``.

Every call adds an operator (or a sink) to one topology shared by the streams
derived from the same :func:`stream`; :meth:`Stream.run` builds the same
:class:`~streamscale.runtime.spark.driver.graph.JobGraph` that a topology YAML with
those operators and edges builds, and :meth:`Stream.start` starts it with
:func:`~streamscale.runtime.spark.driver.dag.start_graph`: a
:class:`~streamscale.runtime.spark.driver.query.StreamingQuery` with Spark's methods
(:meth:`Stream.run`: start, then wait for the end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Never

from streamscale.errors import StreamscaleError
from streamscale.model import Operator, Topology
from streamscale.runtime.run_config import RUN_SETTINGS
from streamscale.runtime.spark.api_graph import (
    Builder,
    add_agg,
    check_sizes,
    declared_schema,
    declared_source,
    interval,
    name_of,
    refuse_unknown,
    start_job,
)
from streamscale.runtime.spark.api_spark import SparkStateful

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from streamscale.runtime.spark.app import Executors
    from streamscale.runtime.spark.driver.graph_batch import GraphBatch
    from streamscale.runtime.spark.driver.query import StreamingQuery
    from streamscale.runtime.spark.driver.result import RunResult
    from streamscale.runtime.spark.executors.resources import Resources

__all__ = ["KeyedStream", "Stream", "WindowedStream", "stream"]


@dataclass(frozen=True, slots=True)
class Stream:
    """A stream of rows: the output of one operator (or a union of several)."""

    _b: Builder
    _from: tuple[str, ...]

    def map_batches(
        self, fn: Callable[..., Any], *, name: str | None = None, **params: object
    ) -> Stream:
        """A stateless operator ``fn(pandas.DataFrame, **params) -> pandas.DataFrame``."""
        n = self._b.fresh(name_of(fn, name))
        self._b.functions[n] = fn
        self._b.add(Operator(name=n, params=dict(params)), self._from)
        return Stream(self._b, (n,))

    def key_by(
        self, key: str | Sequence[str], *, instances: int = 2, shards: int = 16, **_old: Never
    ) -> KeyedStream:
        """Group by ``key`` (a column name, or a list of names for :meth:`KeyedStream.agg`)
        for a keyed (stateful, elastic) operator: ``df.groupBy(key)``'s place.

        Every key hashes to one of ``instances`` elastic instances of the operator and to
        one of ``shards`` shards of that instance (the unit of state that moves); the
        policy gives each instance its cores (Spark tasks) after every batch.

        Examples
        --------
        >>> import streamscale  # doctest: +SKIP
        >>> keyed = streamscale.stream(events).key_by("user", instances=2, shards=8)  # doctest: +SKIP
        """
        refuse_unknown(_old, "key_by")
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise StreamscaleError("key_by needs column names", item=f"key_by({key!r})")
        check_sizes(instances, shards, f"key_by({key!r})")
        return KeyedStream(self, keys, instances, shards)

    def drop_duplicates(
        self,
        cols: str | Sequence[str],
        *,
        within: str | float | None = None,
        instances: int = 2,
        shards: int = 16,
        name: str | None = None,
        **_old: Never,
    ) -> Stream:
        """Spark's ``dropDuplicatesWithinWatermark(cols)`` as an elastic keyed operator.

        Needs ``withWatermark`` on the input: a row whose ``cols`` were seen within
        ``within`` (default: the watermark's delay, as Spark) of an earlier kept row's
        event time is dropped, as are late rows; the kept rows pass unchanged.
        """
        from streamscale.runtime.spark.compat.event_time import watermark_of
        from streamscale.runtime.spark.keyed.agg.dedup import Dedup

        refuse_unknown(_old, "drop_duplicates")
        check_sizes(instances, shards, "drop_duplicates")
        keys = (cols,) if isinstance(cols, str) else tuple(cols)
        b = self._b
        n = b.fresh(name or "dedup")
        wm = watermark_of(b.source_df.schema) if b.source_df is not None else None
        gap = None if within is None else interval(within, "within")
        fn = Dedup.build(keys, watermark=wm, within=gap, item=f"operator {n}")
        if self._from == ("source",) and b.source_df is not None:
            fn.resolve(b.source_df, item=f"operator {n}")
        b.functions[n] = fn
        op = Operator(name=n, key=",".join(keys), instances=instances, shards=shards)
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
        instances: int = 2,
        shards: int = 16,
        name: str | None = None,
        **_old: Never,
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
        instances, shards
            The keyed operator's elastic instances and shards per instance.
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

        refuse_unknown(_old, "join")
        check_sizes(instances, shards, "join")
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
            schema = declared_schema(b, s._from)
            if schema is not None:
                fn.check_side(schema, side, item=item)  # refuse before the query starts
        b.functions[n] = fn
        op = Operator(name=n, key=",".join(keys), instances=instances, shards=shards)
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
        sink: str | Callable[[DataFrame, int], None],
        *,
        path: str | None = None,
        name: str | None = None,
        rows: int = 5,
    ) -> Stream:
        """Write every batch: a format (``parquet``, ``json``, ``csv``, ``console``,
        ``none``) or a function ``fn(df, batch_id)``. Returns this stream (fan-out)."""
        params: dict[str, object] = {"rows": rows}
        if callable(sink):
            n = self._b.fresh(name or name_of(sink, None) or "sink")
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

    def start(
        self,
        *,
        checkpoint: str | Path,
        duration_s: float | None = None,
        out: str | Path | None = None,
        max_batches: int | None = None,
        spark: SparkSession | None = None,
        policy: str | None = None,
        params: Mapping[str, object] | None = None,
        seed: int | None = None,
        state_url: str | None = None,
        on_batch: Callable[[GraphBatch], None] | None = None,
        executors: Executors | None = None,
        resources: Resources | None = None,
    ) -> StreamingQuery:
        """Start the whole job this stream belongs to, as Spark's ``writeStream.start()``.

        Every setting is parsed once, by :func:`~streamscale.runtime.run_config.parse_run`,
        before the query starts; a bad one is refused in one line naming it.

        Parameters
        ----------
        checkpoint
            Spark's offsets and commits (``checkpoint/spark``) and, unless ``state_url``,
            the keyed state (``checkpoint/state``); a run on it resumes.
        duration_s, max_batches
            When to stop. Neither given: when stopped
            (:meth:`~streamscale.runtime.spark.driver.query.StreamingQuery.stop`), or at
            the end of the source's data with ``available_now``; either given,
            ``duration_s`` defaults as ``streamscale run --duration``.
        out
            Where the sinks' paths and the dead letters go (default ``checkpoint``).
        spark
            The session (default: the source DataFrame's).
        policy, params, seed
            The policy (``elastic`` unless given; ``static``, …) that plans every keyed
            operator after each batch, its and the controller's settings, its seed.
        state_url
            Where keyed state lives, e.g. ``s3://bucket/prefix?endpoint=…``.
        on_batch
            Called with each committed batch's record.
        executors
            The Spark executors the plan's cores become (a cluster master, the session
            built by :func:`~streamscale.runtime.spark.app.session` with the same value);
            requested and released at batch boundaries.
        resources
            Instead of ``executors``: any
            :class:`~streamscale.runtime.spark.executors.resources.Resources`.

        Returns
        -------
        StreamingQuery
            The running job, once its Spark query started: Spark's ``awaitTermination``,
            ``stop``, ``isActive``, ``lastProgress``, ``recentProgress`` and
            ``exception``, and ``result()`` once it ended (a
            :class:`~streamscale.runtime.spark.driver.result.RunResult`).
        """
        return start_job(
            self._b, checkpoint=checkpoint, duration_s=duration_s, out=out,
            max_batches=max_batches, spark=spark, policy=policy, params=params, seed=seed,
            state_url=state_url, on_batch=on_batch, executors=executors, resources=resources,
        )  # fmt: skip

    def run(
        self,
        *,
        checkpoint: str | Path,
        duration_s: float | None = None,
        out: str | Path | None = None,
        max_batches: int | None = None,
        spark: SparkSession | None = None,
        policy: str | None = None,
        params: Mapping[str, object] | None = None,
        seed: int | None = None,
        state_url: str | None = None,
        on_batch: Callable[[GraphBatch], None] | None = None,
        executors: Executors | None = None,
        resources: Resources | None = None,
    ) -> RunResult:
        """Run the whole job this stream belongs to until it ends: :meth:`start`, then
        ``awaitTermination()``; the keywords are :meth:`start`'s. With neither
        ``max_batches`` nor ``duration_s`` it runs until interrupted (Ctrl-C stops it
        between two batches, then the interrupt goes on), or to the end of the source's
        data with ``available_now``. A failed batch raises its :class:`StreamscaleError`
        (nothing of it was committed; a run on ``checkpoint`` retries it).

        Returns
        -------
        RunResult
            The recent batches (``records``, each a
            :class:`~streamscale.runtime.spark.driver.graph_batch.GraphBatch`) and whole-run
            totals (``batches``: how many committed).

        Examples
        --------
        >>> result = counts.run(checkpoint="ck", max_batches=2)  # doctest: +SKIP
        >>> [b.batch_id for b in result.records]  # doctest: +SKIP
        [0, 1]
        """
        from streamscale.runtime.spark.driver.query import wait_for

        return wait_for(
            self.start(
                checkpoint=checkpoint, duration_s=duration_s, out=out, max_batches=max_batches,
                spark=spark, policy=policy, params=params, seed=seed, state_url=state_url,
                on_batch=on_batch, executors=executors, resources=resources,
            )
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class KeyedStream(SparkStateful["Stream"]):
    """A stream grouped by key columns, as ``df.groupBy(keys)``: Spark's stateful methods
    (:meth:`applyInPandasWithState`, :meth:`transformWithStateInPandas`,
    :meth:`transformWithState`), :meth:`process`, :meth:`agg` or :meth:`window` add the
    keyed operator, elastic: ``instances`` instances of ``shards`` shards each."""

    _s: Stream
    keys: tuple[str, ...]
    instances: int
    shards: int

    @property
    def key(self) -> str:
        """The key column (an operator of a function or processor has one)."""
        return self._one_key("process")

    def _one_key(self, method: str) -> str:
        if len(self.keys) != 1:
            raise StreamscaleError(
                f"{method}() takes one key column (agg() takes several)", item=f"key_by{self.keys}"
            )
        return self.keys[0]

    def _keyed(
        self, fn: Callable[..., object], name: str | None, params: Mapping[str, object]
    ) -> Stream:
        b = self._s._b
        n = b.fresh(name_of(fn, name))
        b.functions[n] = fn
        op = Operator(
            name=n, key=self.key, instances=self.instances, shards=self.shards,
            params=dict(params),
        )  # fmt: skip
        b.add(op, self._s._from, grouping="key")
        return Stream(b, (n,))

    def agg(
        self,
        *aggs: Column,
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
            return WindowedStream(self, (time_col, interval(session_gap, "gap"), None), True)
        assert size is not None
        step = None if slide is None else interval(slide, "slide")
        return WindowedStream(self, (time_col, interval(size, "size"), step))

    def process(
        self, fn: Callable[..., object], *, name: str | None = None, **params: object
    ) -> Stream:
        """A keyed operator ``fn(rows, state: dict, **params) -> pandas.DataFrame | None``.

        ``fn`` may also be a Spark 4 ``StatefulProcessor``; ``params`` are then
        :func:`~streamscale.runtime.spark.compat.processor.from_processor`'s options, and
        ``time_mode`` (Spark's ``timeMode``: ``None``, ``ProcessingTime`` or
        ``EventTime``) is required, as Spark requires it; :meth:`transformWithStateInPandas`
        takes Spark's own arguments instead.
        """
        from streamscale.runtime.spark.compat.processor import from_processor, is_processor

        key = self.key
        if is_processor(fn):
            if "time_mode" not in params:
                raise StreamscaleError(
                    "a StatefulProcessor needs time_mode= (Spark's timeMode: None, "
                    "ProcessingTime or EventTime)",
                    item=f"process({type(fn).__name__})",
                )
            fn, params = from_processor(fn, key, **params), {}  # type: ignore[arg-type]
        return self._keyed(fn, name, params)


@dataclass(frozen=True, slots=True)
class WindowedStream:
    """A keyed stream in event-time windows; :meth:`agg` adds the windowed aggregation."""

    _k: KeyedStream
    spec: tuple[str, str, str | None]
    session: bool = False

    def agg(
        self,
        *aggs: Column,
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


def _add_agg(
    k: KeyedStream,
    aggs: tuple[Column, ...],
    mode: str,
    max_collect: int | None,
    name: str | None,
    window: tuple[str, str, str | None] | None,
    session: bool = False,
    **opts: Any,
) -> Stream:
    keyed = (k.keys, k.instances, k.shards)
    n = add_agg(k._s._b, k._s._from, keyed, aggs, mode, max_collect, name, window, session, **opts)
    return Stream(k._s._b, (n,))


def stream(
    df: DataFrame,
    *,
    name: str = "job",
    trigger_s: float | None = None,
    available_now: bool = RUN_SETTINGS["available_now"].default,
    source: tuple[str, Mapping[str, object]] | None = None,
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
    source).

    Examples
    --------
    A job moves over from Spark by replacing ``events.groupBy("user")``:

    >>> import streamscale  # doctest: +SKIP
    >>> spark = streamscale.session("local[2]")  # doctest: +SKIP
    >>> events = spark.readStream.format("rate").load().selectExpr(
    ...     "CAST(value % 10 AS STRING) AS user", "value")  # doctest: +SKIP
    >>> counts = streamscale.stream(events).key_by("user").applyInPandasWithState(
    ...     running_count, "user string, count long", "total long", "append", "NoTimeout"
    ... )  # doctest: +SKIP
    >>> result = counts.run(checkpoint="ck", max_batches=2)  # doctest: +SKIP
    """
    if not getattr(df, "isStreaming", False):
        raise StreamscaleError(
            "stream() needs a streaming DataFrame (spark.readStream...)", item=name
        )
    b = Builder(name, df, available_now=bool(available_now))
    src: dict[str, object] = {} if trigger_s is None else {"trigger_s": trigger_s}
    if source is not None:
        src.update(declared_source(source, item=name))
    b.add(Operator(name="source", kind="source", params=src), ())
    return Stream(b, ("source",))
