"""Model-based core allocation: instances as M/M/k queues in a Jackson network.

Paper 000 (Elasticutor), §4.1. Instance ``j`` receives λ_j tuples/s and each of
its ``k_j`` cores serves μ_j tuples/s; with λ_0 the external arrival rate,

    E[T](k) = (1/λ_0) Σ_j λ_j E[T_j](k_j),
    E[T_j](k) = C(k, a_j) / (k μ_j − λ_j) + 1/μ_j,   a_j = λ_j / μ_j,

where ``C`` is the Erlang C probability of waiting. The greedy allocation starts
from the smallest stable ``k_j = ⌊a_j⌋ + 1`` and adds one core at a time where it
lowers E[T] most, until E[T] ≤ T_max or the cores run out; E[T_j] is convex and
decreasing in ``k``, so this yields the fewest cores meeting T_max (paper 000,
ref. [22]).

Erlang C is computed from the Erlang B recursion ``B(k) = a B(k−1) / (k + a B(k−1))``
and ``C = k B / (k − a (1 − B))``: every step stays in [0, 1], so it is exact for
``k`` in the thousands where the factorial form overflows, and the greedy updates
``B`` in O(1) per added core.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streamscale.errors import ModelError

__all__ = [
    "QueueingAllocation",
    "QueueingProblem",
    "allocate",
    "erlang_b",
    "erlang_c",
    "expected_latency",
    "mmk_latency",
]

Status = Literal["met", "insufficient", "unstable"]


def erlang_b(k: int, a: float) -> float:
    """Erlang B blocking probability for ``k`` servers and offered load ``a`` (stable recursion)."""
    if k < 0 or a < 0:
        raise ValueError("k and a must be >= 0")
    b = 1.0
    for i in range(1, k + 1):
        b = a * b / (i + a * b)
    return b


def _c_from_b(k: int, a: float, b: float) -> float:
    return k * b / (k - a * (1.0 - b))


def erlang_c(k: int, a: float) -> float:
    """Erlang C: probability that an arrival waits in an M/M/k queue (requires ``k > a``)."""
    if not k > a:
        raise ValueError(f"unstable queue: k={k} <= a={a}")
    return _c_from_b(k, a, erlang_b(k, a))


def _latency_from_b(k: int, lam: float, mu: float, b: float) -> float:
    if lam <= 0:
        return 1.0 / mu
    a = lam / mu
    return _c_from_b(k, a, b) / (k * mu - lam) + 1.0 / mu


def mmk_latency(k: int, lam: float, mu: float) -> float:
    """Mean sojourn time E[T_j](k) of an M/M/k queue; ``inf`` when ``k μ ≤ λ``."""
    if not mu > 0:
        raise ValueError("mu must be > 0")
    if math.isinf(mu):
        return 0.0
    if k * mu <= lam:
        return math.inf
    return _latency_from_b(k, lam, mu, erlang_b(k, lam / mu))


@dataclass(frozen=True, slots=True)
class QueueingProblem:
    """Input of :func:`allocate` (paper 000, §4.1).

    Attributes
    ----------
    arrival
        λ_j per instance (tuples/s).
    service
        μ_j per instance: tuples/s one core processes (``inf`` = free operator).
    external
        λ_0, the rate of the input stream (tuples/s).
    latency_target
        T_max in seconds.
    max_cores
        Cores available to all instances together.
    """

    arrival: tuple[float, ...]
    service: tuple[float, ...]
    external: float
    latency_target: float
    max_cores: int

    def __post_init__(self) -> None:
        if len(self.arrival) != len(self.service):
            raise ModelError("arrival and service rates differ in length", item="queueing")
        for j, (lam, mu) in enumerate(zip(self.arrival, self.service, strict=True)):
            if not lam >= 0 or not math.isfinite(lam):
                raise ModelError(
                    f"arrival rate must be finite and >= 0, got {lam}", item=f"instance {j}"
                )
            if not mu > 0:
                raise ModelError(f"service rate must be > 0, got {mu}", item=f"instance {j}")
        if not self.external >= 0:
            raise ModelError("external rate must be >= 0", item="queueing")
        if not self.latency_target > 0:
            raise ModelError("latency target must be > 0", item="queueing")
        if self.max_cores < 0:
            raise ModelError("max_cores must be >= 0", item="queueing")


@dataclass(frozen=True, slots=True)
class QueueingAllocation:
    """Result of :func:`allocate`.

    ``status`` is ``met`` (E[T] ≤ T_max), ``insufficient`` (stable but the cores
    ran out above T_max) or ``unstable`` (even the minimal stable ``k_j = ⌊a_j⌋+1``
    needs more than ``max_cores``; ``cores`` then holds that minimum and
    ``shortfall`` how many cores are missing).
    """

    cores: tuple[int, ...]
    latency: float
    instance_latency: tuple[float, ...]
    status: Status
    shortfall: int = 0

    @property
    def met(self) -> bool:
        return self.status == "met"

    @property
    def stable(self) -> bool:
        return self.status != "unstable"

    @property
    def total(self) -> int:
        return sum(self.cores)


def expected_latency(problem: QueueingProblem, cores: Sequence[int]) -> float:
    """E[T](k) of the Jackson network in seconds (``inf`` if any instance is unstable)."""
    if problem.external <= 0:
        return 0.0
    total = 0.0
    for k, lam, mu in zip(cores, problem.arrival, problem.service, strict=True):
        if lam > 0:
            total += lam * mmk_latency(int(k), lam, mu)
    return total / problem.external


def _fewest_stable(lam: float, mu: float) -> int:
    """The fewest servers with ``k μ > λ`` (1 for an infinitely fast instance). ``λ / μ``
    can round just below an integer that ``k μ`` reaches exactly (λ = 3μ computed as a
    sum): the product decides, as :func:`mmk_latency` does."""
    if math.isinf(mu):
        return 1
    k = math.floor(lam / mu) + 1
    while k * mu <= lam:
        # +1 until k passes what a float holds exactly; beyond, a step of one would not
        # move ``k * mu`` (it looped forever on λ = 1e20, μ = 1), so grow k by a few ulps
        k = max(k + 1, math.ceil(k * (1.0 + 2.0**-50)))
    return k


def allocate(problem: QueueingProblem) -> QueueingAllocation:
    """Greedy minimum-core allocation meeting T_max (paper 000, §4.1).

    Parameters
    ----------
    problem
        Rates, target and available cores.

    Returns
    -------
    QueueingAllocation
        Cores per instance, the reached E[T], per-instance E[T_j] and the status.

    Examples
    --------
    A chain of two instances that every tuple passes (λ_0 = λ_1 = λ_2 = 4 t/s). The start
    is one core and two, the fewest stable: E[T] = 1/(5 − 4) + 0.6 = 1.6 s. The greedy
    adds the core to the first instance (1.6 → 0.84 s), then to the second, and stops
    at 0.61 s ≤ 0.8 s; trying every (k_1, k_2) confirms that 5 cores is the fewest.

    >>> p = QueueingProblem(arrival=(4.0, 4.0), service=(5.0, 3.0), external=4.0,
    ...                     latency_target=0.8, max_cores=8)
    >>> r = allocate(p)
    >>> r.cores, round(r.latency, 3), r.status
    ((2, 3), 0.608, 'met')
    >>> round(expected_latency(p, (1, 2)), 3), round(expected_latency(p, (2, 2)), 3)
    (1.6, 0.838)
    """
    lam = problem.arrival
    mu = problem.service
    m = len(lam)
    k = [_fewest_stable(lam[j], mu[j]) for j in range(m)]
    b = [1.0 if math.isinf(mu[j]) else erlang_b(k[j], lam[j] / mu[j]) for j in range(m)]

    def t_j(j: int, kj: int, bj: float) -> float:
        return 0.0 if math.isinf(mu[j]) else _latency_from_b(kj, lam[j], mu[j], bj)

    def next_b(j: int, kj: int, bj: float) -> float:
        a = lam[j] / mu[j]
        return a * bj / (kj + 1 + a * bj)

    per = [t_j(j, k[j], b[j]) for j in range(m)]
    if sum(k) > problem.max_cores:
        return QueueingAllocation(
            tuple(k),
            _weighted(problem, per),
            tuple(per),
            "unstable",
            sum(k) - problem.max_cores,
        )
    # heap of (−weighted latency drop of one more core, j); entries refreshed lazily
    heap: list[tuple[float, int]] = []
    for j in range(m):
        if lam[j] > 0 and not math.isinf(mu[j]):
            drop = lam[j] * (per[j] - t_j(j, k[j] + 1, next_b(j, k[j], b[j])))
            heap.append((-drop, j))
    heapq.heapify(heap)
    total, latency = sum(k), _weighted(problem, per)
    target = problem.latency_target
    while latency > target and total < problem.max_cores and heap:
        _, j = heapq.heappop(heap)
        b[j] = next_b(j, k[j], b[j])
        k[j] += 1
        old = per[j]
        per[j] = t_j(j, k[j], b[j])
        total += 1
        if problem.external > 0:
            latency -= lam[j] * (old - per[j]) / problem.external
        drop = lam[j] * (per[j] - t_j(j, k[j] + 1, next_b(j, k[j], b[j])))
        heapq.heappush(heap, (-drop, j))
    latency = _weighted(problem, per)  # recompute: the running sum drifts by rounding
    status: Status = "met" if latency <= target * (1 + 1e-12) else "insufficient"
    return QueueingAllocation(tuple(k), latency, tuple(per), status)


def _weighted(problem: QueueingProblem, per: Sequence[float]) -> float:
    if problem.external <= 0:
        return 0.0
    return sum(l * t for l, t in zip(problem.arrival, per, strict=True) if l > 0) / problem.external
