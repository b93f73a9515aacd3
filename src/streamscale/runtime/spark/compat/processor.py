"""A Spark 4 ``StatefulProcessor`` run unchanged as a streamscale keyed operator.

A PySpark user writes a processor for ``transformWithStateInPandas``:
``init(handle)``, ``handleInputRows(key, rows, timerValues)`` yielding pandas
DataFrames, optionally ``handleExpiredTimer(key, timerValues,
expiredTimerInfo)`` and ``close()``. :func:`from_processor` turns it into the
keyed function ``fn(rows, state) -> DataFrame`` over one shard, the way
:func:`~streamscale.runtime.spark.compat.group_state.from_group_state` adapts an
``applyInPandasWithState`` function: the handle's value, list and map states
and its timers all live in the shard's state dict (see
:mod:`~streamscale.runtime.spark.compat.state_typed`), so streamscale stores,
versions, moves and recovers them with the shard, and a batch's changelog holds
the typed entries it touched.

One call (one shard of one batch): ``init(handle)``; the timers due at the
batch's time fire (``handleExpiredTimer`` for their keys, whether or not the
key has rows in the batch); ``handleInputRows`` runs once per key with rows, in
arrival order; ``close()``. As in Spark, timers fire *after* the batch's input
rows (``timer_order="after_input"``, the default; ``"first"`` fires them before).
A timer registered while timers fire is due from the next batch on.

Time comes from the batch, never from a hidden clock: the function accepts
``batch_time_ms`` and ``watermark_ms`` keywords (a runner that knows its batch
clock passes them; the function's ``batch_clock`` attribute says so), and
otherwise asks its ``clock`` for them from the rows — :func:`column_clock` for
a time carried by the rows (deterministic across replays), :func:`wall_clock`
(the default) for the worker's wall clock. Event-time timers and TTL need a
watermark: without one, only processing time applies. On the DataFrame keyed
stage (linear pipelines and DAG jobs alike) a batch-clocked function is called
for every shard of its unit, rows or not, so a quiet key's timers fire in the
batch they are due; a function with its own ``clock`` fires them with the
shard's next rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat.initial_state import DriverOnly, check_initial_state
from streamscale.runtime.spark.compat.spark_args import check_arity, check_output_mode, struct_type
from streamscale.runtime.spark.compat.state_typed import StatefulHandle

__all__ = [
    "Clock",
    "column_clock",
    "from_processor",
    "is_processor",
    "run_batch",
    "transform_with_state",
    "wall_clock",
]

#: From a shard's rows: (processing time ms, watermark ms or None); None: no time known.
Clock = Callable[[pd.DataFrame], tuple[int, int | None] | None]

_ORDERS = ("first", "after_input")
_APIS = ("pandas", "row")
_OUTPUT_MODES = ("append", "update")
_TIME_MODES = ("None", "ProcessingTime", "EventTime")


def wall_clock(rows: pd.DataFrame) -> tuple[int, int | None]:
    """The worker's wall clock (ms) as processing time; no watermark."""
    del rows
    return int(time.time() * 1000), None


