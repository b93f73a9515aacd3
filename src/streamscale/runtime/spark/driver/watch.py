"""The watch's I/O shell: a driver thread that reads the source while batches run.

Every ``period_s`` it reads what the source offers (:class:`Offered`: the bundled
sources' pure schedules, through the same interface a Kafka source's end offsets would
serve) and what the running batch admitted (the end offset Spark wrote to its offset
log *before* running the batch), feeds :func:`streamscale.control.watch.watch_step`, and
carries out its answer at once: more executors are requested while the batch runs
(:meth:`ExecutorResources.request_more`). It also keeps the live admission limit
(:func:`admission_limit`) in the file the source reads at each batch's start, and
records executors' arrivals, from which the start-up time is learned.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from streamscale.control.forecast import DAY_S, RateHistory, forecast_rate
from streamscale.control.stimulus import watch_input
from streamscale.control.watch import Sample, WatchConfig, WatchState, WatchView, watch_step
from streamscale.errors import StreamscaleError
from streamscale.model.snapshot import batch_headroom
from streamscale.planning.adapters.elasticutor import slo_cycle

__all__ = [
    "GeneratorOffered",
    "Live",
    "Offered",
    "SourceWatch",
    "admission_limit",
    "admission_window_s",
    "admitted_offset",
    "admitted_offset_at",
    "offered_for",
    "warm_executors",
    "warm_keyed_path",
    "write_admission",
]


class Offered(Protocol):
    """Tuples the source has offered by ``now`` (epoch seconds), given the stream's
    start ``t0`` from its offsets; ``None``: unknown."""

    def available(self, now: float, offset: Mapping[str, Any]) -> float | None: ...


@dataclass(frozen=True)
class GeneratorOffered:
    """The generator's (or a trace's) offered tuples: its pure schedule at ``now − t0``."""

    reader_available: Callable[[float], float]

    def available(self, now: float, offset: Mapping[str, Any]) -> float | None:
        t0 = offset.get("t0")
        if not isinstance(t0, int | float):
            return None
        return float(self.reader_available(now - float(t0)))


def offered_for(fmt: str, options: Mapping[str, Any]) -> Offered | None:
    """The :class:`Offered` of a registered source that knows what it offered
    (:mod:`~streamscale.runtime.spark.sources.source_registry`; ``None``: it does not)."""
    from streamscale.runtime.spark.sources.source_registry import source_offered

    available = source_offered(fmt, options)
    return None if available is None else GeneratorOffered(available)


#: seconds between polls for executors that arrived (each gets its warm-up job at once)
_ARRIVAL_POLL_S = 0.1


def admitted_offset(spark_checkpoint: Path) -> dict[str, Any] | None:
    """The end offset of the newest batch in Spark's offset log (written before the batch
    runs: the running batch's), as the source wrote it; ``None`` before the first."""
    got = admitted_offset_at(spark_checkpoint)
    return None if got is None else got[0]


def admitted_offset_at(spark_checkpoint: Path) -> tuple[dict[str, Any], float] | None:
    """:func:`admitted_offset` and when Spark wrote it (the file's modification time,
    epoch seconds): when the running batch fixed its end."""
    d = spark_checkpoint / "offsets"
    try:
        ids = [int(n) for n in os.listdir(d) if n.isdigit()]
    except FileNotFoundError:
        return None
    for b in sorted(ids, reverse=True)[:2]:  # the newest may be mid-write
        try:
            path = d / str(b)
            lines = path.read_text().splitlines()
            out = json.loads(lines[2])
            at = path.stat().st_mtime
        except (OSError, IndexError, ValueError):
            continue
        return (out, at) if isinstance(out, dict) else None
    return None


