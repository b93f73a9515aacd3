"""CPU-to-instance assignment (paper 000, Elasticutor, §4.2, Algorithm 1) and naive-EC.

``n`` nodes with ``c_i`` cores; instance ``j`` has its main process on node
``I(j)``, state ``s_j``, current assignment ``x̃_ij`` and target ``k_j``. The
migration cost of moving to ``X`` is

    C(X | X̃) = Σ_j Σ_i max(0, s_j x̃_ij / X̃_j − s_j x_ij / X_j)

(state assumed spread evenly over an instance's cores), subject to node
capacities, ``X_j ≥ k_j`` and, for data-intensive instances ``E(φ)`` (input +
output bytes/s per core above φ), cores only on ``I(j)``. Algorithm 1 takes each
under-provisioned instance in descending data intensity and moves cores to it
one at a time: a data-intensive one only on ``I(j)``, from the donor with the
least ``C⁻``; any other from the (node, donor) pair minimising ``C⁻ + C⁺`` with

    C⁺_ij = s_j (X_j − x_ij) / (X_j (X_j + 1)),   C⁻_ij = s_j (X_j − x_ij) / (X_j (X_j − 1)).

On FAIL, φ doubles (from φ̃ = 512 KB/s) and the algorithm reruns.

Choices (docs/algorithms.md, "000 — Elasticutor"): free cores act as an over-provisioned idle
instance with zero cost; the prose's *descending* data-intensity order is used.
Taking the only core of an instance costs its whole state ``s_j`` (``C⁻`` is
undefined at ``X_j = 1``, and all of the state must move). A data-intensive
instance's inherited remote cores are released first, so constraint (c) holds
for the cores it had as well as for those it gets.
Donors are over-provisioned instances and free cores; when a data-intensive
instance finds none on ``I(j)``, it may displace a core of a non-data-intensive
instance there (least ``C⁻``), which then joins the queue and is served
elsewhere — the listing's ``Ê ∈ E \\ E⁺_Δ``, made feasibility-preserving. Surplus
cores left after every target is met are released where ``C⁻`` is least, so
``X_j = k_j`` on return.

The implementation keeps each instance's cores as a sparse ``node → count`` map
and scans only nodes an instance or donor occupies, so one reassignment costs
O(Δ · (|E⁻| + n)) rather than a rescan of the whole matrix per core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from streamscale.errors import InfeasibleError, ModelError

__all__ = [
    "PHI0",
    "AssignmentProblem",
    "AssignmentResult",
    "assign_cores",
    "migration_cost",
    "naive_ec",
]

PHI0 = 512.0 * 1024.0
"""φ̃ = 512 KB/s, the initial data-intensity threshold (paper 000, §4.2)."""

_FREE = -1


@dataclass(frozen=True, slots=True, eq=False)
class AssignmentProblem:
    """Input of :func:`assign_cores` and :func:`naive_ec`.

    Attributes
    ----------
    capacity
        Cores ``c_i`` of each node.
    current
        ``x̃`` as an ``n × m`` integer array (cores of instance ``j`` on node ``i``).
    target
        ``k_j`` per instance (``≥ 1``).
    state
        ``s_j`` in bytes per instance.
    home
        Node index ``I(j)`` of each instance's main process.
    data_rate
        Input + output bytes/s of each instance (data intensity is this ÷ ``k_j``).
    """

    capacity: Sequence[int]
    current: np.ndarray
    target: Sequence[int]
    state: Sequence[float]
    home: Sequence[int]
    data_rate: Sequence[float] = field(default=())

    def __post_init__(self) -> None:
        n, m = len(self.capacity), len(self.target)
        cur = np.asarray(self.current)
        if cur.shape != (n, m):
            raise ModelError(
                f"current assignment has shape {cur.shape}, want {(n, m)}", item="assignment"
            )
        if len(self.state) != m or len(self.home) != m:
            raise ModelError("state and home need one entry per instance", item="assignment")
        if self.data_rate and len(self.data_rate) != m:
            raise ModelError("data_rate needs one entry per instance", item="assignment")
        for j, k in enumerate(self.target):
            if k < 1:
                raise ModelError(f"target must be >= 1, got {k}", item=f"instance {j}")
            if not 0 <= self.home[j] < n:
                raise ModelError(f"home node {self.home[j]} out of range", item=f"instance {j}")
        if cur.size and cur.min() < 0:
            raise ModelError("current assignment has negative entries", item="assignment")
        if sum(self.target) > sum(self.capacity):
            raise InfeasibleError(
                f"{sum(self.target)} cores wanted, {sum(self.capacity)} available",
                item="assignment",
            )


@dataclass(frozen=True, slots=True, eq=False)
class AssignmentResult:
    """Output of an assignment.

    ``x`` is the new ``n × m`` assignment; ``phi`` the data-intensity threshold of
    the successful run (``inf`` when no instance was treated as data-intensive);
    ``attempts`` the runs needed (φ doublings + 1); ``cost`` = C(X|X̃) in bytes;
    ``data_intensive`` the instances in E(φ); ``remote_cores`` the cores placed
    away from their instance's home node; ``reassigned`` the cores that changed
    owner or were released.
    """

    x: np.ndarray
    phi: float
    attempts: int
    cost: float
    data_intensive: tuple[int, ...]
    remote_cores: int
    reassigned: int


def migration_cost(current: np.ndarray, new: np.ndarray, state: Sequence[float]) -> float:
    """C(X | X̃) of paper 000, §4.2, in bytes."""
    cur = np.asarray(current, dtype=float)
    nxt = np.asarray(new, dtype=float)
    s = np.asarray(state, dtype=float)
    xt, xn = cur.sum(axis=0), nxt.sum(axis=0)
    before = np.divide(cur * s, xt, out=np.zeros_like(cur), where=xt > 0)
    after = np.divide(nxt * s, xn, out=np.zeros_like(nxt), where=xn > 0)
    return float(np.maximum(0.0, before - after).sum())


class _State:
    """Sparse mutable assignment: per instance ``node → cores``, per node free cores."""

    def __init__(self, p: AssignmentProblem) -> None:
        cur = np.asarray(p.current, dtype=np.int64)
        self.n, self.m = cur.shape
        self.x: list[dict[int, int]] = [{} for _ in range(self.m)]
        rows, cols = np.nonzero(cur)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            self.x[j][i] = int(cur[i, j])
        self.X = [sum(d.values()) for d in self.x]
        used = cur.sum(axis=1)
        self.free = [int(c) - int(u) for c, u in zip(p.capacity, used, strict=True)]
        self.moved = 0

    def add(self, i: int, j: int) -> None:
        self.x[j][i] = self.x[j].get(i, 0) + 1
        self.X[j] += 1

    def remove(self, i: int, j: int) -> None:
        c = self.x[j][i] - 1
        if c:
            self.x[j][i] = c
        else:
            del self.x[j][i]
        self.X[j] -= 1

    def matrix(self) -> np.ndarray:
        out = np.zeros((self.n, self.m), dtype=np.int64)
        for j, d in enumerate(self.x):
            for i, c in d.items():
                out[i, j] = c
        return out


def _c_minus(s: float, big_x: int, x_i: int) -> float:
    # an instance's only core: all of its state must move wherever it goes next
    return s * (big_x - x_i) / (big_x * (big_x - 1)) if big_x > 1 else s


def _c_plus(s: float, big_x: int, x_i: int) -> float:
    return s * (big_x - x_i) / (big_x * (big_x + 1)) if big_x > 0 else 0.0


def _evict_overfull(st: _State, p: AssignmentProblem) -> None:
    """Nodes that lost capacity shed cores, cheapest first, before Algorithm 1 runs."""
    for i in range(st.n):
        while st.free[i] < 0:
            js = [j for j in range(st.m) if st.x[j].get(i, 0) > 0]
            j = min(js, key=lambda j: (_c_minus(p.state[j], st.X[j], st.x[j][i]), j))
            st.remove(i, j)
            st.free[i] += 1
            st.moved += 1


def _run(p: AssignmentProblem, phi: float) -> _State | None:
    st = _State(p)
    _evict_overfull(st, p)
    k, s, home = p.target, p.state, p.home
    rate = p.data_rate or (0.0,) * st.m
    intensity = [rate[j] / k[j] for j in range(st.m)]
    di = [intensity[j] > phi for j in range(st.m)]
    for j in range(st.m):
        if di[j]:
            # constraint (c): a data-intensive instance keeps no remote core, not
            # even one it held before; it is served again on its home node
            for i in [i for i in st.x[j] if i != home[j]]:
                for _ in range(st.x[j][i]):
                    st.remove(i, j)
                    st.free[i] += 1
                    st.moved += 1
    surplus = {j for j in range(st.m) if st.X[j] > k[j]}
    queue = sorted((j for j in range(st.m) if st.X[j] < k[j]), key=lambda j: (-intensity[j], j))
    pos = 0
    while pos < len(queue):
        j = queue[pos]
        pos += 1
        while st.X[j] < k[j]:
            found = _pick_local(st, p, j, surplus, di) if di[j] else _pick_any(st, p, j, surplus)
            if found is None:
                return None
            i, donor = found
            if donor == _FREE:
                st.free[i] -= 1
            else:
                st.remove(i, donor)
                st.moved += 1
                if st.X[donor] <= k[donor]:
                    surplus.discard(donor)
                if st.X[donor] < k[donor]:
                    queue.append(donor)  # displaced: served again, anywhere
            st.add(i, j)
    for j in sorted(surplus):
        while st.X[j] > k[j]:
            i = min(st.x[j], key=lambda i: (_c_minus(s[j], st.X[j], st.x[j][i]), i == home[j], i))
            st.remove(i, j)
            st.free[i] += 1
            st.moved += 1
    return st


def _pick_local(
    st: _State, p: AssignmentProblem, j: int, surplus: set[int], di: list[bool]
) -> tuple[int, int] | None:
    i = p.home[j]
    if st.free[i] > 0:
        return i, _FREE
    donors = [d for d in surplus if st.x[d].get(i, 0) > 0]
    if not donors:
        donors = [d for d in range(st.m) if d != j and not di[d] and st.x[d].get(i, 0) > 0]
    if not donors:
        return None
    d = min(donors, key=lambda d: (_c_minus(p.state[d], st.X[d], st.x[d][i]), d))
    return i, d


def _pick_any(
    st: _State, p: AssignmentProblem, j: int, surplus: set[int]
) -> tuple[int, int] | None:
    s_j, big_x, xj, home = p.state[j], st.X[j], st.x[j], p.home[j]
    best: tuple[float, int, int, int] | None = None  # (cost, not-home, node, donor)
    # a free core costs C⁺ only; nodes where j holds no core all cost the same, so
    # besides j's own nodes only the home node and the node with most free cores matter
    cands = [i for i in xj if st.free[i] > 0]
    if st.free[home] > 0:
        cands.append(home)
    # the most free cores, the lowest index on ties (max + index: no per-node key)
    fmax = st.free.index(max(st.free))
    if st.free[fmax] > 0:
        cands.append(fmax)
    for i in cands:
        key = (_c_plus(s_j, big_x, xj.get(i, 0)), i != home, i, _FREE)
        if best is None or key < best:
            best = key
    for d in surplus:
        if d == j:
            continue
        s_d, big_d = p.state[d], st.X[d]
        for i, c in st.x[d].items():
            cost = _c_minus(s_d, big_d, c) + _c_plus(s_j, big_x, xj.get(i, 0))
            key = (cost, i != home, i, d)
            if best is None or key < best:
                best = key
    return None if best is None else (best[2], best[3])


def assign_cores(
    problem: AssignmentProblem, *, phi0: float = PHI0, max_attempts: int = 64
) -> AssignmentResult:
    """Migration-aware CPU-to-instance assignment (paper 000, §4.2, Algorithm 1).

    Parameters
    ----------
    problem
        Capacities, current assignment, targets, state sizes, homes, data rates.
    phi0
        Initial data-intensity threshold φ̃ in bytes/s per core.
    max_attempts
        Runs before giving up on locality altogether (φ = ∞).

    Returns
    -------
    AssignmentResult
        With ``X_j = k_j`` for every instance and node capacities respected.

    Examples
    --------
    Two nodes of two cores. Instance 0 (home node 0, 400 bytes of state) gives up one of its
    two cores; instance 1 (home node 1, 100 bytes, one core) needs three. Only two
    assignments meet the targets: instance 1 takes node 0's released core and node 1's free
    one, moving a third of its state (100 × (1 − 2/3) ≈ 33.3 bytes), or instance 0 moves to
    node 1 instead (466.7 bytes).

    >>> import numpy as np
    >>> p = AssignmentProblem(capacity=[2, 2], current=np.array([[2, 0], [0, 1]]),
    ...                       target=[1, 3], state=[400.0, 100.0], home=[0, 1])
    >>> r = assign_cores(p)
    >>> r.x.tolist(), round(r.cost, 1), r.remote_cores
    ([[1, 1], [0, 2]], 33.3, 1)

    When instance 1 sends 3 MB/s it is data-intensive at φ̃ (1 MB/s per core > 512 KB/s)
    and may only use its home node, which has two cores: the run fails, φ doubles to
    1 MiB/s, and the second run gives the same answer.

    >>> p = AssignmentProblem(capacity=[2, 2], current=np.array([[2, 0], [0, 1]]),
    ...                       target=[1, 3], state=[400.0, 100.0], home=[0, 1],
    ...                       data_rate=[0.0, 3e6])
    >>> r = assign_cores(p, phi0=512 * 1024)
    >>> r.x.tolist(), r.attempts, r.phi, r.data_intensive
    ([[1, 1], [0, 2]], 2, 1048576.0, ())
    """
    rate = problem.data_rate or (0.0,) * len(problem.target)
    phi, attempts = phi0, 0
    while True:
        attempts += 1
        if attempts >= max_attempts:
            phi = float("inf")
        st = _run(problem, phi)
        if st is not None:
            break
        phi *= 2.0
    return _result(problem, st, phi, attempts, rate)


def _result(
    p: AssignmentProblem, st: _State, phi: float, attempts: int, rate: Sequence[float]
) -> AssignmentResult:
    x = st.matrix()
    remote = int(x.sum() - sum(int(x[p.home[j], j]) for j in range(st.m)))
    di = tuple(j for j in range(st.m) if rate[j] / p.target[j] > phi)
    return AssignmentResult(
        x, phi, attempts, migration_cost(p.current, x, p.state), di, remote, st.moved
    )


def naive_ec(problem: AssignmentProblem, *, seed: int | None = None) -> AssignmentResult:
    """Naive-EC baseline (paper 000, §5): the same ``k``, cores chosen obliviously.

    Surplus cores are released at random among the instance's cores and missing
    cores are taken uniformly at random among the free cores of the cluster,
    ignoring migration cost, home nodes and data intensity.

    Examples
    --------
    Instance 1 (home node 1, 100 bytes of state) grows from one core to two. Algorithm 1
    takes the free core on node 1 and moves nothing; naive-EC draws among the four free
    cores and, for some seeds, splits the instance over two nodes, moving half its state.

    >>> import numpy as np
    >>> p = AssignmentProblem(capacity=[2, 2, 2], current=np.array([[2, 0], [0, 1], [0, 0]]),
    ...                       target=[1, 2], state=[400.0, 100.0], home=[0, 1])
    >>> assign_cores(p).cost
    0.0
    >>> [naive_ec(p, seed=s).cost for s in range(4)]
    [0.0, 50.0, 0.0, 50.0]
    """
    rng = np.random.default_rng(seed)
    st = _State(problem)
    _evict_overfull(st, problem)
    k = problem.target
    for j in range(st.m):
        while st.X[j] > k[j]:
            nodes = sorted(st.x[j])
            weights = np.array([st.x[j][i] for i in nodes], dtype=float)
            i = nodes[int(rng.choice(len(nodes), p=weights / weights.sum()))]
            st.remove(i, j)
            st.free[i] += 1
            st.moved += 1
    for j in range(st.m):
        while st.X[j] < k[j]:
            free = np.array(st.free, dtype=float)
            i = int(rng.choice(st.n, p=free / free.sum()))
            st.free[i] -= 1
            st.add(i, j)
    rate = problem.data_rate or (0.0,) * st.m
    return _result(problem, st, float("inf"), 1, rate)