def _ms(col: pd.Series) -> int:
    if pd.api.types.is_datetime64_any_dtype(col):
        return int(col.max().value // 1_000_000)
    return int(pd.to_numeric(col).max())


def column_clock(processing: str, watermark: str | None = None) -> Clock:
    """A clock read from the rows: the largest ``processing`` (and ``watermark``) value, in ms.

    Columns hold milliseconds or timestamps. A batch's rows all carry the same
    value when the source stamps them with the batch's time.
    """

    def clock(rows: pd.DataFrame) -> tuple[int, int | None] | None:
        if not len(rows):
            return None
        return _ms(rows[processing]), None if watermark is None else _ms(rows[watermark])

    return clock


def is_processor(obj: Any) -> bool:
    """Whether ``obj`` is a ``StatefulProcessor`` (pyspark's, or one with its methods)."""
    return callable(getattr(obj, "init", None)) and callable(getattr(obj, "handleInputRows", None))


def _frames(out: Iterable[Any] | None) -> list[pd.DataFrame]:
    """The frames a handler yielded: pandas DataFrames, or ``Row``s (``transformWithState``)."""
    if out is None:
        return []
    frames: list[pd.DataFrame] = []
    rows: list[dict[str, Any]] = []
    for f in out:
        if f is None:
            continue
        if isinstance(f, pd.DataFrame):
            if len(f):
                frames.append(f)
        else:  # a pyspark Row (or any object with asDict)
            rows.append(f.asDict(recursive=True))
    if rows:
        frames.append(pd.DataFrame(rows))
    return frames


def _as_rows(grp: pd.DataFrame) -> Iterable[Any]:
    from pyspark.sql import Row

    return iter([Row(**r) for r in grp.to_dict("records")])


def _timer_values(mode: str, now_ms: int, watermark_ms: int | None) -> TimerValues:
    if mode == "None":
        return TimerValues(-1, -1)
    wm = -1 if mode == "ProcessingTime" or watermark_ms is None else watermark_ms
    return TimerValues(now_ms, wm)


def _fire(processor: Any, handle: StatefulHandle, tv: TimerValues) -> list[pd.DataFrame]:
    expired = getattr(processor, "handleExpiredTimer", None)
    due = handle.popDueTimers()
    if expired is None:
        return []
    outs: list[pd.DataFrame] = []
    for key, at in due:  # as Spark: the timer is listed while it fires, deleted after
        handle.setKey(key)
        handle.firing = at
        try:
            outs += _frames(expired((key,), tv, ExpiredTimerInfo(at)))
        finally:
            handle.firing = None
        handle.deleteTimer(at)
    return outs


def _initial(
    processor: Any, handle: StatefulHandle, rows: pd.DataFrame, tv: TimerValues, api: str
) -> None:
    apply = getattr(processor, "handleInitialState", None)
    if apply is None:
        return
    for part in _as_rows(rows) if api == "row" else (rows,):
        apply((handle.key,), part, tv)


def run_batch(
    processor: Any,
    key: str,
    rows: pd.DataFrame,
    state: dict[Any, Any],
    now: tuple[int, int | None] | None,
    *,
    time_mode: str = "ProcessingTime",
    timer_order: str = "after_input",
    timer_bucket_ms: int = 1000,
    api: str = "pandas",
    initial: list[tuple[Any, pd.DataFrame]] | None = None,
) -> pd.DataFrame | None:
    """One shard's batch through ``processor``; ``now`` is (processing ms, watermark ms).

    With ``now`` ``None`` (no time known) no timer fires and TTL counts from 0.
    ``initial``: the shard's initial state, ``(key, rows)`` per key (batch 0 only):
    ``handleInitialState`` runs for a key before its ``handleInputRows`` (once with the
    key's rows as a DataFrame; once per ``Row`` with ``api="row"``), as Spark runs it.
    """
    proc_ms, wm = now if now is not None else (0, None)
    handle = StatefulHandle(
        state, now_ms=proc_ms, watermark_ms=wm, time_mode=time_mode, timer_bucket_ms=timer_bucket_ms
    )
    tv = _timer_values(handle.time_mode, proc_ms, wm)
    processor.init(handle)
    outs: list[pd.DataFrame] = []
    try:
        if now is not None and timer_order == "first":
            outs += _fire(processor, handle, tv)
        inits = dict(initial or ())
        groups = rows.groupby(key, sort=False) if len(rows) else ()
        for k, grp in groups:
            handle.setKey(k)
            if k in inits:
                _initial(processor, handle, inits.pop(k), tv, api)
            grp = grp.reset_index(drop=True)
            frames = _as_rows(grp) if api == "row" else iter([grp])
            outs += _frames(processor.handleInputRows((handle.key,), frames, tv))
        for k, init in inits.items():  # keys only in the initial state
            handle.setKey(k)
            _initial(processor, handle, init, tv, api)
        if now is not None and timer_order == "after_input":
            outs += _fire(processor, handle, tv)
    finally:
        close = getattr(processor, "close", None)
        if close is not None:
            close()
    return pd.concat(outs, ignore_index=True) if outs else None


def from_processor(
    processor: Any,
    key: str,
    *,
    time_mode: str = "ProcessingTime",
    clock: Clock | None = None,
    timer_order: str = "after_input",
    timer_bucket_ms: int = 1000,
    api: str = "pandas",
    output_mode: str = "append",
    initialState: Any = None,
) -> Callable[..., pd.DataFrame | None]:
    """A keyed function running ``processor`` (a ``transformWithStateInPandas`` processor).

    Parameters
    ----------
    processor
        A ``pyspark.sql.streaming.StatefulProcessor`` (or an object with its methods).
    key
        The grouping column; the processor sees keys as 1-tuples, as in Spark.
    time_mode
        ``"ProcessingTime"``, ``"EventTime"`` or ``"None"`` (as Spark's ``timeMode``).
    clock
        The batch's time from its rows (e.g. :func:`column_clock`). Without one the
        runner's batch time is used (wall time at the batch's start on the driver,
        :func:`wall_clock` when called directly), and the runner also calls the
        function for the unit's shards that got no rows, so their due timers fire in
        that batch; with one, a shard's timers fire with its next rows.
    timer_order
        ``"after_input"`` (Spark's order): due timers fire after the batch's rows;
        ``"first"``: before them (not Spark's order; asked for explicitly).
    timer_bucket_ms
        Width of the buckets indexing timers in the shard state.
    api
        ``"pandas"`` (``transformWithStateInPandas``: ``handleInputRows`` gets pandas
        DataFrames) or ``"row"`` (``transformWithState``, Spark 4.1: an iterator of
        ``Row``s; handlers yield ``Row``s).
    output_mode
        ``"append"`` or ``"update"``, as Spark's ``outputMode`` (the rows are the same).
    initialState
        As ``transformWithStateInPandas``'s: a static DataFrame grouped by the key
        (``df.groupBy("k")``), given to ``handleInitialState`` in the query's first
        batch (see :mod:`~streamscale.runtime.spark.compat.initial_state`).
    """
    if not is_processor(processor):
        raise StreamscaleError(
            "not a StatefulProcessor (needs init and handleInputRows)", item=repr(processor)
        )
    if initialState is not None:
        check_initial_state(initialState)
    if api not in _APIS:
        raise StreamscaleError(f"api must be one of {_APIS}", item=str(api))
    if str(output_mode).lower() not in _OUTPUT_MODES:
        raise StreamscaleError(
            f"output mode must be one of {_OUTPUT_MODES} (as transformWithState)",
            item=str(output_mode),
        )
    if timer_order not in _ORDERS:
        raise StreamscaleError(f"timer_order must be one of {_ORDERS}", item=str(timer_order))
    # Spark's pre-init: init (and close) on the driver, so what Spark refuses there
    # (an unknown time mode, TTL outside processing time) is refused before the query
    processor.init(StatefulHandle({}, now_ms=0, time_mode=time_mode))
    close = getattr(processor, "close", None)
    if close is not None:
        close()
    tick = clock or wall_clock

    def run(
        rows: pd.DataFrame,
        state: dict[Any, Any],
        *,
        batch_time_ms: int | None = None,
        watermark_ms: int | None = None,
        initial_state: list[tuple[Any, pd.DataFrame]] | None = None,
    ) -> pd.DataFrame | None:
        now = (int(batch_time_ms), watermark_ms) if batch_time_ms is not None else tick(rows)
        return run_batch(
            processor,
            key,
            rows,
            state,
            now,
            time_mode=time_mode,
            timer_order=timer_order,
            timer_bucket_ms=timer_bucket_ms,
            api=api,
            initial=initial_state,
        )

    run.__name__ = type(processor).__name__
    run.batch_clock = clock is None  # type: ignore[attr-defined]
    run.time_mode = StatefulHandle({}, now_ms=0, time_mode=time_mode).time_mode  # type: ignore[attr-defined]
    # as TransformWithStateExec: late rows are dropped in event time only
    run.drops_late_rows = run.time_mode == "EventTime"  # type: ignore[attr-defined]
    run.processor = processor  # type: ignore[attr-defined]
    if initialState is not None:  # the driver applies it to batch 0 (not pickled to tasks)
        run.initial_state = DriverOnly(initialState)  # type: ignore[attr-defined]
    return run


def transform_with_state(
    statefulProcessor: Any,
    key: str,
    outputStructType: Any,
    outputMode: str,
    timeMode: str,
    initialState: Any = None,
    eventTimeColumnName: str | None = "",
    *,
    api: str = "pandas",
) -> Callable[..., pd.DataFrame | None]:
    """``groupBy(key).transformWithStateInPandas(...)``'s arguments (``api="row"``:
    ``transformWithState``'s), checked as Spark checks them, as a keyed function
    (:func:`from_processor`) whose output has ``outputStructType``'s columns and types.

    Raises
    ------
    StreamscaleError
        Not a processor, a ``handleInputRows`` not taking ``(key, rows, timerValues)``,
        an ``outputMode`` other than ``append`` or ``update``, an unknown ``timeMode``, a
        schema that does not parse, an ``eventTimeColumnName`` (not supported).
    """
    method = "transformWithState" if api == "row" else "transformWithStateInPandas"
    if not is_processor(statefulProcessor):
        raise StreamscaleError(
            "statefulProcessor must be a StatefulProcessor (init and handleInputRows)",
            item=f"{method}: {type(statefulProcessor).__name__}",
        )
    check_arity(
        statefulProcessor.handleInputRows, ("key", "rows", "timerValues"),
        what=f"{method}: {type(statefulProcessor).__name__}.handleInputRows",
    )  # fmt: skip
    mode = check_output_mode(outputMode, _OUTPUT_MODES, method=method)
    if str(timeMode).lower() not in {m.lower() for m in _TIME_MODES}:
        raise StreamscaleError(
            f"timeMode must be one of {', '.join(_TIME_MODES)}", item=f"{method}: {timeMode!r}"
        )
    if eventTimeColumnName:
        raise StreamscaleError(
            "eventTimeColumnName (a new event time on the output) is not supported",
            item=f"{method}: {eventTimeColumnName!r}",
        )
    out = struct_type(outputStructType, what="outputStructType", method=method)
    run = from_processor(
        statefulProcessor, key, time_mode=timeMode, api=api, output_mode=mode,
        initialState=initialState,
    )  # fmt: skip
    run.output_schema = out  # type: ignore[attr-defined]
    return run