def admission_window_s(trigger_s: float, factor: float, overhead_s: float = 0.0, *,
                       cap_s: float = math.inf) -> float:  # fmt: skip
    """Seconds of work one batch may admit: ``factor × max(trigger_s, 3 × overhead_s)``,
    at most ``cap_s − overhead_s`` (never below ``factor × trigger_s``).

    A batch admitting one trigger interval of work would spend most of its time on the
    overhead when the overhead is seconds (Spark's planning, offsets, the shuffle, the
    commit), and the limit would cut throughput instead of bounding latency; three
    overheads of work keep a capped batch at least 3/4 work. But the overhead grows when
    the host is loaded, and a window tied to it alone grew to 20 s batches in a surge
    (every tuple of such a batch waits for it to finish, and the next one waits for it to
    start): ``cap_s`` — the catch-up time, within which the backlog is planned to drain —
    bounds the batch's run, work plus overhead.

    >>> admission_window_s(2.0, 1.0)
    2.0
    >>> admission_window_s(2.0, 1.0, 1.5)  # three overheads of work
    4.5
    >>> admission_window_s(2.0, 1.0, 4.0, cap_s=5.0)  # a loaded host: the batch's run bounded
    2.0
    >>> admission_window_s(2.0, 1.0, 1.5, cap_s=5.0)
    3.5
    """
    window = max(trigger_s, 3.0 * max(0.0, overhead_s))
    bound = max(trigger_s, cap_s - max(0.0, overhead_s))
    return max(0.0, factor) * min(window, bound)


def admission_limit(cores: int, service_rate: float | None, trigger_s: float,
                    factor: float, overhead_s: float = 0.0, *,
                    cap_s: float = math.inf) -> int | None:  # fmt: skip
    """Tuples one batch may admit: what ``cores`` process in
    :func:`admission_window_s` seconds (``None``: no limit — factor 0, no rate measured
    yet, or no trigger).

    >>> admission_limit(4, 50.0, 2.0, 1.0)
    400
    >>> admission_limit(4, 50.0, 2.0, 1.0, overhead_s=1.5)  # 4.5 s of work
    900
    >>> admission_limit(4, 50.0, 2.0, 1.0, overhead_s=1.5, cap_s=5.0)  # 3.5 s of work
    700
    """
    if factor <= 0 or service_rate is None or trigger_s <= 0 or cores < 1:
        return None
    if not math.isfinite(service_rate) or service_rate <= 0:
        return None
    window = admission_window_s(trigger_s, factor, overhead_s, cap_s=cap_s)
    return max(1, math.ceil(cores * service_rate * window))


def write_admission(path: Path, limit: int | None) -> None:
    """Atomically replace the admission file (empty: no limit); safe from two threads
    (each writes its own temporary file)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text("" if limit is None else str(limit))
    os.replace(tmp, path)


@dataclass
class Live:
    """What the batch thread tells the watch: the per-core service rate of the last
    batches (the median of the last five: a batch run while executors start on the same
    host measured 21 tuples/s against 34–36 before and after, and the watch sized on it
    asked for 8 executors where 6 served), the cores of the plan in force and the
    batches' overhead (read by the watch thread)."""

    planned_cores: int = 0
    overheads: deque[float] = field(default_factory=lambda: deque(maxlen=5))
    rates: deque[float] = field(default_factory=lambda: deque(maxlen=5))

    def observe(self, *, rows: int, busy_s: float, cycle_s: float, longest_s: float,
                planned_cores: int, in_batch_s: float | None = None,
                trigger_s: float | None = None) -> None:  # fmt: skip
        """One finished batch: its tuples, their busy core-seconds, the time since the
        previous batch ended and its longest task's busy time (what the cycle spent
        besides that task is the overhead: a skewed task's work is not overhead).

        A cycle within a tenth of the trigger ``trigger_s`` may hold a wait for the
        trigger, which is no overhead: then the overhead is ``in_batch_s``, what the batch
        itself spent besides its longest tasks, when it is given. On a replay with a 2 s
        trigger the cycle's figure was 0.96 s (the median) against 0.43 s in the batch,
        and every core was counted for a fifth fewer tuples than it served."""
        if rows > 0 and busy_s > 0:
            self.rates.append(rows / busy_s)
            overhead = cycle_s - longest_s
            if in_batch_s is not None and trigger_s is not None and cycle_s < 1.1 * trigger_s:
                overhead = min(overhead, in_batch_s)
            self.overheads.append(max(0.0, overhead))
        self.planned_cores = planned_cores

    @property
    def service_rate(self) -> float | None:
        """Tuples per second per core: the median of the last batches' (``None``: none)."""
        return statistics.median(self.rates) if self.rates else None

    @property
    def overhead_s(self) -> float:
        return statistics.median(self.overheads) if self.overheads else 0.0


