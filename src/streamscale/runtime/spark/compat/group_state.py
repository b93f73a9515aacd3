"""An ``applyInPandasWithState`` function, timeouts included, run as a keyed function.

The function gets pyspark's own ``GroupState`` (``pyspark.sql.streaming.state``),
built as Spark's Python worker builds it for ``FlatMapGroupsInPandasWithStateExec``,
so ``exists``, ``get``, ``update``, ``remove``, ``setTimeoutDuration``,
``setTimeoutTimestamp``, ``hasTimedOut``, ``getCurrentWatermarkMs`` and
``getCurrentProcessingTimeMs`` are Spark's code, checks and errors included.
What Spark's JVM side does around it is reproduced here, on the shard's state:

* the state is created afresh for every call: the stored value (or none), the
  batch's processing time and eviction watermark (the query's, ``-1`` without one),
  and no timeout timestamp (``-1``);
* after the call the state is written back as the operator writes it: removed
  without a timeout, the key's entry goes; otherwise it is written when the function
  updated or removed it or set a timeout (a timeout of ``-1`` clears the key's);
  a call that did none of these leaves the stored value *and timeout* as they were;
* keys with rows are called first (their rows as one frame, in arrival order); then
  every key whose timeout is earlier than the batch's processing time
  (``ProcessingTimeTimeout``) or watermark (``EventTimeTimeout``), strictly, is called
  with ``hasTimedOut`` true and, as Spark 4.3's worker does, one empty frame of the
  input's columns;
* with ``EventTimeTimeout`` rows at or behind the previous batch's watermark are
  dropped (late), as ``FlatMapGroupsWithStateExecBase`` drops them only then.

Values live under the key itself in the shard's dict (a tuple, as before timeouts
existed); timeouts are timers of :mod:`~streamscale.runtime.spark.compat.state_timers` (at
the timeout plus one millisecond: due when the timeout is strictly earlier), so
finding the timed-out keys of a shard reads only the buckets due.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pandas as pd

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.compat import state_timers as timers
from streamscale.runtime.spark.compat.spark_args import check_arity, check_output_mode, struct_type

__all__ = ["TIMEOUTS", "apply_in_pandas_with_state", "from_group_state"]

TIMEOUTS = {"notimeout": "NoTimeout", "processingtimetimeout": "ProcessingTimeTimeout",
            "eventtimetimeout": "EventTimeTimeout"}  # fmt: skip
_MODE = {"ProcessingTimeTimeout": "ProcessingTime", "EventTimeTimeout": "EventTime"}
_NO = -1
_WIDTH = 1000

GroupFn = Callable[[tuple[Any, ...], Iterator[pd.DataFrame], Any], Iterable[pd.DataFrame]]


def _call(
    func: GroupFn,
    key: Any,
    frames: list[pd.DataFrame],
    store: dict[Any, Any],
    conf: str,
    now_ms: int,
    wm: int | None,
    timed_out: bool,
    restore: int = _NO,
) -> list[pd.DataFrame]:
    from pyspark.sql import Row
    from pyspark.sql.streaming.state import GroupState

    held = dict.get(store, key)  # a read: not a change
    state = GroupState(
        optionalValue=None if held is None else Row(*held),
        batchProcessingTimeMs=now_ms,
        eventTimeWatermarkMs=_NO if wm is None else wm,
        timeoutConf=conf,
        hasTimedOut=timed_out,
        watermarkPresent=wm is not None,
        defined=held is not None,
        updated=False,
        removed=False,
        timeoutTimestamp=_NO,
        keyAsUnsafe=b"",
        valueSchema=None,
    )
    outs = [o for o in func((key,), iter(frames), state) if len(o)]
    timeout = int(state._timeout_timestamp)
    if state._removed and timeout == _NO:
        store.pop(key, None)
        _set_timeout(store, key, _NO, now_ms)
    elif state._updated or state._removed or timeout != _NO:
        if state.exists:
            store[key] = tuple(state._value)
        else:
            store.pop(key, None)
        _set_timeout(store, key, timeout, now_ms)
    elif restore != _NO:  # untouched: the timeout stays (and is due again next batch)
        _set_timeout(store, key, restore, now_ms)
    return outs


def _set_timeout(store: dict[Any, Any], key: Any, at: int, now_ms: int) -> None:
    for t in timers.key_timers(store, key):
        timers.delete_timer(store, key, t)
    if at != _NO:
        timers.register_timer(store, key, at + 1, _WIDTH, now_ms)


def from_group_state(
    func: GroupFn,
    key: str,
    timeout: str = "NoTimeout",
) -> Callable[..., pd.DataFrame | None]:
    """A keyed function running an ``applyInPandasWithState`` function unchanged.

    Parameters
    ----------
    func
        ``func(key_tuple, frames, state)`` yielding pandas DataFrames, as given to
        ``groupBy(key).applyInPandasWithState``.
    key
        The grouping column.
    timeout
        ``applyInPandasWithState``'s ``timeoutConf``: ``NoTimeout``,
        ``ProcessingTimeTimeout`` or ``EventTimeTimeout`` (or ``GroupStateTimeout.…``).
        With a timeout the function runs on the batch's clock (the runner passes
        ``batch_time_ms`` and ``watermark_ms`` and calls it for every shard of a unit,
        so a quiet key times out in the batch Spark times it out in);
        ``EventTimeTimeout`` needs ``withWatermark`` on the input (refused before the
        query starts otherwise). ``NoTimeout`` reads processing time from the wall
        clock when no batch time is passed.

    Raises
    ------
    StreamscaleError
        An unknown ``timeout``.
    """
    conf = TIMEOUTS.get(str(timeout).split(".")[-1].lower())
    if conf is None:
        raise StreamscaleError(
            f"timeout must be one of {', '.join(TIMEOUTS.values())}", item=str(timeout)
        )

    def run(
        rows: pd.DataFrame,
        state: dict[Any, Any],
        *,
        batch_time_ms: int | None = None,
        watermark_ms: int | None = None,
    ) -> pd.DataFrame | None:
        now = int(time.time() * 1000) if batch_time_ms is None else int(batch_time_ms)
        outs: list[pd.DataFrame] = []
        if len(rows):
            for k, grp in rows.groupby(key, sort=False):
                outs += _call(
                    func, k, [grp.reset_index(drop=True)], state, conf, now, watermark_ms, False
                )
        limit = now if conf == "ProcessingTimeTimeout" else watermark_ms
        if conf != "NoTimeout" and limit is not None:
            for k, due in timers.pop_due(state, limit, _WIDTH):
                empty = pd.DataFrame(columns=list(rows.columns))
                outs += _call(func, k, [empty], state, conf, now, watermark_ms, True, due - 1)
        return pd.concat(outs, ignore_index=True) if outs else None

    run.__name__ = getattr(func, "__name__", "group_state_function")
    if conf != "NoTimeout":
        run.batch_clock = True  # type: ignore[attr-defined]
        run.time_mode = _MODE[conf]  # type: ignore[attr-defined]
        run.drops_late_rows = conf == "EventTimeTimeout"  # type: ignore[attr-defined]
    return run


def apply_in_pandas_with_state(
    func: GroupFn,
    key: str,
    outputStructType: Any,
    stateStructType: Any,
    outputMode: str,
    timeoutConf: str,
) -> Callable[..., pd.DataFrame | None]:
    """``groupBy(key).applyInPandasWithState(func, ...)``'s arguments, checked as Spark
    checks them, as a keyed function (:func:`from_group_state`) whose output has
    ``outputStructType``'s columns and types.

    Raises
    ------
    StreamscaleError
        ``func`` not taking ``(key, pdf_iter, state)``, an ``outputMode`` other than
        ``append`` or ``update``, an unknown ``timeoutConf``, a schema that does not parse.
    """
    method = "applyInPandasWithState"
    check_arity(func, ("key", "pdf_iter", "state"), what=f"{method}: func")
    check_output_mode(outputMode, ("append", "update"), method=method)
    out = struct_type(outputStructType, what="outputStructType", method=method)
    struct_type(stateStructType, what="stateStructType", method=method)
    if str(timeoutConf).split(".")[-1].lower() not in TIMEOUTS:
        raise StreamscaleError(
            f"timeoutConf must be one of {', '.join(TIMEOUTS.values())}",
            item=f"{method}: {timeoutConf!r}",
        )
    run = from_group_state(func, key, timeoutConf)
    run.output_schema = out  # type: ignore[attr-defined]
    return run
