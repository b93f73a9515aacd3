"""One step of service at every pool: the queue's sample path inside the step.

A step of the kernel (10 ms) lasts many service times of a fast operator
(0.05–1 ms), so a queue observed only at step boundaries misses the queueing
that builds and drains within the step and the mean latency comes out biased
low. This module follows each pool's queue *within* the step instead:

* **Service times** are Erlang-``r`` (``r`` exponential phases of rate
  ``r·μ``): ``r = 1`` is exponential, and the paper's N(c, (0.5c)²) cost is
  taken as Erlang-4, which has the same mean and coefficient of variation
  (``r = round(1/cv²)``). Mean waiting in a single-server queue depends only on
  the first two moments of the service time (Pollaczek–Khinchine), so the mean
  latency of the normal cost model is kept exactly.
* **Uniformisation**: given the step's ``A`` arrivals (Poisson, drawn by the
  kernel) and ``P ~ Poisson(r·μ·dt)`` potential phase completions, the order of
  the ``A + P`` events is a uniformly random interleaving and their times are
  uniform order statistics over the step. For one server the work in phases
  ``W`` is a reflected random walk (an arrival adds ``r``, a phase completion
  removes one when ``W > 0``), computed for all pools at once with a cumulative
  sum and a running minimum; the tuples in the system are ``⌈W/r⌉``.
* **Pools of several cores** (stateless operators: M/M/k) are stepped event by
  event over the same interleaving, each potential completion thinned by
  ``min(n, k)/k``; they use exponential service.
* **Figures**: the expected time-integral of the tuples in the system over the
  step (each of the ``A + P + 1`` gaps between events lasts ``dt/(A + P + 1)``
  in expectation), the completions, and for every arrival the expected sojourn
  given what it finds: ``(W + r)/(r·μ)`` for one server (phases ahead of it,
  the residual of the tuple in service included, plus its own), and
  ``(max(n − k, 0) + 1)/(k·μ) + …`` as the M/M/k conditional sojourn otherwise.

The carried queue enters as an integer number of tuples (stochastic rounding
of the kernel's fluid count); the phases left of the tuple in service are
carried from the previous step (drawn uniformly from ``1 … r`` for a pool that
was idle or is new).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["StepService", "phases", "serve"]


def phases(exponential: bool, cv: float) -> int:
    """Erlang phases ``r`` of a service time with coefficient of variation ``cv``."""
    if exponential or cv <= 0:
        return 1
    return max(1, round(1.0 / (cv * cv)))


@dataclass(frozen=True, slots=True)
class StepService:
    """What one step of service did at each pool.

    ``done``: tuples completed; ``area``: tuple-seconds in the pool (waiting or in
    service) over the step; ``arrival_pool``/``arrival_wait``: for every arrival
    of the step, its pool and its expected sojourn in seconds.
    """

    done: np.ndarray
    area: np.ndarray
    arrival_pool: np.ndarray
    arrival_wait: np.ndarray


def _round(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """Stochastic rounding of non-negative floats to integers (the mean is kept)."""
    base = np.floor(x)
    return (base + (rng.random(x.size) < x - base)).astype(np.int64)


def _interleave(
    rng: np.random.Generator, a: np.ndarray, p: np.ndarray, up: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``+up`` (``a`` of them) and ``−1`` (``p``) in random order, zero-padded."""
    n = a + p
    width = int(n.max())
    col = np.arange(width)
    steps = np.where(col < a[:, None], up, np.where(col < n[:, None], -1, 0)).astype(np.int64)
    keys = rng.random((a.size, width))
    keys[col >= n[:, None]] = 2.0  # padding stays at the end
    order = np.argsort(keys, axis=1)
    return np.take_along_axis(steps, order, axis=1), n


def _ceil_sum(v: np.ndarray, r: int) -> np.ndarray:
    """``Σ_{u=1}^{v} ⌈u/r⌉`` for integers ``v ≥ −1`` (0 for ``v ≤ 0``)."""
    v = np.maximum(v, 0)
    q, s = np.divmod(v, r)
    return r * q * (q + 1) // 2 + s * (q + 1)


