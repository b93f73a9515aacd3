"""Running a policy on the simulator: the control loop on the simulated clock, and its figures.

:func:`simulate` builds a :class:`~streamscale.sim.kernel.Simulator` from the
policy's initial plan, steps it, and calls :func:`streamscale.control.loop.step`
every ``tick_s`` of simulated time with the simulated clock, so the same
controller and policies as on Spark decide. The scheduler's own computing time
is measured around ``Policy.decide`` (wall time; the paper's Table 3 figure).

A policy with ``holds_during_sync`` set (``rc-damped``) is not ticked while an
operator is in RC's global synchronisation, nor for one statistics window after
it; the others, RC as the paper describes it included, decide on whatever the
statistics show, paused operators too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from streamscale.control import Controller, ControllerConfig, Decision, Policy
from streamscale.control.loop import step as control_step
from streamscale.model import Cluster, Plan, Snapshot, Topology
from streamscale.sim.collector import Counters, SimCollector, counters
from streamscale.sim.kernel import Demand, SimConfig, Simulator
from streamscale.sim.realizer import SimRealizer
from streamscale.sim.state import LATENCY_BINS

__all__ = ["Sample", "SimResult", "quantile", "simulate"]


@dataclass(frozen=True, slots=True)
class Sample:
    """Figures over one sampling interval ending at ``time``."""

    time: float
    throughput: float
    mean_latency_ms: float
    p99_ms: float
    cores: int
    migration_mb_s: float
    remote_mb_s: float
    backlog: float


@dataclass(frozen=True, slots=True)
class SimResult:
    """A run's figures over the measured window (after the warm-up)."""

    policy: str
    duration_s: float
    throughput: float
    mean_latency_ms: float
    p50_ms: float
    p99_ms: float
    migration_mb_s: float
    remote_mb_s: float
    scheduler_ms: float
    decisions: int
    applied: int
    shard_moves: int
    remote_moves: int
    sync_ms_per_move: float
    transfer_ms_per_move: float
    pause_s: list[float]
    wall_s: float
    samples: tuple[Sample, ...] = field(default_factory=tuple)


class _Timed:
    """A policy wrapper measuring the wall time of each decision."""

    def __init__(self, policy: Policy) -> None:
        self.inner = policy
        self.name = policy.name
        self.times: list[float] = []

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        t0 = time.perf_counter()
        d = self.inner.decide(snapshot, current, now)
        self.times.append(time.perf_counter() - t0)
        return d

    def shard_bytes(self, instance: str, shard: int) -> int:
        return self.inner.shard_bytes(instance, shard)


def quantile(hist: np.ndarray, q: float) -> float:
    """The ``q`` quantile (seconds) of a latency histogram over :data:`LATENCY_BINS`."""
    total = float(hist.sum())
    if total <= 0:
        return math.nan
    i = int(np.searchsorted(np.cumsum(hist), q * total))
    if i == 0:
        return float(LATENCY_BINS[0])
    if i >= LATENCY_BINS.size:
        return float(LATENCY_BINS[-1])
    return float(math.sqrt(LATENCY_BINS[i - 1] * LATENCY_BINS[i]))


def _paths(sim: Simulator) -> list[list[str]]:
    """Source-to-sink paths through processing operators (for end-to-end latency)."""
    topo = sim.topology
    out: list[list[str]] = []

    def walk(name: str, acc: list[str]) -> None:
        nxt = [e.dst for e in topo.outputs(name) if e.dst in sim.ops]
        if not nxt:
            out.append(acc)
        for d in nxt:
            walk(d, [*acc, d])

    for s in topo.sources:
        for e in topo.outputs(s.name):
            if e.dst in sim.ops:
                walk(e.dst, [e.dst])
    return out


