"""What the job driver's run loop is made of, beside the batch body: the control step
after each committed batch, the query's drive until its stop, the source's backlog, the
run's seed and the source's registration.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Never

from streamscale.control import Controller, Policy
from streamscale.control.loop import step
from streamscale.control.stimulus import InputLog
from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.executors.resources import Resources
from streamscale.settings import Frozen

__all__ = [
    "BatchGate",
    "await_commit",
    "backlog_of",
    "control_step",
    "drive_query",
    "failure_message",
    "register_graph_source",
    "run_seed",
    "share_by_default",
    "stop_between_batches",
    "stop_spark_query",
]


def register_graph_source(spark: Any, job: Any) -> None:
    """Register with ``spark`` the Python source a job's graph reads (its own class, or
    a registered format's, :mod:`~streamscale.runtime.spark.sources.source_registry`)."""
    if job.source_class is not None:
        spark.dataSource.register(job.source_class)
    else:  # a registered source; anything else is one of Spark's own
        from streamscale.runtime.spark.sources.source_registry import register_all

        register_all(spark, only=job.source_format)


def run_seed(seed: int | None) -> int:
    """``seed``, or one drawn from the OS when none is given: the driver passes it to the
    policy and logs it in the controller's header (``metrics.jsonl``), so that a run of
    a randomized planner replays exactly (``streamscale replay``). The draw only names
    the randomness an unseeded run had anyway."""
    return secrets.randbits(32) if seed is None else int(seed)


def share_by_default(policy: str | Policy, params: Frozen, resources: Resources | None) -> Frozen:
    """``params`` with ``share_cores`` on when executors are requested (their cores are
    bought, so a plan holds only the cores its units' work needs) and ``core_group`` the
    executors' cores (they are bought together), where the policy reads the setting but
    was not told (its value is derived: ``None``); unchanged otherwise."""
    from streamscale.control.policies.spec import spec
    from streamscale.runtime.spark.executors.resources import ExecutorResources

    if not isinstance(policy, str) or not isinstance(resources, ExecutorResources):
        return params
    settings = spec(policy).settings
    derived: dict[str, Any] = {}
    if "share_cores" in settings and params.get("share_cores") is None:
        derived["share_cores"] = True
    if "core_group" in settings and params.get("core_group") is None:
        derived["core_group"] = resources.cores_per_executor
    return params.derive(**derived) if derived else params


def control_step(
    controller: Controller,
    collector: Any,
    realizer: Any,
    resources: Resources | None,
    now: float,
    extra: dict[str, Any],
    *,
    log: InputLog | None = None,
) -> list[Any]:
    """One control step after a committed batch; the plans applied.

    Records in ``extra`` what was applied, the decision taken now and, with
    ``resources``, the executors' figures (requested and released between batches,
    once the batch's state committed); with ``log``, the controller's inputs
    (``controller`` the first time, ``inputs``: docs/metrics.md). A policy that cannot
    plan keeps the current plan and the job runs on (``control_error``).
    """
    try:
        applied = step(controller, collector, realizer, now, log=log)
    except StreamscaleError as exc:
        controller.state = "idle"
        applied = []
        extra["control_error"] = str(exc)
        if log is not None:
            log.failed(str(exc))
    if log is not None:
        extra.update(log.drain())
    extra["applied"] = [a.reason for a in applied]
    if controller.history and controller.history[-1][0] == now:
        extra["decision"] = getattr(controller.history[-1][1], "reason", "")
    if resources is not None:
        extra.update(resources.apply(realizer.current(), now))
    return applied


def failure_message(exc: BaseException) -> str:
    """The operator's own error line from a Spark/Py4J failure, else the first line."""
    text = str(exc)
    hits = re.findall(r"^\s*((?:[\w.]+)(?:Error|Exception): .+)$", text, re.MULTILINE)
    hits = [h for h in hits if not h.startswith(("org.apache", "java.", "py4j", "pyspark"))]
    if hits:
        return hits[-1].strip()
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def backlog_of(
    query: Any,
    taken: int,
    *,
    offered: Callable[[float], float] | None = None,
    admitted: Mapping[str, Any] | None = None,
) -> float:
    """Tuples waiting at the query's source beyond the running batch.

    Inside ``foreachBatch`` the last progress is the previous batch's, whose end offset
    is this batch's start. A source that reports its latest offset to Spark (Kafka, the
    files) tells the backlog through Spark's progress. Python sources report none, so
    for a registered source that knows what it offered (``offered(elapsed_s)``, from
    :meth:`SourceEntry.offered
    <streamscale.runtime.spark.sources.source_registry.SourceEntry.offered>`: the
    generator's arrival schedule, trace replay, Nexmark) the backlog is what it offered
    ``now − t0`` after its start beyond the running batch's end offset ``seq``:
    ``admitted`` (Spark's offset log), counted in the first keyed operator's rows: the
    running batch's ``taken`` rows per source tuple it admitted (a query may fan an
    event out into several rows, as Q5's hop windows, or filter most out, as Q8);
    without ``admitted``, the previous batch's end plus ``taken`` (one row a tuple).
    Otherwise (no offered schedule: a caller's DataFrame that declared none) it is 0.
    """
    try:
        src = query.lastProgress["sources"][0]
        end = json.loads(src["endOffset"]) if isinstance(src["endOffset"], str) else None
        raw = src.get("latestOffset")
        latest = json.loads(raw) if isinstance(raw, str) else None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        end = latest = None
    if isinstance(latest, dict) and isinstance(end, dict):
        return float(
            sum(float(latest[k]) - float(end.get(k, 0)) for k in latest if _num(latest[k]))
        )
    if offered is None:
        return 0.0
    per_tuple = 1.0
    if isinstance(admitted, Mapping) and "seq" in admitted:
        start, seq = float(admitted.get("t0", 0.0)), int(admitted["seq"])
        tuples = admitted_tuples(query, admitted) or 0
        if tuples > 0 and taken > 0:
            per_tuple = taken / tuples
    elif isinstance(end, dict) and "seq" in end:
        start, seq = float(end.get("t0", 0.0)), int(end["seq"]) + taken
    else:
        return 0.0
    return float(max(0, int(offered(time.time() - start)) - seq)) * per_tuple