def _single(
    rng: np.random.Generator,
    q0: np.ndarray,
    a: np.ndarray,
    rate: np.ndarray,
    r: int,
    dt: float,
    head: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One-server pools: completions, area, and (row, sojourn) of every arrival.

    Arrival times split the step into ``A + 1`` gaps (uniform order statistics,
    drawn as normalised exponential spacings); the phase completions in a gap
    are Poisson with mean ``r·μ·gap``. Between arrivals the work only falls, so
    the queue is Lindley's recursion at the arrivals, ``V_i = max(V_{i−1} + r −
    c_i, 0)`` with ``V`` the work an arrival finds, solved for all pools at once
    with a cumulative sum and a running minimum.
    """
    rows = q0.size
    first = np.where(head > 0, np.minimum(head, r), rng.integers(1, r + 1, size=rows))
    w0 = np.where(q0 > 0, r * (q0 - 1) + first, 0)
    width = int(a.max()) + 1
    col = np.arange(width)
    real = col <= a[:, None]
    spacing = np.where(real, rng.exponential(size=(rows, width)), 0.0)
    gaps = spacing / spacing.sum(axis=1, keepdims=True) * dt
    c = rng.poisson(gaps * (r * rate)[:, None])
    # V_i: the work arrival i finds (i = 1 … A); V_0 = W0 − r so that V_1 = max(W0 − c_1, 0)
    x = r - c[:, :-1]
    s = np.cumsum(x, axis=1)
    low = np.minimum.accumulate(s, axis=1) if width > 1 else s
    v = s + np.maximum((w0 - r)[:, None], -low)
    start = np.concatenate([w0[:, None], v + r], axis=1)  # work at the start of each gap
    end_of = np.maximum(start - c, 0)
    lo = end_of - 1
    area_gap = gaps / (c + 1) * (_ceil_sum(start, r) - _ceil_sum(lo, r))
    area = np.where(real, area_gap, 0.0).sum(axis=1)
    w_end = end_of[np.arange(rows), a]
    left = -(-w_end // r)
    done = q0 + a - left
    arr_rows, arr_cols = np.nonzero(col[:-1] < a[:, None])
    wait = (v[arr_rows, arr_cols] + r) / (r * rate[arr_rows])
    # phases left of the tuple in service, carried to the next step
    new_head = np.where(left > 0, w_end - r * (left - 1), 0)
    return done.astype(float), area, arr_rows, wait, new_head


def _multi(
    rng: np.random.Generator,
    q0: np.ndarray,
    a: np.ndarray,
    rate: np.ndarray,
    k: np.ndarray,
    dt: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pools of ``k`` cores (M/M/k), event by event over the interleaving."""
    p = rng.poisson(rate * k * dt)
    steps, n = _interleave(rng, a, p, 1)
    x = q0.copy()
    acc = q0.astype(float)
    rows_out: list[np.ndarray] = []
    wait_out: list[np.ndarray] = []
    u = rng.random(steps.shape)
    for m in range(steps.shape[1]):
        col = steps[:, m]
        arr = np.flatnonzero(col > 0)
        if arr.size:
            ahead = np.maximum(x[arr] - k[arr] + 1, 0)
            rows_out.append(arr)
            wait_out.append(ahead / (k[arr] * rate[arr]) + 1.0 / rate[arr])
        leave = (col < 0) & (u[:, m] * k < np.minimum(x, k))
        x = x + (col > 0) - leave
        acc += np.where(m < n, x, 0)
    area = acc * dt / (n + 1)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    wait = np.concatenate(wait_out) if wait_out else np.zeros(0)
    return (q0 + a - x).astype(float), area, rows, wait


def serve(
    rng: np.random.Generator,
    queued: np.ndarray,
    arrivals: np.ndarray,
    cores: np.ndarray,
    rate: np.ndarray,
    r: int,
    dt: float,
    head: np.ndarray | None = None,
) -> StepService:
    """Serve every pool for one step of ``dt`` seconds.

    Parameters
    ----------
    rng
        The kernel's random generator.
    queued
        Tuples carried into the step per pool (fluid counts, rounded stochastically).
    arrivals
        Tuples entering each pool during the step (integers).
    cores
        Cores of each pool.
    rate
        Service rate per core of each pool (tuples/s, node speed included).
    r
        Erlang phases of the service time (see :func:`phases`).
    dt
        Step length in seconds.
    head
        Phases left of the tuple in service at each pool (0: unknown or idle);
        updated in place for the next step.

    Returns
    -------
    StepService
        Completions, tuple-seconds and the expected sojourn of every arrival.
    """
    npool = queued.size
    q0 = _round(rng, np.maximum(queued, 0.0))
    a = np.rint(arrivals).astype(np.int64)
    done = np.zeros(npool)
    area = np.zeros(npool)
    pools: list[np.ndarray] = []
    waits: list[np.ndarray] = []
    active = (q0 > 0) | (a > 0)
    one = np.flatnonzero(active & (cores <= 1))
    if one.size:
        h = head[one] if head is not None else np.zeros(one.size, dtype=np.int64)
        d, ar, rows, w, h = _single(rng, q0[one], a[one], rate[one], r, dt, h)
        done[one], area[one] = d, ar
        if head is not None:
            head[one] = h
        pools.append(one[rows])
        waits.append(w)
    many = np.flatnonzero(active & (cores > 1))
    if many.size:
        k = np.rint(cores[many]).astype(np.int64)
        d, ar, rows, w = _multi(rng, q0[many], a[many], rate[many], k, dt)
        done[many], area[many] = d, ar
        pools.append(many[rows])
        waits.append(w)
    return StepService(
        done,
        area,
        np.concatenate(pools) if pools else np.zeros(0, dtype=np.int64),
        np.concatenate(waits) if waits else np.zeros(0),
    )