@dataclass
class SourceWatch:
    """The watch thread (see the module docstring); ``start``/``stop`` around a query."""

    offered: Offered
    spark_checkpoint: Path
    resources: Any  # ExecutorResources
    live: Live
    config: WatchConfig
    trigger_s: float
    latency_target_s: float
    catch_up_s: float
    max_utilization: float = 0.9
    theta: float = 1.0
    catch_up_form: str = "drain"
    admission_file: Path | None = None
    warm: bool = True
    clock: Callable[[], float] = time.time
    #: mid-batch requests: ``(epoch seconds, executors, reason, figures)``
    requests: list[tuple[float, int, str, dict[str, Any]]] = field(default_factory=list)
    rate: float | None = None
    #: each sample's inputs and answer (:func:`~streamscale.control.stimulus.watch_input`),
    #: until the batch thread drains them into the batch's metrics line (bounded: a run
    #: that never drains keeps the latest)
    inputs: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=1024))
    #: the load's earlier days on the forecaster's clock (``config.history``)
    history: RateHistory | None = None
    #: the end-to-end latency target the forecast's executors are sized for (``None``: none)
    latency_slo_s: float | None = None
    #: the offered rate seen at each sample, on the forecaster's clock (the last hour's)
    _seen: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4096))
    _state: WatchState = field(default_factory=WatchState)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _limit: int | None = -1
    #: executors with a warm-up job in flight
    _warming: set[str] = field(default_factory=set)
    _warm_lock: threading.Lock = field(default_factory=threading.Lock)
    #: the watch thread and the batch thread both rewrite the admission file
    _admission_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> SourceWatch:
        self._thread = threading.Thread(target=self._run, name="streamscale-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _run(self) -> None:
        period = self.config.period_s(self.trigger_s)
        fast = min(period, _ARRIVAL_POLL_S)
        last = -math.inf
        while not self._stop.wait(fast):
            try:
                now = time.monotonic()
                if now - last >= period - 1e-9:
                    last = now
                    self.tick()
                elif self.warm:  # arrivals are warmed within a fast poll, not a period
                    self._warm()
            except Exception as exc:  # a failed read must never stop the job; say why
                self.requests.append((self.clock(), -1, f"watch error: {exc}", {}))

    def drain_inputs(self) -> list[dict[str, Any]]:
        """The samples logged since the last call (oldest first), for a replay."""
        out = []
        while self.inputs:
            out.append(self.inputs.popleft())
        return out

    def update_admission(self) -> int | None:
        """Rewrite the admission file for the cores that will run the next batch."""
        if self.admission_file is None:
            return None
        with self._admission_lock:
            return self._update_admission(self.admission_file)

    def _update_admission(self, path: Path) -> int | None:
        # the cores that will run the next batch: executors still cold are folded out
        cores = self.resources.ready_cores()
        if self.live.planned_cores > 0:
            cores = min(cores, self.live.planned_cores)
        limit = admission_limit(cores, self.live.service_rate, self.trigger_s,
                                self.config.admission, self.live.overhead_s,
                                cap_s=self.catch_up_s)  # fmt: skip
        if limit is not None and self.rate is not None and self.rate > 0:
            # at least one trigger interval of the offered load: a service rate measured
            # on tiny batches (per-task costs dominate them) would otherwise shrink the
            # next batches further — a run whose first batch took 2 tuples then admitted
            # 80-100 a batch at 100 t/s offered while its backlog grew to 11,000
            limit = max(limit, math.ceil(self.rate * self.trigger_s))
        if limit != self._limit:
            write_admission(path, limit)
            self._limit = limit
        return limit

    def tick(self) -> None:
        """One sample: arrivals, the admission file, and a request if the load needs one."""
        self.resources.observe_arrivals()
        if self.warm:
            self._warm()
        self.update_admission()
        got = admitted_offset_at(self.spark_checkpoint)
        if got is None or not isinstance(got[0].get("seq"), int | float):
            return
        offset, fixed_at = got
        now = self.clock()
        available = self.offered.available(now, offset)
        if available is None:
            return
        res = self.resources
        view = WatchView(
            service_rate=self.sizing_rate(),
            cores_alive=len(res.alive()) * res.cores_per_executor,
            executors_requested=res.target,
            cores_per_executor=res.cores_per_executor,
            max_executors=res.max_executors,
            startup_s=res.startup_s(self.config.startup_s),
            trigger_s=self.trigger_s,
        )
        view = replace(view, forecast_peak=self.foresee(now, offset, view.startup_s),
                       forecast_capacity=self.cycle_capacity())  # fmt: skip
        sample = Sample(now, available, float(offset["seq"]), max(0.0, now - fixed_at))
        util = self.sizing_utilization()
        self._state, request = watch_step(
            self._state, sample, view, config=self.config,
            latency_target_s=self.latency_target_s, catch_up_s=self.catch_up_s,
            max_utilization=util, theta=self.theta,
            catch_up_form=self.catch_up_form,
        )  # fmt: skip
        samples = self._state.samples
        if len(samples) >= 2 and samples[-1].now > samples[0].now:
            self.rate = (samples[-1].available - samples[0].available) / (
                samples[-1].now - samples[0].now
            )
        self.inputs.append(
            watch_input(
                sample, view, request, config=self.config,
                latency_target_s=self.latency_target_s, catch_up_s=self.catch_up_s,
                max_utilization=util, theta=self.theta,
                catch_up_form=self.catch_up_form,
            )
        )  # fmt: skip
        if self._state.need > 0:
            res.hold_at_least(self._state.need, hold_s=3.0 * self.config.period_s(self.trigger_s))
        if request is not None and res.request_more(request.executors, hold_s=self.hold_s):
            self.requests.append((now, request.executors, request.reason, request.figures))

    def foresee(self, now: float, offset: Mapping[str, Any], startup_s: float) -> float | None:
        """The offered rate's forecast peak over the next start-up and trigger
        (:func:`~streamscale.control.forecast.forecast_rate`), from the rates seen so far
        and the history; ``None`` when the forecast is off. Its clock is the source's
        (seconds since the stream's start) when the history is a replay's
        (``history_origin``), else the wall clock."""
        if not self.config.forecast:
            return None
        t0 = offset.get("t0")
        clock = (
            now - float(t0) if self.config.history_origin and isinstance(t0, int | float) else now
        )
        if self.rate is not None:
            self._seen.append((clock, self.rate))
        horizon = startup_s + self.trigger_s
        scale = self.config.time_scale
        # the level: the last quarter-hour of the load's own time (a burst of half an hour
        # raised an hour's level for the half hour after it, and held five executors
        # where one served), or four horizons of the trend
        level = max(900.0 / scale, horizon) if self.history is not None else 4.0 * horizon
        while self._seen and self._seen[0][0] < clock - level:
            self._seen.popleft()
        f = forecast_rate(list(self._seen), clock, horizon, history=self.history,
                          period_s=DAY_S / scale, level_s=level)  # fmt: skip
        return None if f.method == "none" else f.peak

    def cycle_capacity(self) -> float | None:
        """Tuples/s a core serves over the batch cycle the latency target allows: the busy
        rate times that cycle's headroom (:func:`~streamscale.model.snapshot.batch_headroom`
        of the batches' overhead over half the target, or the trigger), at most
        ``max_utilization`` of it — the bound the boundary packs units at, the smaller of
        the two; ``None`` without a target or a measured rate."""
        mu = self.live.service_rate
        if self.latency_slo_s is None or mu is None:
            return None
        cycle = slo_cycle(self.trigger_s, self.latency_slo_s)
        return mu * min(self.max_utilization, batch_headroom(self.live.overhead_s, cycle))

    def sizing_utilization(self) -> float:
        """The utilization bound the reactive sizing divides by: none (1) when it sizes on
        :meth:`cycle_capacity`, which holds it already — dividing again sized a surge of
        238 tuples/s at 39 a core (θ = 1.2) for 9 cores, 8 without it — else
        ``max_utilization``."""
        return 1.0 if self.cycle_capacity() is not None else self.max_utilization

    def sizing_rate(self) -> float | None:
        """Tuples per second a core sustains, as the reactive sizing counts it: over the
        cycle the latency target allows (:meth:`cycle_capacity`) when there is a target,
        else across trigger-long batches (:meth:`effective_rate`). With a target of five
        triggers, sizing on the trigger's cycle counted a core for 35 tuples/s where
        batches stretched within the target serve 37–41, and asked for a third executor
        for a rate two served."""
        capacity = self.cycle_capacity()
        return capacity if capacity is not None else self.effective_rate()

    def effective_rate(self) -> float | None:
        """Tuples per second a core sustains across batches: the busy-time rate times the
        share of a capped batch that is work, ``W / (W + overhead)`` with ``W`` the
        admission window — sizing on the busy-time rate alone would leave every batch's
        overhead uncovered and the backlog growing."""
        mu = self.live.service_rate
        if mu is None:
            return None
        o = self.live.overhead_s
        w = admission_window_s(self.trigger_s, max(self.config.admission, 1e-9), o,
                               cap_s=self.catch_up_s)  # fmt: skip
        return mu * w / (w + o) if w + o > 0 else mu

    def _warm(self) -> None:
        """Warm the executors that are alive and not ready yet, while the batch runs: a
        small job through the keyed stage's path (:func:`warm_executors`), its tasks pinned
        to those executors, two per core. When it is done, the executors its tasks ran on
        count as ready (:meth:`ExecutorResources.mark_warm`) for folding, steering and
        the admission limit (:attr:`ExecutorResources.warm_new` is off under the watch);
        one that no task reached is tried again at the next poll. An unpinned warm job
        (the shape before) ran where slots were free — in a surge batch's event log, on
        the old executors — and the new one counted as ready while still cold: its two
        keyed tasks ran 26 s (deserialization 4.8 s) against 3–4 s on warm executors.
        Arrivals are polled every :data:`_ARRIVAL_POLL_S` and each gets its own job at
        once: a batch's unsteered stage (the source's scan) takes a new executor's free
        slots the moment it registers, and one warm job at a time left an arrival 3 s
        unwarmed while another's job ran — long enough for a 2-task map stage to put a
        task on it (11.4 s, against 0.2 s on a warm executor)."""
        res = self.resources
        with self._warm_lock:
            cold = [e for e in res.cold_executors() if e not in self._warming]
            self._warming.update(cold)
        if not cold:
            return

        def run(executor: str) -> None:
            try:
                res.mark_warm(sorted(warm_executors(res.sc, [executor], res.cores_per_executor)))
            finally:
                with self._warm_lock:
                    self._warming.discard(executor)

        for e in cold:  # one job each: a job waiting for an executor that went away
            # (its locality wait) must not hold the others' warm-up
            threading.Thread(target=run, args=(e,), name="streamscale-warm", daemon=True).start()

    @property
    def hold_s(self) -> float:
        """How long the boundary keeps a mid-batch request: the catch-up time plus the
        start-up time, so the executors serve the backlog they were asked for."""
        return self.catch_up_s + self.resources.startup_s(self.config.startup_s)


def _touch(frames: Any) -> Any:
    import streamscale.runtime.spark.keyed.keyed  # noqa: F401  (what a keyed task imports)

    for f in frames:
        yield f.iloc[:0]


def warm_keyed_path(sc: Any, tasks: int) -> bool:
    """Run ``tasks`` tiny tasks through the keyed stage's path — a shuffle into
    ``mapInPandas`` (Arrow batches into a forked Python worker that imports the keyed
    operator) — on whatever slots are free, which while a batch runs are the new
    executors'. A cold executor's first keyed task ran ~3× as long as a warm one's on
    this host (the surge benchmark's event log: 29–33 s against 10–11 s for the same
    rows, the JVM loading the SQL, shuffle and Arrow classes and starting its Python
    worker), and the batch waits for its slowest task; warming only Python workers
    through an RDD job left that JVM path cold. ``False``: the job did not run."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    n = max(1, int(tasks))
    try:
        spark = SparkSession.builder.getOrCreate()
        frame = spark.range(0, n * 64, 1, n).repartition(n, F.col("id"))
        frame.mapInPandas(_touch, "id long").collect()
    except Exception:  # the context is stopping: nothing to warm
        return False
    return True


def warm_executors(sc: Any, executors: Sequence[str], cores: int) -> set[str]:
    """Warm ``executors`` through the keyed stage's path (as :func:`warm_keyed_path`),
    with ``cores`` tasks for each pinned to it (:func:`~streamscale.runtime.spark.executors.pinning.pin`;
    the steering's process-locality wait keeps them for it); returns the executors the
    tasks ran on. Without the placement helper on the classpath the job runs unpinned
    and every executor named counts as warmed (the best that session can know)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streamscale.runtime.spark.executors.pinning import (
        executor_hosts,
        location,
        pin,
        reduce_runs,
    )

    hosts = executor_hosts(sc)
    targets = [e for e in executors if e in hosts]
    if not targets:
        return set()
    locs = [location(hosts[e], e) for e in targets for _ in range(max(1, int(cores)))]
    n = len(locs)
    group = f"streamscale-warm-{threading.get_ident()}-{time.monotonic_ns()}"
    try:
        spark = SparkSession.builder.getOrCreate()
        frame = spark.range(0, n * 64, 1, n).repartition(n, F.col("id"))
        try:
            frame = pin(frame, locs)
        except StreamscaleError:  # no placement helper: warm where slots are free
            return set(targets) if warm_keyed_path(sc, n) else set()
        sc.setJobGroup(group, "streamscale warm-up", interruptOnCancel=False)
        frame.mapInPandas(_touch, "id long").collect()
    except Exception:  # the context is stopping: nothing to warm
        return set()
    return {r.executor for r in reduce_runs(sc, group, n)} & set(targets)


def load_history(config: WatchConfig) -> RateHistory | None:
    """The forecast's history (``config.history``, a ``timestamp,value`` CSV) on the
    forecaster's clock: the source's, with ``history_origin`` at second
    ``history_origin_s`` and ``time_scale`` history seconds a second, or the wall clock
    (UTC) without an origin; one-line errors naming the file or the origin."""
    from datetime import datetime

    from streamscale.runtime.spark.sources.rate_trace import read_trace_rows

    if config.history is None:
        return None
    rows = read_trace_rows(config.history)
    if config.history_origin is None:
        return RateHistory.from_rows(rows, origin=datetime(1970, 1, 1))
    try:
        origin = datetime.fromisoformat(config.history_origin)
    except ValueError:
        raise StreamscaleError(
            "not a timestamp", item=f"history_origin {config.history_origin!r}"
        ) from None
    return RateHistory.from_rows(rows, origin=origin, scale=config.time_scale,
                                 at_s=config.history_origin_s)  # fmt: skip


def split_watch_params(
    params: Mapping[str, Any] | None,
) -> tuple[WatchConfig, dict[str, Any]]:
    """The watch's settings out of ``params`` (checked), and the rest."""
    from streamscale.control.watch import WATCH_SETTINGS

    rest = dict(params or {})
    mine = {k: rest.pop(k) for k in list(rest) if k in WATCH_SETTINGS}
    return WatchConfig.from_params(mine), rest


def make_watch(
    config: WatchConfig,
    *,
    policy: Any,
    policy_params: Mapping[str, Any],
    resources: Any,
    source_format: str,
    source_options: Mapping[str, Any],
    checkpoint: Path,
    trigger_s: float,
    admission: bool = True,
) -> tuple[SourceWatch | None, dict[str, str]]:
    """The watch for a run, and the source options it adds (the admission file); ``None``
    when the run has nothing to watch: no executors to request (a fixed cluster), a
    policy that does not size cores from load, or a source with no :class:`Offered`.
    ``admission=False``: no admission limit (the source is read by a caller's
    DataFrame, which takes no option of the run's)."""
    from streamscale.planning.adapters.elasticutor import SETTINGS
    from streamscale.runtime.spark.executors.resources import ExecutorResources

    offered = offered_for(source_format, source_options)
    if (
        not isinstance(resources, ExecutorResources)
        or not getattr(policy, "mid_batch", False)
        or offered is None
    ):
        return None, {}
    resources.standby = config.standby_executors
    warm = resources.warm_new
    resources.warm_new = False  # the watch warms arrivals while the batch runs instead
    resources.ready_when_warmed = warm
    s = SETTINGS.read(policy_params)
    admission = checkpoint / "admission" if admission and config.admission > 0 else None
    watch = SourceWatch(
        offered=offered,
        spark_checkpoint=checkpoint / "spark",
        resources=resources,
        live=Live(),
        config=config,
        trigger_s=trigger_s,
        latency_target_s=s["latency_target_ms"] / 1000.0,
        catch_up_s=s["catch_up_s"],
        max_utilization=s["max_utilization"],
        theta=s["theta"],
        catch_up_form=s["catch_up_form"],
        admission_file=admission,
        warm=warm,
        history=load_history(config),
        latency_slo_s=s["latency_slo_s"],
    )
    if admission is None:
        return watch, {}
    checkpoint.mkdir(parents=True, exist_ok=True)
    write_admission(admission, None)
    return watch, {"admission_file": str(admission.resolve())}
