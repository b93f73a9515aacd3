"""Resources: the cores a plan asks for become Spark executors (the realizer's I/O shell).

:class:`FixedResources` is the embedded default: one ``local`` node whose slots are
Spark tasks queueing on ``local[N]``'s cores; nothing is requested or released.

:class:`ExecutorResources` drives a cluster manager that accepts executor requests
(Spark standalone — tested on a loopback cluster —, and wherever Spark's
``CoarseGrainedSchedulerBackend`` serves ``requestTotalExecutors``/``killExecutors``:
YARN and Kubernetes, untested here). Spark's own dynamic allocation must be off. At
each batch boundary — after the batch's state has committed and before the next batch
starts — :meth:`ExecutorResources.apply` turns the plan's cores into
``⌈Σ cores ÷ cores per executor⌉`` executors (within ``[min_executors,
max_executors]``):

* more wanted than alive or pending: ``requestTotalExecutors(wanted)``;
* fewer wanted than alive: the executors whose nodes the plan loads least are killed
  (an executor no unit is placed on first, newest first among equals). Between
  batches no task runs, and every shard's state of the committed batch is in the
  durable state store, so releasing an executor loses nothing; the next batch's
  tasks read their shards from the store wherever they run.

Executors requested but not alive after ``timeout_s`` are reported
(``executors_missing``) and the job runs on with the executors that exist. The live
model (:meth:`cluster`) lists the executors alive now, from Spark's own scheduler.

Placement: each planned node stands for one live executor (a stable slot map,
:mod:`~streamscale.runtime.spark.executors.slots`); :meth:`ExecutorResources.locations` gives
every unit the Spark location of its node's executor, which the keyed stage pins its
task to (:mod:`~streamscale.runtime.spark.executors.pinning`).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamscale.control.sharing import held_cores
from streamscale.control.watch import Floors, learned_startup_s
from streamscale.errors import StreamscaleError
from streamscale.model import Cluster, Node, Plan
from streamscale.model.ids import executor_node
from streamscale.runtime.run_config import RUN_SETTINGS
from streamscale.runtime.spark.executors.slots import (
    assign_slots,
    keepers_first,
    node_demand,
    release_order,
    steer_to_ready,
)
from streamscale.runtime.spark.executors.warm import warm_up

__all__ = [
    "QUICK_START_JVM",
    "ExecutorResources",
    "FixedResources",
    "Resources",
    "capacity_cluster",
    "executor_conf",
    "is_cluster_master",
]


class Resources(Protocol):
    """What the runner calls at batch boundaries to make the plan's cores exist."""

    def cluster(self) -> Cluster:
        """The nodes planning may use (for executors: one node per executor slot)."""
        ...

    def cores(self) -> int:
        """Cores alive now (the physical limit's numerator)."""
        ...

    def apply(self, plan: Plan, now: float) -> Mapping[str, Any]:
        """Request or release resources for ``plan`` (the next batch's); figures to report."""
        ...

    def locations(
        self,
        plan: Plan,
        *,
        units: Sequence[str] | None = None,
        ready: Sequence[str] | None = None,
    ) -> Mapping[str, tuple[str, str]] | None:
        """Unit → (executor id, Spark location) for the units whose task is pinned
        (empty: none pinned, where tasks ran is still measured); ``None``: no executors
        to place on, nothing measured. ``units``: the batch's (default: the plan's);
        ``ready``: the executors ready at the batch's start, as it was sized for them
        (default: read now)."""
        ...

    def close(self) -> None: ...


@dataclass
class FixedResources:
    """A fixed cluster model: nothing to request or release (``local[N]`` or a given file)."""

    model: Cluster
    physical_cores: int

    def cluster(self) -> Cluster:
        return self.model

    def cores(self) -> int:
        return self.physical_cores

    def apply(self, plan: Plan, now: float) -> Mapping[str, Any]:
        return {}

    def locations(
        self,
        plan: Plan,
        *,
        units: Sequence[str] | None = None,
        ready: Sequence[str] | None = None,
    ) -> Mapping[str, tuple[str, str]] | None:
        return None  # one process (local mode) or a fixed model: nothing to pin to

    def close(self) -> None:
        return None