@dataclass
class _Window:
    """Figures between two counter copies, plus latency integrals."""

    sim: Simulator
    base: Counters
    in_sys: dict[str, float]
    hist: dict[str, np.ndarray]
    src_wait: dict[str, float]
    src_hist: dict[str, np.ndarray]

    @classmethod
    def open(cls, sim: Simulator) -> _Window:
        return cls(
            sim,
            counters(sim),
            {n: st.in_system_s for n, st in sim.ops.items()},
            {n: st.hist.copy() for n, st in sim.ops.items()},
            dict(sim.source_wait_s),
            {n: h.copy() for n, h in sim.source_hist.items()},
        )

    def _source(self, cur: Counters) -> tuple[float, np.ndarray]:
        """Mean wait (s) at the sources of the tuples they emitted, and the histogram
        of the waits of those that waited."""
        sim = self.sim
        waited = sum(sim.source_wait_s[n] - self.src_wait[n] for n in sim.source_wait_s)
        emitted = sum(cur.emitted[n] - self.base.emitted[n] for n in sim.source_wait_s)
        hist = sum(
            (sim.source_hist[n] - self.src_hist[n] for n in sim.source_hist),
            np.zeros(LATENCY_BINS.size + 1),
        )
        return (waited / emitted if emitted > 0 else 0.0), hist

    def figures(self, paths: list[list[str]]) -> dict[str, float]:
        sim = self.sim
        cur = counters(sim)
        span = max(cur.time - self.base.time, 1e-12)
        entry = {p[0] for p in paths}
        tput = sum(float(cur.served[n].sum() - self.base.served[n].sum()) for n in entry) / span
        mean: dict[str, float] = {}
        hists: dict[str, np.ndarray] = {}
        for n, st in sim.ops.items():
            done = float(cur.served[n].sum() - self.base.served[n].sum())
            mean[n] = (st.in_system_s - self.in_sys[n]) / done if done > 0 else math.nan
            hists[n] = st.hist - self.hist[n]
        # end-to-end: the wait at the sources plus the slowest source-to-sink path
        # (sum of per-operator figures)
        src_mean, src_hist = self._source(cur)
        held = float(src_hist.sum())
        emitted = sum(cur.emitted[n] - self.base.emitted[n] for n in sim.source_wait_s)
        e2e = src_mean + max((sum(mean[n] for n in p) for p in paths), default=math.nan)

        def tail(q: float) -> float:
            ops = max((sum(quantile(hists[n], q) for n in p) for p in paths), default=math.nan)
            # tuples emitted without waiting count as zero waits
            rank = q * emitted - (emitted - held)
            return ops + (quantile(src_hist, rank / held) if held > 0 and rank > 0 else 0.0)

        p50, p99 = tail(0.5), tail(0.99)
        return {
            "throughput": tput,
            "mean_latency_ms": e2e * 1e3,
            "p50_ms": p50 * 1e3,
            "p99_ms": p99 * 1e3,
            "migration_mb_s": float((cur.migrated - self.base.migrated).sum()) / span / 1e6,
            "remote_mb_s": float((cur.remote - self.base.remote).sum()) / span / 1e6,
        }


def simulate(
    topology: Topology,
    cluster: Cluster,
    demand: Demand,
    policy: Policy,
    initial: Plan,
    *,
    duration_s: float,
    warmup_s: float = 0.0,
    config: SimConfig | None = None,
    controller: ControllerConfig | None = None,
    window_s: float = 1.0,
    tick_s: float = 0.1,
    sample_s: float = 1.0,
    seed: int | None = None,
) -> SimResult:
    """Run ``policy`` from ``initial`` for ``warmup_s + duration_s`` simulated seconds.

    Figures cover the ``duration_s`` after the warm-up; ``samples`` hold one
    :class:`Sample` per ``sample_s`` over the whole run (for the time plots).
    """
    wall0 = time.perf_counter()
    sim = Simulator(topology, cluster, demand, initial, config=config, seed=seed)
    timed = _Timed(policy)
    ctl = Controller(timed, controller or ControllerConfig(1.0, 1.0, 5.0))
    collector = SimCollector(sim, window_s=window_s)
    realizer = SimRealizer(sim)
    paths = _paths(sim)
    end = warmup_s + duration_s
    samples: list[Sample] = []
    next_tick = tick_s
    next_sample = sample_s
    win = _Window.open(sim)
    measured: _Window | None = _Window.open(sim) if warmup_s <= 0 else None
    hold_until = 0.0
    holds = bool(getattr(policy, "holds_during_sync", False))
    while sim.now < end - 1e-9:
        sim.step()
        if holds and any(st.rc_active for st in sim.ops.values()):
            # decisions never rest on statistics of a globally paused operator
            hold_until = sim.now + window_s
        if sim.now >= next_tick - 1e-9:
            if sim.now >= hold_until - 1e-9:
                control_step(ctl, collector, realizer, sim.now)
            collector.record()
            next_tick += tick_s
        if measured is None and sim.now >= warmup_s - 1e-9:
            measured = _Window.open(sim)
        if sim.now >= next_sample - 1e-9:
            f = win.figures(paths)
            samples.append(
                Sample(
                    sim.now,
                    f["throughput"],
                    f["mean_latency_ms"],
                    f["p99_ms"],
                    sim.plan.allocation.total,
                    f["migration_mb_s"],
                    f["remote_mb_s"],
                    sim.in_flight(),
                )
            )
            win = _Window.open(sim)
            next_sample += sample_s
    assert measured is not None
    f = measured.figures(paths)
    moves = sum(st.completed_moves for st in sim.ops.values())
    pauses = [b - a for st in sim.ops.values() for (a, b) in st.reconfigurations]
    return SimResult(
        policy=policy.name,
        duration_s=duration_s,
        throughput=f["throughput"],
        mean_latency_ms=f["mean_latency_ms"],
        p50_ms=f["p50_ms"],
        p99_ms=f["p99_ms"],
        migration_mb_s=f["migration_mb_s"],
        remote_mb_s=f["remote_mb_s"],
        scheduler_ms=float(np.median(timed.times)) * 1e3 if timed.times else math.nan,
        decisions=len(timed.times),
        applied=len(realizer.applied),
        shard_moves=sum(st.shard_moves for st in sim.ops.values()),
        remote_moves=sum(st.remote_moves for st in sim.ops.values()),
        sync_ms_per_move=(
            sum(st.sync_s for st in sim.ops.values()) / moves * 1e3 if moves else 0.0
        ),
        transfer_ms_per_move=(
            sum(st.transfer_s for st in sim.ops.values()) / moves * 1e3 if moves else 0.0
        ),
        pause_s=pauses,
        wall_s=time.perf_counter() - wall0,
        samples=tuple(samples),
    )
