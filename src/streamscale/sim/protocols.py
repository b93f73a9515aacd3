"""Shard reassignment protocols: Elasticutor's local labeling tuple versus RC's global sync.

Paper 000, §3.2 (Elasticutor): routing of the moved shard alone is paused; a
labeling tuple is queued behind the shard's pending tuples at its source task;
once the task has processed everything ahead of the label, the shard's state
is migrated (nothing to transfer when source and destination share a node),
the routing table is updated and the held tuples are released (into the new
task's bounded queue as room allows, see the kernel). Other shards and
upstream operators never stop.

Resource-centric (RC, §2.2 and §5.1): repartitioning at operator level needs a
global synchronisation: every upstream instance pauses (tuples they emit are
held), in-flight tuples of the moved shards are drained, the upstream routing
tables are updated (a cost that grows with the number of upstream instances and
with the shards moved: ``upstream × rc_sync_s + moved × rc_sync_shard_s``),
all the moved states are migrated, and only then does the whole operator
resume.

Both run on the kernel's vectors: ``phase`` 1 = waiting for the label (or the
drain), 2 = state in transfer, 3 = done, waiting for the operator (RC).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from streamscale.sim.state import OpState, SimConfig

__all__ = ["LABEL_DUST", "progress", "remaining_pause", "transfer_step"]

#: Tuples ahead of a label below which it counts as reached (see ``_labelled``).
LABEL_DUST = 0.5


class KernelView(Protocol):
    """What the protocols read and advance of :class:`streamscale.sim.kernel.Simulator`.

    Declared here so that the kernel imports the protocols and not the other way
    round (docs/architecture.md, "Layers").
    """

    config: SimConfig
    now: float
    ops: dict[str, OpState]
    bytes_per_s: np.ndarray
    migrated: np.ndarray
    _upstream_instances: dict[str, int]


def progress(sim: KernelView, st: OpState) -> bool:
    """Advance the reassignment state machines of ``st`` at ``sim.now``; True if routes changed."""
    if st.rc_active or st.protocol == "rc":
        return _rc(sim, st)
    return _ec(sim, st)


def _start(sim: KernelView, st: OpState, idx: np.ndarray, sync_s: float) -> None:
    queued = np.bincount(st.route, st.q, minlength=len(st.pools))
    st.phase[idx] = 1
    st.dest[idx] = st.target[idx]
    # FIFO: the label sits behind everything already queued at the source task
    st.label_left[idx] = queued[st.route[idx]]
    st.ready_at[idx] = sim.now + sync_s
    st.moved_at[idx] = sim.now
    st.shard_moves += int(idx.size)


def _labelled(sim: KernelView, st: OpState) -> np.ndarray:
    """Shards whose label has been reached: everything ahead was served, or the task is idle."""
    cand = np.flatnonzero((st.phase == 1) & (st.ready_at <= sim.now + 1e-12))
    if not cand.size:
        return cand
    queued = np.bincount(st.route, st.q, minlength=len(st.pools))
    # The kernel's queues are fluid, served as whole tuples (stochastic rounding):
    # proportional service leaves fractions of a tuple that a task with no new
    # arrivals (every shard paused or moved away) serves only with the probability
    # of that fraction per step, i.e. 0.001 of a tuple after 100 s on average.
    # Fewer than half a tuple ahead of the label rounds to none: the label is reached.
    reached = (st.label_left[cand] < LABEL_DUST) | (queued[st.route[cand]] < LABEL_DUST)
    return cand[reached]


def _transfer(sim: KernelView, st: OpState, idx: np.ndarray) -> None:
    """Start the state transfers of shards ``idx`` (moves within a node finish at once)."""
    st.phase[idx] = 2
    st.labelled_at[idx] = sim.now
    src = st.pools.node[st.route[idx]]
    dst = st.pools.node[st.dest[idx]]
    st.xfer_left[idx] = np.where(src != dst, st.shard_bytes[idx], 0.0)
    st.remote_moves += int(np.count_nonzero(src != dst))


def transfer_step(sim: KernelView) -> None:
    """Advance every state transfer in flight by one step.

    Concurrent transfers share the NICs fairly: each gets
    ``min(tx bandwidth of its sender / transfers it sends, rx bandwidth of its
    receiver / transfers it receives)`` (full-duplex links), the fluid picture
    of TCP flows sharing 1 Gbps Ethernet.
    """
    parts = []
    for st in sim.ops.values():
        idx = np.flatnonzero((st.phase == 2) & (st.xfer_left > 0))
        if idx.size:
            parts.append((st, idx, st.pools.node[st.route[idx]], st.pools.node[st.dest[idx]]))
    if not parts:
        return
    n = sim.bytes_per_s.size
    src = np.concatenate([p[2] for p in parts])
    dst = np.concatenate([p[3] for p in parts])
    n_out = np.bincount(src, minlength=n)
    n_in = np.bincount(dst, minlength=n)
    rate = np.minimum(sim.bytes_per_s[src] / n_out[src], sim.bytes_per_s[dst] / n_in[dst])
    at = 0
    for st, idx, a, _ in parts:
        r = rate[at : at + idx.size]
        at += idx.size
        sent = np.minimum(st.xfer_left[idx], r * sim.config.dt)
        st.xfer_left[idx] -= sent
        sim.migrated += np.bincount(a, sent, minlength=n)


def _finish(st: OpState, idx: np.ndarray, now: float) -> None:
    st.sync_s += float(np.sum(st.labelled_at[idx] - st.moved_at[idx]))
    st.transfer_s += float(np.sum(now - st.labelled_at[idx]))
    st.completed_moves += int(idx.size)
    st.route[idx] = st.dest[idx]
    # the held tuples stay in ``buf``: the kernel lets them into the new task's
    # bounded queue as room allows (Simulator._release)
    st.phase[idx] = 0


def _ec(sim: KernelView, st: OpState) -> bool:
    start = np.flatnonzero((st.phase == 0) & (st.target != st.route))
    if start.size:
        _start(sim, st, start, sim.config.ec_sync_s)
    busy = int(np.count_nonzero(st.phase))
    if not busy:
        return False
    st.pause_s += busy * sim.config.dt
    lab = _labelled(sim, st)
    if lab.size:
        _transfer(sim, st, lab)
    done = np.flatnonzero((st.phase == 2) & (st.xfer_left <= 1e-9))
    if done.size:
        _finish(st, done, sim.now)
        return True
    return False


def _rc(sim: KernelView, st: OpState) -> bool:
    if not st.rc_active:
        moving = np.flatnonzero(st.target != st.route)
        if not moving.size:
            return False
        upstream = max(sim._upstream_instances.get(st.op.name, 1), 1)
        cfg = sim.config
        # every upstream instance pauses and drains its in-flight tuples (§5.1,
        # Fig. 12a), and every moved shard's routing entry is handed over
        _start(sim, st, moving, upstream * cfg.rc_sync_s + cfg.rc_sync_shard_s * moving.size)
        st.rc_active = True
        st.rc_started = sim.now
        return False
    st.pause_s += st.shards * sim.config.dt
    lab = _labelled(sim, st)
    if lab.size:
        _transfer(sim, st, lab)
    arrived = np.flatnonzero((st.phase == 2) & (st.xfer_left <= 1e-9))
    st.phase[arrived] = 3
    if np.any((st.phase == 1) | (st.phase == 2)):
        return False
    done = np.flatnonzero(st.phase == 3)
    _finish(st, done, sim.now)
    # the whole operator resumes: the held tuples enter their (new) task queues
    # as room allows (Simulator._release)
    st.rc_active = False
    st.reconfigurations.append((st.rc_started, sim.now))
    return True


def remaining_pause(sim: KernelView, st: OpState) -> np.ndarray:
    """Expected extra wait of a tuple admitted now to each shard because of a pause."""
    now = sim.now
    extra = np.zeros(st.shards)
    one = np.flatnonzero(st.phase == 1)
    if one.size:
        src = st.pools.node[st.route[one]]
        dst = st.pools.node[st.dest[one]]
        xfer = np.where(src != dst, st.shard_bytes[one] / sim.bytes_per_s[src], 0.0)
        extra[one] = st.label_left[one] * st.cost + np.maximum(st.ready_at[one] - now, 0.0) + xfer
    two = np.flatnonzero(st.phase == 2)
    if two.size:
        extra[two] = st.xfer_left[two] / sim.bytes_per_s[st.pools.node[st.route[two]]]
    if st.rc_active:
        extra[:] = float(extra.max())
    return extra + st.buf * st.cost