def capacity_cluster(max_executors: int, cores_per_executor: int) -> Cluster:
    """The planning model of an elastic cluster: one node per executor that may exist."""
    return Cluster.build(
        [Node(executor_node(i), cores=cores_per_executor) for i in range(max_executors)]
    )


def _ids(seq: Any) -> list[str]:
    return [str(seq.apply(i)) for i in range(seq.size())]


@dataclass
class ExecutorResources:
    """Executors requested and released through Spark's executor allocation client.

    Parameters
    ----------
    sc
        The job's SparkContext (on a cluster master, dynamic allocation off).
    cores_per_executor
        ``spark.executor.cores``.
    max_executors, min_executors
        Bounds on the executors the job may hold.
    initial_executors
        Executors to hold before the first batch (default ``min_executors``).
    timeout_s
        How long requested executors may take to arrive before they are reported missing.
    pin
        Pin each unit's task to its node's executor (:meth:`locations`); the session
        needs :func:`~streamscale.runtime.spark.executors.pinning.pinning_conf`.
    warm_new
        Start the Python workers of executors that joined since the last batch boundary
        (one small task per core, at the boundary) so that no batch waits for a cold
        executor to fork its workers and import pandas in the middle of a stage.
    """

    sc: Any
    cores_per_executor: int
    max_executors: int
    min_executors: int = RUN_SETTINGS["min_executors"].default
    initial_executors: int | None = None
    timeout_s: float = 60.0
    warm_new: bool = True
    #: set by the watch, which warms arrivals while batches run: an executor is then ready
    #: only once warmed (:meth:`mark_warm`), not merely alive at the boundary before
    ready_when_warmed: bool = False
    clock: Callable[[], float] = time.monotonic
    pin: bool = True
    #: how long :meth:`settle` sees exactly the requested executors before it returns
    settle_s: float = 3.0
    target: int = 0
    requested_at: float | None = None
    #: every total asked of the cluster manager: ``(epoch seconds, executors)``, for billing
    requests: list[tuple[float, int]] = field(default_factory=list)
    added: int = 0
    released: int = 0
    slots: dict[str, str] = field(default_factory=dict)
    #: executors held beyond the plan (warm capacity), and the watch's floors
    standby: int = 0
    floors: Floors = field(default_factory=Floors)
    #: observed start-up seconds of executors, request to ready (the latest 32)
    startups: deque[float] = field(default_factory=lambda: deque(maxlen=32))
    #: executors that arrived: ``(epoch seconds, executor id)``, for the timeline
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    #: requests made between batch boundaries: ``(epoch seconds, executors)``
    mid_batch: list[tuple[float, int]] = field(default_factory=list)
    #: executors a warm-up job finished on (:meth:`mark_warm`)
    warmed: set[str] = field(default_factory=set)
    _seen: set[str] = field(default_factory=set)
    _arrived: set[str] = field(default_factory=set)
    _waiting: deque[float] = field(default_factory=deque)  # request times, oldest first
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _ready: set[str] | None = None  # alive at the boundary before the last one
    _last_boundary: set[str] | None = None
    _start: set[str] = field(default_factory=set)  # alive before the first batch (warmed)
    _asked: dict[str, float] = field(default_factory=dict)  # arrived, not warm: asked at
    _killed: set[str] = field(default_factory=set)  # asked to be killed, still listed

    def __post_init__(self) -> None:
        if not 1 <= self.min_executors <= self.max_executors or self.cores_per_executor < 1:
            raise StreamscaleError(
                "need 1 <= min_executors <= max_executors and cores_per_executor >= 1",
                item="executors",
            )
        jsc = self.sc._jsc.sc()
        if str(self.sc.getConf().get("spark.dynamicAllocation.enabled", "false")) == "true":
            raise StreamscaleError(
                "Spark's dynamic allocation must be off for streamscale to size executors",
                item="spark.dynamicAllocation.enabled",
            )
        if not hasattr(jsc, "requestTotalExecutors"):
            raise StreamscaleError("this Spark cannot request executors", item=self.sc.master)
        start = self.initial_executors or self.min_executors
        self._set(max(self.min_executors, min(self.max_executors, start)))
        self._seen = set(self.alive())
        self._arrived = set(self._seen)
        self._waiting.clear()  # start-up is not an executor's start-up time
        self._last_boundary = set(self._seen)  # warmed before the first batch (run_job)
        self._start = set(self._seen)

    # -- reading the live cluster ------------------------------------------------------
    def alive(self) -> list[str]:
        """Executor ids alive now, oldest first (Spark's scheduler, driver excluded), less
        those this run asked Spark to kill: Spark lists a killed executor until its
        process is gone, and a task steered to it waited out the whole locality wait
        (a 32 s batch of 256 tuples)."""
        ids = self._listed()
        with self._lock:
            self._killed &= set(ids)  # gone: forget
            return [e for e in ids if e not in self._killed]

    def _listed(self) -> list[str]:
        """Every executor Spark's scheduler lists, killed ones until they are gone."""
        ids = _ids(self.sc._jsc.sc().getExecutorIds())
        return sorted(ids, key=lambda x: (len(x), x))

    def _kill(self, ids: Sequence[str]) -> bool:
        """Ask Spark to kill ``ids``; they leave :meth:`alive` at once."""
        ok = bool(self.sc._jsc.sc().killExecutors(self.sc._jvm.PythonUtils.toSeq(list(ids))))
        if ok:
            with self._lock:
                self._killed.update(ids)
        return ok

    def cores(self) -> int:
        return len(self.alive()) * self.cores_per_executor

    def cluster(self) -> Cluster:
        return capacity_cluster(self.max_executors, self.cores_per_executor)

    def settle(self, timeout_s: float) -> bool:
        """Block until exactly the requested executors are alive (arrived, and released ones
        gone); ``False`` on timeout. For start-up, tests and benchmarks; the runner never
        waits."""
        end = self.clock() + timeout_s
        killed: set[str] = set()
        since: float | None = None
        while self.clock() < end:
            alive = self._listed()  # released ones gone, not only asked to go
            if len(alive) == self.target:
                # held for a few seconds: a standalone master launches executors up to
                # spark.cores.max before the first request reaches it, some seconds apart
                since = self.clock() if since is None else since
                if self.clock() - since >= self.settle_s:
                    with self._lock:
                        if self._ready is None:  # before the first batch: all start warm
                            self._last_boundary = set(alive)
                            self._start = set(alive)
                    return True
            else:
                since = None
            excess = [e for e in alive[self.target :] if e not in killed]
            if excess:  # the cluster manager launched more before the request arrived
                self._kill(excess)
                killed.update(excess)
                self._set(self.target)
            time.sleep(0.25)
        return False

    def wait_for(self, n: int, timeout_s: float) -> bool:
        """Block until at least ``n`` executors are alive (start-up); ``False`` on timeout."""
        end = self.clock() + timeout_s
        while self.clock() < end:
            if len(self.alive()) >= n:
                return True
            time.sleep(0.25)
        return False

    # -- acting -------------------------------------------------------------------------
    def wanted(self, plan: Plan) -> int:
        """Executors for the cores ``plan`` holds (its shared slots, else one per unit:
        :func:`~streamscale.control.sharing.held_cores`), plus :attr:`standby`, and at
        least the watch's :attr:`floors` while they hold."""
        cores = held_cores(plan.allocation)
        n = math.ceil(cores / self.cores_per_executor) if cores > 0 else self.min_executors
        n += self.standby
        n = max(n, self.floors.at(self.clock()))
        return max(self.min_executors, min(self.max_executors, n))

    def _request_total(self, n: int) -> None:
        """Ask the cluster manager for ``n`` executors in all."""
        jvm = self.sc._jvm
        empty = jvm.PythonUtils.toScalaMap(jvm.java.util.HashMap())
        if not self.sc._jsc.sc().requestTotalExecutors(int(n), 0, empty):
            raise StreamscaleError(f"the cluster manager refused {n} executors", item="executors")

    def _set(self, n: int) -> None:
        with self._lock:
            self._request_total(n)
            now = time.time()
            alive = len(self.alive())
            for _ in range(max(0, n - alive - len(self._waiting))):
                self._waiting.append(now)
            while self._waiting and alive + len(self._waiting) > n:
                self._waiting.pop()  # withdrawn: the newest requests first
            self.target = n
            self.requested_at = self.clock()
            self.requests.append((now, n))

    def request_more(self, n: int, *, hold_s: float) -> bool:
        """Ask for ``n`` executors in total now, while a batch may be running (the watch's
        mid-batch scale-out); only ever raises the request. The boundary keeps at least
        ``n`` for ``hold_s`` seconds (scale-in waits, as after any scale-up)."""
        with self._lock:
            n = max(self.min_executors, min(self.max_executors, n))
            if n <= self.target:
                return False
            self.floors = self.floors.request(n, until=self.clock() + hold_s)
            self._set(n)
            self.mid_batch.append((time.time(), n))
            return True

    def hold_at_least(self, n: int, *, hold_s: float) -> None:
        """Keep at least ``n`` executors at the boundary for ``hold_s`` seconds: the watch's
        current sizing of the offered load, refreshed at every sample, so scale-in waits
        until the load no longer needs them (the boundary plan, sized from the finished
        batches' busy time alone, released executors the watch asked for again seconds
        later). A mid-batch request's own floor stands beside it until its hold ends
        (:class:`~streamscale.control.watch.Floors`)."""
        with self._lock:
            self.floors = self.floors.need(n, until=self.clock() + hold_s)

    def observe_arrivals(self) -> list[str]:
        """Record executors that arrived since the last call, each with its start-up time
        (requests matched oldest first): request to arrival, or, when arrivals count as
        ready only once warmed (:attr:`ready_when_warmed`), request to the end of their
        warm-up (:meth:`mark_warm`) — registered executors serve nothing before that, and
        on a loaded host the gap was 3 s against 10–15 s; returns their ids."""
        with self._lock:
            new = [e for e in self.alive() if e not in self._arrived]
            now = time.time()
            for e in new:
                self._arrived.add(e)
                self.arrivals.append((now, e))
                if self._waiting:
                    asked = self._waiting.popleft()
                    if self.ready_when_warmed:
                        self._asked[e] = asked
                    else:
                        self.startups.append(now - asked)
            return new

    def startup_s(self, default: float) -> float:
        """The start-up time to size with (:func:`~streamscale.control.watch.learned_startup_s`
        of the latest observed; ``default`` before any)."""
        with self._lock:
            return learned_startup_s(self.startups, default)

    def scale_to(self, n: int) -> list[str]:
        """Hold ``n`` executors (within the bounds) while no batch runs: request more, or
        release the newest beyond ``n``; returns the executors released."""
        n = max(self.min_executors, min(self.max_executors, n))
        alive = keepers_first(self.alive(), self._start)
        excess = alive[n:][::-1]
        if excess and self._kill(excess):
            self.released += len(excess)
        else:
            excess = []
        self._set(n)
        return excess

    def apply(self, plan: Plan, now: float) -> Mapping[str, Any]:
        with self._lock:
            return self._apply(plan)

    def ready_cores(self) -> int:
        """Cores of the executors that were alive at the previous batch boundary and still
        are — they ran (or were warmed during) a whole batch — or that a warm-up finished
        on (:meth:`mark_warm`), so none of their tasks waits for a JVM or Python workers
        to start. Before any boundary: every executor alive."""
        return len(self.ready_executors()) * self.cores_per_executor

    def ready_executors(self, alive: Sequence[str] | None = None) -> list[str]:
        """The executors of :meth:`ready_cores` among ``alive`` (default: alive now),
        oldest first."""
        with self._lock:
            alive = self.alive() if alive is None else list(alive)
            if self._ready is None:
                return alive
            ok = self._ready | self.warmed
            return [e for e in alive if e in ok]

    def cold_executors(self) -> list[str]:
        """Executors alive now and not ready (:meth:`ready_executors`), oldest first."""
        with self._lock:
            alive = self.alive()
            ready = set(self.ready_executors(alive))
            return [e for e in alive if e not in ready]

    def mark_warm(self, ids: list[str]) -> None:
        """Executors a warm-up job has run through the keyed stage's path (their start-up
        time ends here when :attr:`ready_when_warmed`)."""
        with self._lock:
            self.warmed.update(ids)
            now = time.time()
            for e in ids:
                asked = self._asked.pop(e, None)
                if asked is not None:
                    self.startups.append(now - asked)

    def _apply(self, plan: Plan) -> Mapping[str, Any]:
        self.observe_arrivals()
        alive = self.alive()
        boundary = set(alive)
        if self.ready_when_warmed:
            # arrivals are warmed while batches run (the watch): ready once warmed, however
            # long alive — one alive at a boundary may never have run a task (an executor
            # that arrived just before one ran a surge batch's two tasks 26 s, cold)
            boundary &= self._start | self.warmed
        self._ready, self._last_boundary = self._last_boundary, boundary
        new = [e for e in alive if e not in self._seen]
        joined_later = bool(new) and bool(self._seen)
        self._seen.update(alive)
        self.added += len(new)
        want = self.wanted(plan)
        figures: dict[str, Any] = {"executors_wanted": want}
        if joined_later and self.warm_new:
            t = self.clock()
            warm_up(self.sc, len(alive) * self.cores_per_executor)
            figures["warm_up_s"] = self.clock() - t
        demand = node_demand(plan.placement.nodes, self.cluster().names)
        self.slots = assign_slots(self.slots, alive, demand)
        order = release_order(self.slots, keepers_first(alive, self._start), demand)
        excess = order[: max(0, len(alive) - want)]
        if excess:  # killing lowers Spark's target by as many
            ok = self._kill(excess)
            figures["executors_released"] = excess if ok else []
            if ok:
                self.released += len(excess)
                alive = [e for e in alive if e not in excess]
                self.slots = {n: e for n, e in self.slots.items() if e not in excess}
        if want != self.target or excess:
            self._set(want)
        missing = max(0, self.target - len(alive))
        late = self.requested_at is not None and self.clock() - self.requested_at > self.timeout_s
        figures.update(
            executors_alive=len(alive),
            executors_requested=self.target,
            executors_added=new,
            cores_alive=len(alive) * self.cores_per_executor,
        )
        if missing and late:
            figures["executors_missing"] = missing
        return figures

    def locations(
        self,
        plan: Plan,
        *,
        units: Sequence[str] | None = None,
        ready: Sequence[str] | None = None,
    ) -> Mapping[str, tuple[str, str]]:
        """Unit → (executor id, location) for the batch's ``units`` (default: ``plan``'s),
        among the ``ready`` executors (default: :meth:`ready_executors` now).

        Pinned (:attr:`pin`): each unit goes to its node's executor (the slot map).
        Either way, no task goes to an executor that is still warming up (not ready,
        :meth:`ready_executors`): a unit whose executor is cold goes to the ready executor
        with the fewest units (:func:`~streamscale.runtime.spark.executors.slots.steer_to_ready`).
        Unpinned with every executor ready, nothing is pinned. A cold executor's first
        tasks wait for its Python workers and JIT while the batch waits for them (a batch
        whose longest task was busy 5.0 s took 32.1 s, 4 of its 6 tasks on executors that
        had just arrived): Spark hands a pending task to any free slot, and an arriving
        executor's slots are free. With the units pinned to ready executors, each ready
        slot takes its own task first and nothing is left for the cold ones."""
        from streamscale.runtime.spark.executors.pinning import executor_hosts, location

        alive = self.alive()
        live = set(alive)
        ready = [e for e in (self.ready_executors(alive) if ready is None else ready) if e in live]
        if not self.pin and len(ready) == len(alive):
            return {}
        chosen: dict[str, str] = {}
        if self.pin:
            demand = node_demand(plan.placement.nodes, self.cluster().names)
            self.slots = assign_slots(self.slots, alive, demand)
            chosen = {u: self.slots[n] for u, n in plan.placement.nodes.items() if n in self.slots}
        hosts = executor_hosts(self.sc)
        batch = list(units) if units is not None else list(plan.placement.nodes)
        steered = steer_to_ready(batch, chosen, [e for e in ready if e in hosts])
        return {u: (ex, location(hosts[ex], ex)) for u, ex in steered.items()}

    def close(self) -> None:
        return None


