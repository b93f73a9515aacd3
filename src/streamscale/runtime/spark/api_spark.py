"""Spark's stateful ``GroupedData`` methods on a keyed stream, with Spark's signatures.

``streamscale.stream(df).key_by(k)`` takes ``df.groupBy(k)``'s place: its
``applyInPandasWithState``, ``transformWithStateInPandas`` and ``transformWithState``
take Spark's arguments, checked as Spark checks them (a wrong one is refused in one
line naming the method and the argument, before the query starts), and add the
function or processor as an elastic keyed operator whose output has Spark's columns
and types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import GroupedData
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import StructType

__all__ = ["SparkStateful"]

S = TypeVar("S")


class SparkStateful(Generic[S]):
    """Spark's stateful methods of ``GroupedData``; each returns the keyed operator's
    output stream (``S``)."""

    __slots__ = ()

    def _one_key(self, method: str) -> str:
        raise NotImplementedError

    def _keyed(
        self, fn: Callable[..., object], name: str | None, params: Mapping[str, object]
    ) -> S:
        raise NotImplementedError

    def applyInPandasWithState(
        self,
        func: Callable[[tuple[Any, ...], Iterator[pd.DataFrame], Any], Iterable[pd.DataFrame]],
        outputStructType: StructType | str,
        stateStructType: StructType | str,
        outputMode: str,
        timeoutConf: str,
    ) -> S:
        """Spark's ``GroupedData.applyInPandasWithState``, elastic: ``func(key, pdf_iter,
        state)`` gets pyspark's own ``GroupState``; the output has ``outputStructType``.

        Parameters
        ----------
        func
            As Spark's: yields pandas DataFrames for a key, its rows and its state.
        outputStructType, stateStructType
            ``StructType`` or DDL string.
        outputMode
            ``append`` or ``update``.
        timeoutConf
            ``NoTimeout``, ``ProcessingTimeTimeout`` or ``EventTimeTimeout`` (this one
            needs ``withWatermark`` on the input).

        Examples
        --------
        >>> counts = streamscale.stream(events).key_by("user").applyInPandasWithState(
        ...     running_count, "user string, count long", "total long", "append", "NoTimeout"
        ... )  # doctest: +SKIP
        """
        from streamscale.runtime.spark.compat.group_state import apply_in_pandas_with_state

        fn = apply_in_pandas_with_state(
            func, self._one_key("applyInPandasWithState"), outputStructType, stateStructType,
            outputMode, timeoutConf,
        )  # fmt: skip
        return self._keyed(fn, None, {})

    def transformWithStateInPandas(
        self,
        statefulProcessor: StatefulProcessor,
        outputStructType: StructType | str,
        outputMode: str,
        timeMode: str,
        initialState: GroupedData | None = None,
        eventTimeColumnName: str = "",
    ) -> S:
        """Spark's ``GroupedData.transformWithStateInPandas``, elastic: the processor's
        value, list and map states and timers live in the shards that move.

        Parameters
        ----------
        statefulProcessor
            A ``pyspark.sql.streaming.StatefulProcessor``.
        outputStructType
            ``StructType`` or DDL string.
        outputMode
            ``append`` or ``update``.
        timeMode
            ``None``, ``ProcessingTime`` or ``EventTime`` (this one needs
            ``withWatermark`` on the input).
        initialState
            A static DataFrame grouped by the key, given to ``handleInitialState`` in the
            query's first batch.
        eventTimeColumnName
            Not supported: a non-empty name is refused.

        Examples
        --------
        >>> out = streamscale.stream(events).key_by("user").transformWithStateInPandas(
        ...     RunningCount(), "user string, count long", "append", "None"
        ... )  # doctest: +SKIP
        """
        return self._processor(
            statefulProcessor, outputStructType, outputMode, timeMode, initialState,
            eventTimeColumnName, api="pandas",
        )  # fmt: skip

    def transformWithState(
        self,
        statefulProcessor: StatefulProcessor,
        outputStructType: StructType | str,
        outputMode: str,
        timeMode: str,
        initialState: GroupedData | None = None,
        eventTimeColumnName: str = "",
    ) -> S:
        """Spark's ``GroupedData.transformWithState`` (Spark 4.1): as
        :meth:`transformWithStateInPandas`, with ``Row``s in and out of the handlers.

        Examples
        --------
        >>> out = streamscale.stream(events).key_by("user").transformWithState(
        ...     RowCount(), "user string, count long", "append", "None"
        ... )  # doctest: +SKIP
        """
        return self._processor(
            statefulProcessor, outputStructType, outputMode, timeMode, initialState,
            eventTimeColumnName, api="row",
        )  # fmt: skip

    def _processor(
        self,
        processor: StatefulProcessor,
        output: StructType | str,
        mode: str,
        time_mode: str,
        initial: GroupedData | None,
        event_time_column: str,
        *,
        api: str,
    ) -> S:
        from streamscale.runtime.spark.compat.processor import transform_with_state

        method = "transformWithState" if api == "row" else "transformWithStateInPandas"
        fn = transform_with_state(
            processor, self._one_key(method), output, mode, time_mode, initial,
            event_time_column, api=api,
        )  # fmt: skip
        return self._keyed(fn, None, {})