def admitted_tuples(query: Any, admitted: Mapping[str, Any] | None) -> int | None:
    """Source tuples the running batch admitted: its end ``seq`` in Spark's offset log
    (``admitted``) minus the previous batch's end (inside ``foreachBatch`` the last
    progress is the previous batch's); ``None`` when either is unknown (a first batch,
    a source whose offsets carry no ``seq``)."""
    try:
        end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return None
    if not (isinstance(end, dict) and isinstance(admitted, Mapping)):
        return None
    if not (_num(end.get("seq")) and _num(admitted.get("seq"))):
        return None
    return max(0, int(admitted["seq"]) - int(end["seq"]))


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def await_commit(
    query: Any, records: Iterable[Any], *, until: float, clock: Callable[[], float]
) -> bool:
    """Wait (until ``until`` on ``clock``) for Spark to report the last batch the body
    recorded; its progress is reported after its commit log entry. Stopping the query
    as soon as the body returns could interrupt that entry: the next run then replays a
    batch whose state streamscale had committed and whose rows this run had counted
    (the tutorial's restart, counting each run's rows, saw one batch twice under load).
    Returns whether Spark reported it."""
    last = -1
    for _ in range(3):  # the batch thread may append while this reads
        try:
            last = max((int(getattr(r, "batch_id", -1)) for r in list(records)), default=-1)
            break
        except RuntimeError:
            continue
    if last < 0:
        return True
    while True:
        progress = query.lastProgress
        if progress is not None and int(progress.get("batchId", -1)) >= last:
            return True
        if not query.isActive or clock() >= until:
            return False
        time.sleep(0.05)