#: JVM options of quick-start executors: C1 only (no C2 compilations at start-up), one
#: compiler thread, the serial collector (no parallel GC threads on a shared machine).
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"


def executor_conf(
    cores_per_executor: int,
    max_executors: int,
    *,
    memory: str = "512m",
    pin: bool = True,
    separate_hosts: bool = True,
    quick_start: bool = False,
    steer_wait_s: float | None = 30.0,
) -> dict[str, str]:
    """Spark settings for a job whose executors :class:`ExecutorResources` sizes.

    The placement helper jar is always added (compiled on first use); ``pin`` adds the
    locality wait that makes pinned tasks wait for their executor
    (:func:`~streamscale.runtime.spark.executors.pinning.pinning_conf`); without it no task waits
    for locality (``spark.locality.wait`` 0). ``separate_hosts`` makes executors fetch
    each other's shuffle blocks through the block transfer service even when they share
    a host, as executors on different hosts do: on a loopback cluster Spark would
    otherwise read a co-hosted executor's shuffle files from disk and count every byte
    as local. Executors fork
    their Python workers from :mod:`~streamscale.runtime.spark.keyed.worker_daemon`.

    ``quick_start`` starts executor JVMs with the client compiler only and the serial
    collector (:data:`QUICK_START_JVM`). An executor that joins an idle loopback
    cluster then burns about 2.7 s of CPU before its first tasks run instead of about
    6 s (4 executors, one run each, ``/proc`` CPU times of the executor processes). On
    a real cluster that CPU is the new node's own; when every executor shares one
    small machine (emulated cores), it is taken from the batch the new executors were
    requested for. Long-lived executors on real nodes keep the default JIT.

    Unpinned, ``steer_wait_s`` is how long a task steered off an executor that is still
    warming up (:meth:`ExecutorResources.locations`) waits for its ready executor before
    Spark may run it anywhere; reduce tasks then get no locality preference of Spark's
    own (``spark.shuffle.reduceLocality.enabled`` false), so only steered tasks wait.
    ``None`` leaves every task free to take any slot at once (locality wait 0): a
    steering preference is then a hint, and a batch's task may still start on an
    executor that arrived a second ago (two of a batch's eight tasks did, each busy 16 s
    against the warm executors' 7–11 s, event log of a quick surge run).
    """
    conf = {
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.cores": str(cores_per_executor),
        "spark.cores.max": str(cores_per_executor * max_executors),
        "spark.executor.memory": memory,
        # a released executor's shuffle files go with it; batches never read old shuffles
        "spark.shuffle.service.enabled": "false",
        # workers forked with pandas, pyarrow and streamscale already imported: an
        # executor that joins under load starts its workers in milliseconds
        "spark.python.daemon.module": "streamscale.runtime.spark.keyed.worker_daemon",
    }
    if separate_hosts:
        conf["spark.shuffle.readHostLocalDisk"] = "false"
    if quick_start:
        conf["spark.executor.extraJavaOptions"] = QUICK_START_JVM
    from streamscale.runtime.spark.executors.pinning import pinning_conf

    conf.update(pinning_conf(process_wait_s=30.0 if pin else None))
    if not pin:
        # Unpinned, a reduce task would otherwise wait up to 3 s per locality level for
        # the executors holding its map outputs while other slots idle (a 4-executor
        # batch's tasks launched over 11.6 s, event log); keyed state is in the state
        # store, not in those executors, so a free slot anywhere is as good.
        conf["spark.locality.wait"] = "0s"
        if steer_wait_s is not None:
            conf["spark.locality.wait.process"] = f"{steer_wait_s:g}s"
            conf["spark.shuffle.reduceLocality.enabled"] = "false"
    return conf


def is_cluster_master(master: str) -> bool:
    """Whether ``master`` is served by a cluster manager whose executors streamscale can
    add and remove (:mod:`~streamscale.runtime.spark.cluster.managers`)."""
    from streamscale.runtime.spark.cluster.managers import manager_for

    m = manager_for(master)
    return m is not None and m.elastic
