""":class:`StreamingQuery`: a running job, with the methods of Spark's own
``pyspark.sql.streaming.StreamingQuery``.

:meth:`~streamscale.runtime.spark.api.Stream.start` (and
:func:`~streamscale.runtime.spark.driver.dag.start_graph`) returns one once the job's
Spark query runs; the job's driver (the query's drive, the control step after each
batch) runs in a thread of its own until the query ends: it reached its limit, it
was stopped (:meth:`StreamingQuery.stop`, between two batches), it processed what its
source held (``available_now``) or a batch failed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.driver.drive import BatchGate
from streamscale.runtime.spark.driver.graph_batch import GraphBatch
from streamscale.runtime.spark.driver.result import RunResult

__all__ = ["StreamingQuery", "start_query", "wait_for"]


class StreamingQuery:
    """A running job: Spark's ``StreamingQuery`` methods, and its :meth:`result`.

    ``awaitTermination``, ``stop``, ``isActive``, ``exception``, ``id``, ``runId`` and
    ``name`` mean what they mean in Spark; ``lastProgress`` and ``recentProgress`` are
    streamscale's batch records as dicts (a batch's line of ``metrics.jsonl``:
    docs/metrics.md) instead of Spark's progress reports.

    A query ends when it reaches its limit (``max_batches``, ``duration_s``), when
    :meth:`stop` is called (with neither limit given, only then), when it processed what
    its source held (``available_now``) or when a batch fails. It stops between two
    batches: the running batch finishes and commits, and none starts after it; a batch
    still running :data:`~streamscale.runtime.spark.driver.drive.DRAIN_S` seconds (or
    three times the longest recent batch) after the stop is cut short, and is not
    committed: the next run on the checkpoint replays it.

    Examples
    --------
    >>> query = counts.start(checkpoint="ck")  # doctest: +SKIP
    >>> query.awaitTermination(5)  # doctest: +SKIP
    False
    >>> query.lastProgress["batch_id"]  # doctest: +SKIP
    3
    >>> query.stop()  # doctest: +SKIP
    >>> query.result().batches  # doctest: +SKIP
    4
    """

    def __init__(
        self,
        drive: Callable[[threading.Event], RunResult],
        *,
        gate: BatchGate,
        recent: Sequence[GraphBatch],
        spark_query: Callable[[], Any],
    ) -> None:
        self._drive = drive
        self._gate = gate
        self._recent = recent
        self._spark_query = spark_query
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamscale-driver", daemon=True)

    def _run(self) -> None:
        try:
            self._result = self._drive(self._stop)
        except Exception as exc:  # the query's end, kept for awaitTermination and exception
            self._error = exc
        finally:
            self._ended.set()

    @property
    def id(self) -> str:
        """The query's id, which persists across restarts from its checkpoint (Spark's)."""
        return str(self._spark_query().id)

    @property
    def runId(self) -> str:
        """The id of this run of the query (Spark's; a restart gets a new one)."""
        return str(self._spark_query().runId)

    @property
    def name(self) -> str:
        """The name of the job's Spark query."""
        return str(self._spark_query().name)

    @property
    def isActive(self) -> bool:
        """Whether the query runs (it has not ended)."""
        return not self._ended.is_set()

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait for the query to end; raise the error that ended it, if one did.

        Parameters
        ----------
        timeout
            Seconds (> 0) to wait at most; ``None``: until it ends.

        Returns
        -------
        bool or None
            With ``timeout``, whether the query has ended; ``None`` without.

        Raises
        ------
        StreamscaleError
            A batch failed (each call raises it again, as Spark's), or ``timeout`` is
            not a number > 0.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise StreamscaleError(
                f"timeout must be a number of seconds > 0, not {timeout!r}",
                item="awaitTermination",
            )
        ended = self._ended.wait(timeout)
        if ended and self._error is not None:
            raise self._error
        return ended if timeout is not None else None

    def stop(self) -> None:
        """Stop the query between two batches and wait until it ended.

        The running batch finishes and commits first. Called from an ``on_batch``
        callback (inside a batch), it returns at once and the query stops after that
        batch.
        """
        self._stop.set()
        if not self._gate.in_batch():
            self._thread.join()

    def exception(self) -> BaseException | None:
        """The error that ended the query (a failed batch's), or ``None``."""
        return self._error if self._ended.is_set() else None

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        """The latest committed batch's record (its ``metrics.jsonl`` line), or ``None``."""
        recent = _listed(self._recent)
        return json.loads(recent[-1].to_json()) if recent else None

    @property
    def recentProgress(self) -> list[dict[str, Any]]:
        """The recent committed batches' records (at most
        :data:`~streamscale.runtime.spark.driver.history.RECENT_BATCHES`), oldest first."""
        return [json.loads(b.to_json()) for b in _listed(self._recent)]

    def result(self, timeout: float | None = None) -> RunResult:
        """What the run did, once it ended: its recent batches and whole-run figures.

        Parameters
        ----------
        timeout
            Seconds to wait for the end at most; ``None``: until it ends.

        Raises
        ------
        StreamscaleError
            The query has not ended within ``timeout``, or a batch failed (as
            :meth:`awaitTermination`).
        """
        if not self._ended.wait(timeout):
            raise StreamscaleError("the query is still running", item=f"query {self.name}")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def __repr__(self) -> str:
        state = "active" if self.isActive else "ended"
        return f"<StreamingQuery {self.name!r} {state}>"


def start_query(
    drive: Callable[[threading.Event], RunResult],
    *,
    gate: BatchGate,
    recent: Sequence[GraphBatch],
    spark_query: Callable[[], Any],
) -> StreamingQuery:
    """A :class:`StreamingQuery` whose driver thread runs ``drive(stop)``, returned once
    the job's Spark query (``spark_query()``, ``None`` before) runs.

    Raises
    ------
    Exception
        Why the driver ended before a Spark query started.
    """
    query = StreamingQuery(drive, gate=gate, recent=recent, spark_query=spark_query)
    query._thread.start()
    while spark_query() is None and not query._ended.wait(0.02):
        pass
    if spark_query() is None and query._error is not None:
        raise query._error
    return query


def wait_for(query: StreamingQuery) -> RunResult:
    """``query``'s result once it ended; interrupted while it runs (Ctrl-C, or any error
    raised in the waiting thread), the query is stopped first (between two batches) and
    the interrupt goes on."""
    try:
        query.awaitTermination()
    except BaseException:
        if query.isActive:
            query.stop()
        raise
    return query.result()


def _listed(records: Sequence[GraphBatch]) -> list[GraphBatch]:
    """``records`` as a list (the batch thread may append while this reads)."""
    for _ in range(3):
        try:
            return list(records)
        except RuntimeError:
            time.sleep(0)
    return []