def drive_query(
    query: Any,
    *,
    stop_at: float,
    done: threading.Event,
    in_batch: threading.Event,
    records: Iterable[Any],
    item: str,
    clock: Callable[[], float] = time.monotonic,
    gate: BatchGate | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Run a streaming query until ``done``, ``stop`` or ``stop_at`` (on ``clock``), then
    stop it.

    With ``gate`` (the query's ``foreachBatch`` function) the stop comes between batches
    (:func:`stop_between_batches`): the running batch finishes and commits, and no other
    one starts. Without it, the query is stopped once no batch runs (``in_batch``) and
    Spark reported the last one; an interrupted batch is not committed and is replayed
    by the next run. A failed batch raises a :class:`StreamscaleError` naming ``item``
    with the operator's own message.
    """
    failure: BaseException | None = None
    try:
        while True:
            try:
                if query.awaitTermination(0.1):
                    break
            except Exception as exc:  # the query died: a batch failed
                failure = exc
                break
            if done.is_set() or clock() >= stop_at or (stop is not None and stop.is_set()):
                if gate is not None:
                    stop_between_batches(query, gate, records, clock=clock)
                else:
                    _stop_when_idle(query, in_batch, records, clock=clock)
                break
    finally:
        if query.isActive:  # left early (an error in this thread): cut the batch short
            if gate is not None:
                gate.close()
                gate.force()
            stop_spark_query(query, gate)
    failure = failure or query.exception()
    if failure is not None:
        err = StreamscaleError(f"batch failed: {failure_message(failure)}", item=item)
        err.__cause__ = failure
        raise err


def _drain_until(records: Iterable[Any], clock: Callable[[], float]) -> float:
    """Until when (on ``clock``) a stop waits for the running batch: three times the
    longest recent batch from now, at least :data:`DRAIN_S`."""
    longest = max((r.duration_s for r in _listed(records)), default=0.0)
    return clock() + max(DRAIN_S, 3.0 * longest)


def _listed(records: Iterable[Any]) -> list[Any]:
    """``records`` as a list (the batch thread may append while this reads)."""
    for _ in range(3):
        try:
            return list(records)
        except RuntimeError:
            continue
    return []


def _stop_when_idle(
    query: Any, in_batch: threading.Event, records: Iterable[Any], *, clock: Callable[[], float]
) -> None:
    wait_until = _drain_until(records, clock)
    while in_batch.is_set() and clock() < wait_until:
        time.sleep(0.01)
    await_commit(query, records, until=wait_until, clock=clock)
    query.stop()


def stop_between_batches(
    query: Any, gate: BatchGate, records: Iterable[Any], *, clock: Callable[[], float]
) -> None:
    """Stop ``query`` between two batches: ``gate`` closes (a batch Spark starts from now
    on runs nothing), the running batch finishes and Spark commits it
    (:func:`await_commit`), then the query stops (:func:`stop_spark_query`).

    A running batch still unfinished after the drain bound (:func:`_drain_until`) is cut
    short: its Spark jobs are cancelled, its state is not committed and the next run on
    the checkpoint replays it.
    """
    gate.close()
    until = _drain_until(records, clock)
    if gate.wait_idle(until, clock=clock):
        await_commit(query, records, until=until, clock=clock)
    else:
        gate.force()
    stop_spark_query(query, gate)


def stop_spark_query(query: Any, gate: BatchGate | None) -> None:
    """``query.stop()``; with ``gate``, from a thread of its own, and once Spark marked the
    query stopped, a batch held at the gate unwinds (:meth:`BatchGate.release`):
    Spark's ``stop`` waits for the query's thread, which waits in the gate."""
    if gate is None:
        query.stop()
        return
    failed: list[BaseException] = []

    def stop() -> None:
        try:
            query.stop()
        except Exception as exc:  # reported below, in the caller's thread
            failed.append(exc)

    t = threading.Thread(target=stop, name="streamscale-query-stop", daemon=True)
    t.start()
    while t.is_alive() and query.isActive:
        time.sleep(0.01)
    gate.release()
    t.join()
    if failed:
        raise failed[0]


#: The least time a stop waits for the running batch to finish (seconds).
DRAIN_S = 30.0


class BatchGate:
    """The ``foreachBatch`` function of a query that stops between batches.

    Runs ``body(df, batch_id)`` for every batch until :meth:`close`. A batch Spark starts
    after that runs nothing: it waits until the query is stopped (:meth:`release`) and
    then unwinds as an interrupted one, so Spark takes it for the stop (its offsets stay
    uncommitted and the next run on the checkpoint replays it). Spark's ``stop()`` never
    meets a batch's own Spark jobs (cancelling those ends in a ``StackOverflowError`` of
    Spark's own check of the interrupted batch's long error message), unless the running
    batch outlasted the drain bound (:meth:`force`): that batch unwinds the same way.
    """

    def __init__(self, body: Callable[[Any, int], None], spark: Any) -> None:
        self.body = body
        self.spark = spark
        self._lock = threading.Condition()
        self._running: int | None = None  # the thread running a batch's body
        self._closed = False
        self._forced = False
        self._released = threading.Event()

    def __call__(self, df: Any, batch_id: int) -> None:
        with self._lock:
            held = self._closed
            if not held:
                self._running = threading.get_ident()
        if held:
            self._unwind()
        try:
            self.body(df, batch_id)
        except Exception:
            if not self._forced:
                raise
            cut = True  # the stop cancelled this batch's jobs: unwind as interrupted
        else:
            cut = False
        finally:
            with self._lock:
                self._running = None
                self._lock.notify_all()
        if cut:
            self._unwind()

    @property
    def closed(self) -> bool:
        """Whether the query is stopping (no batch starts any more)."""
        return self._closed

    def in_batch(self) -> bool:
        """Whether the calling thread runs a batch (an ``on_batch`` callback)."""
        return self._running == threading.get_ident()

    def close(self) -> None:
        """No batch starts from now on."""
        with self._lock:
            self._closed = True

    def wait_idle(self, until: float, *, clock: Callable[[], float] = time.monotonic) -> bool:
        """Wait (until ``until`` on ``clock``) for the running batch to finish; whether it
        did."""
        with self._lock:
            while self._running is not None:
                left = until - clock()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.1))
            return True

    def force(self) -> None:
        """The running batch is cut short by the stop that follows."""
        self._forced = True

    def release(self) -> None:
        """The query is stopped: a batch held at the gate unwinds."""
        self._released.set()

    def _unwind(self) -> Never:
        """End the batch as Spark's stop interrupted it: wait for the stop, then an
        interrupted JVM call in the query's own thread (Python calls from a
        ``foreachBatch`` run in it). Its error carries no stack trace, so that Spark's
        check of the message for the interruption stays short."""
        from py4j.protocol import Py4JJavaError

        self._released.wait(RELEASE_S)
        jvm = self.spark.sparkContext._jvm
        gateway = self.spark.sparkContext._gateway
        jvm.java.lang.Thread.currentThread().interrupt()  # kept: stop() interrupted it
        try:
            jvm.java.lang.Thread.sleep(1)
        except Py4JJavaError as exc:
            exc.java_exception.setStackTrace(gateway.new_array(jvm.java.lang.StackTraceElement, 0))
            raise exc from None
        raise StreamscaleError("the query stopped before this batch ran", item="batch")


#: How long a batch held at a closed gate waits for the query's stop (seconds).
RELEASE_S = 600.0
