"""COLA: load balance and collocation by recursive balanced graph partitioning.

Khandekar et al., Middleware 2009, the collocation baseline of paper 003
(§2, §5.3): start with all key groups in one partition and split partitions
with balanced graph partitioning (METIS, via pymetis; vertex weight = load,
edge weight = traffic) until the partitions can be placed with a sufficient
load balance; place them from scratch (largest partition first, onto the
least loaded node). COLA ignores the current allocation, so it migrates many
key groups per round. :func:`metis_bisect` is shared with ALBIC's splitting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamscale.errors import import_extra
from streamscale.planning.balancing.keygroup_settings import SPREAD
from streamscale.planning.balancing.keygroups import BalanceResult, KeyGroupProblem
from streamscale.planning.balancing.metrics import load_distance_pct

__all__ = ["cola", "metis_split"]

_WSCALE = 10_000


def metis_split(
    problem: KeyGroupProblem,
    members: Sequence[int],
    nparts: int = 2,
    *,
    weights: np.ndarray | None = None,
    seed: int | None = None,
) -> list[list[int]]:
    """Balanced partitioning of ``members`` (key group indices) minimising the traffic cut.

    Vertex weights default to the key groups' loads; edges are the traffic
    between members (symmetrised). Falls back to alternating by weight when
    METIS cannot split (fewer members than parts).
    """
    pymetis = import_extra("pymetis")  # METIS, of the papers extra: loaded when a split runs
    mem = [int(v) for v in members]
    w = problem.load if weights is None else weights
    if len(mem) <= nparts:
        return [[v] for v in mem]
    pos = np.full(problem.k, -1, dtype=np.int64)
    pos[mem] = np.arange(len(mem))
    tr = problem.traffic
    xadj = np.zeros(len(mem) + 1, dtype=np.int64)
    adjncy = np.zeros(0, dtype=np.int64)
    ew: list[int] = []
    if tr.size:
        ia, ib = pos[tr[:, 0].astype(np.int64)], pos[tr[:, 1].astype(np.int64)]
        ok = (ia >= 0) & (ib >= 0) & (ia != ib)
        # Symmetrise and merge parallel edges: METIS wants an undirected simple graph.
        a = np.r_[ia[ok], ib[ok]]
        b = np.r_[ib[ok], ia[ok]]
        r = np.r_[tr[ok, 2], tr[ok, 2]]
        key = a * len(mem) + b
        uniq, inv = np.unique(key, return_inverse=True)
        ewt = np.bincount(inv, weights=r)
        a, b = uniq // len(mem), uniq % len(mem)
        xadj[1:] = np.cumsum(np.bincount(a, minlength=len(mem)))
        adjncy = b
        top = float(ewt.max()) if ewt.size and ewt.max() > 0 else 1.0
        ew = [max(1, round(_WSCALE * float(x) / top)) for x in ewt]
    wmax = float(max(w[mem].max(), 1e-12))
    vw = [max(1, round(_WSCALE * float(w[v]) / wmax)) for v in mem]
    parts: list[list[int]] = [[] for _ in range(nparts)]
    try:
        res = pymetis.part_graph(
            nparts,
            pymetis.CSRAdjacency(xadj, adjncy),
            vweights=vw,
            eweights=ew or None,
            options=pymetis.Options(seed=int(seed or 0)),
        )
        labels = list(res.vertex_part)
    except Exception:
        labels = []
    if len(set(labels)) < 2:
        order = sorted(range(len(mem)), key=lambda i: (-vw[i], i))
        labels = [0] * len(mem)
        for rank, i in enumerate(order):
            labels[i] = rank % nparts
    for i, lab in enumerate(labels):
        parts[lab].append(mem[i])
    return [p for p in parts if p]


def _place(problem: KeyGroupProblem, parts: list[list[int]]) -> np.ndarray:
    """Largest partition first onto the least loaded node of N_keep (relative to capacity)."""
    keep = np.flatnonzero(problem.keep)
    loads = np.zeros(problem.n)
    asg = np.array(problem.assignment, copy=True)
    sizes = [(float(problem.load[p].sum()), min(p), i) for i, p in enumerate(parts)]
    for _, _, i in sorted(sizes, key=lambda t: (-t[0], t[1])):
        rel = loads[keep] / problem.capacity[keep]
        n = int(keep[np.argmin(rel)])
        asg[parts[i]] = n
        loads[n] += problem.load[parts[i]].sum()
    return asg


def cola(
    problem: KeyGroupProblem,
    *,
    max_load_distance_pct: float = SPREAD.default,
    seed: int | None = None,
) -> BalanceResult:
    """COLA from scratch: split the heaviest partition until placement is balanced enough.

    The collocation baseline of paper 003, §2.1 and §5.3 (Khandekar et al., Middleware 2009).

    Parameters
    ----------
    problem
        Key groups with loads and traffic; the current allocation is ignored.
    max_load_distance_pct
        Stop splitting once the placement's load distance is at most this.
    seed
        METIS seed.

    Returns
    -------
    BalanceResult
        ``method="cola"``; ``collocated`` holds the final partitions.

    Examples
    --------
    ``up/0`` sends to ``down/0`` and ``up/1`` to ``down/1``, but every pair is split over the
    nodes. From scratch, COLA puts each pair with one of the two heavy key groups ``x/*``:
    all traffic stays local and both nodes carry 2.5, at the price of two migrations.

    >>> from streamscale.planning.balancing.keygroups import KeyGroupProblem
    >>> from streamscale.planning.balancing.metrics import collocation_factor, migrations
    >>> groups = ["up/0", "up/1", "down/0", "down/1", "x/0", "x/1"]
    >>> p = KeyGroupProblem.build(groups, ["a", "b"], [0.25] * 4 + [2.0, 2.0],
    ...                           [0, 1, 1, 0, 0, 1], traffic=[(0, 2, 10.0), (1, 3, 10.0)])
    >>> r = cola(p, seed=0)
    >>> r.assignment.tolist(), collocation_factor(p, r.assignment), migrations(p, r.assignment)
    ([0, 1, 0, 1, 0, 1], 100.0, 2)
    """
    n_keep = int(problem.keep.sum())
    parts: list[list[int]] = [list(range(problem.k))]
    best: tuple[float, np.ndarray, list[list[int]]] | None = None
    for _ in range(problem.k):
        if len(parts) >= n_keep:
            asg = _place(problem, parts)
            dist = load_distance_pct(problem, asg)
            if best is None or dist < best[0]:
                best = (dist, asg, [list(p) for p in parts])
            if dist <= max_load_distance_pct:
                break
        heavy = max(range(len(parts)), key=lambda i: (problem.load[parts[i]].sum(), -min(parts[i])))
        if len(parts[heavy]) < 2:
            break
        halves = metis_split(problem, parts[heavy], 2, seed=seed)
        parts = parts[:heavy] + halves + parts[heavy + 1 :]
    if best is None:
        best = (load_distance_pct(problem, _place(problem, parts)), _place(problem, parts), parts)
    _, asg, final = best
    sets = tuple(tuple(sorted(p)) for p in final if len(p) > 1)
    return BalanceResult(
        asg, "cola", "done", collocated=sets, extra={"partitions": float(len(final))}
    )
