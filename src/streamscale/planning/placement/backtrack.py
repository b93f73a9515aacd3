"""Completing a heuristic's allocation that left tasks unplaced (paper 001, §2.2).

naive, TL and TD are single-pass: the tasks they cannot collocate go to
``allocateSingleTasks`` (Algorithm 3), which stops at the first task that
fits on no node and reports failure. That happens even when a complete
allocation exists, because a pair fused early leaves every node a little
too full for a large leftover task. The paper names the remedy but not its
form: "we may end up with tasks that cannot fit. This is due to task
granularity [...] Then, we will need to backtrack and try a different
allocation" (§2.2; §5 re-cuts the groups into finer tasks instead, which
changes the job and lives in :mod:`~streamscale.planning.placement.relaxations`).

:func:`backtrack` is that step. It searches, node by node, the per-node task
counts of a complete allocation, trying first the counts that keep most of
the heuristic's tasks where the heuristic put them — on this node and, as
far as the tasks left allow, on the nodes still to fill — then the most IMC
gained on the node. So an allocation that can be completed by adding the
leftovers comes back unchanged apart from them. Tasks of a group are
interchangeable, so a search state is (node, tasks left per group); states
that failed are remembered, which makes the search exact: it finds a
complete allocation whenever one exists, within ``max_steps``.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamscale.planning.placement.groups import EPS, GroupJob

__all__ = ["backtrack"]


class _OutOfSteps(Exception):
    pass


def backtrack(
    job: GroupJob, counts: Sequence[Sequence[int]], *, max_steps: int = 200_000
) -> list[list[int]] | None:
    """A complete allocation near ``counts``, or None when there is none (or none found in time).

    Parameters
    ----------
    job
        The group job.
    counts
        The heuristic's allocation, ``counts[g][n]`` tasks of group g on node n
        (possibly incomplete); its placements are kept where they can be.
    max_steps
        Bound on the count vectors the search examines; past it the search
        gives up and returns None (an explicit failure: the caller keeps its
        incomplete allocation).

    Returns
    -------
    list[list[int]] | None
        Per-node task counts placing every task within capacity.

    Examples
    --------
    Tasks cost 33 % (``A``), 30 % (``B``) and 40 % (``C``). TD fuses one ``A`` and
    one ``B`` on each node (63 % each) and then finds no room for ``C``; keeping
    ``n0``'s pair, the search moves the second ``A`` beside it and ``C`` beside
    the second ``B``:

    >>> job = GroupJob.build([("A", 2, 66.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> backtrack(job, [[1, 1], [1, 1], [0, 0]])
    [[2, 0], [1, 1], [0, 1]]
    >>> backtrack(job.with_capacities([100.0, 60.0]), [[1, 1], [1, 1], [0, 0]]) is None
    True
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    ng, nn = len(job.groups), len(job.nodes)
    pc, cap = job.task_cost, job.capacities
    order, room_after, largest_after, later = _layout(job, counts)
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(ng)]
    for (a, b), w in zip(job.ends, job.link_imc, strict=True):
        neighbours[a].append((b, w))
    failed: set[tuple[int, tuple[int, ...]]] = set()
    steps = [0]

    def slack(c: float) -> float:
        return EPS * max(1.0, c)

    def vectors(i: int, left: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Every count vector ≤ ``left`` that fits the node at position ``i``, best first.

        Best: the most of the heuristic's placements that can still be kept on
        this node and the ones after it, then the most IMC gained on the node.
        """
        n, after = order[i], later[i + 1]
        out: list[tuple[int, ...]] = []
        cur = [0] * ng

        def walk(g: int, room: float) -> None:
            if g == ng:
                steps[0] += 1
                if steps[0] > max_steps:
                    raise _OutOfSteps
                out.append(tuple(cur))
                return
            c = 0
            while c <= left[g] and c * pc[g] <= room + slack(cap[n]):
                cur[g] = c
                walk(g + 1, room - c * pc[g])
                c += 1
            cur[g] = 0

        walk(0, cap[n])

        def key(x: tuple[int, ...]) -> tuple[int, float, tuple[int, ...]]:
            keep = sum(min(x[g], counts[g][n]) + min(left[g] - x[g], after[g]) for g in range(ng))
            gain = sum(w * x[a] * x[b] for a in range(ng) for b, w in neighbours[a])
            return (-keep, -gain, tuple(-v for v in x))

        out.sort(key=key)
        return out

    def search(i: int, left: tuple[int, ...]) -> list[tuple[int, ...]] | None:
        if not any(left):
            return [(0,) * ng] * (nn - i)
        if i == nn or (i, left) in failed:
            return None
        need = sum(k * pc[g] for g, k in enumerate(left))
        if need > room_after[i] + slack(room_after[i]) or any(
            k and pc[g] > largest_after[i] + slack(largest_after[i]) for g, k in enumerate(left)
        ):
            failed.add((i, left))
            return None
        for x in vectors(i, left):
            rest = search(i + 1, tuple(k - v for k, v in zip(left, x, strict=True)))
            if rest is not None:
                return [x, *rest]
        failed.add((i, left))
        return None

    try:
        found = search(0, tuple(job.tasks))
    except _OutOfSteps:
        return None
    if found is None:
        return None
    out = [[0] * nn for _ in range(ng)]
    for i, x in enumerate(found):
        for g in range(ng):
            out[g][order[i]] = x[g]
    return out


def _layout(
    job: GroupJob, counts: Sequence[Sequence[int]]
) -> tuple[list[int], list[float], list[float], list[list[int]]]:
    """The search's node order and, per position ``i`` of it, what the nodes from ``i`` on offer.

    Nodes go roomiest first (ties in job order), so the largest leftover tasks meet room
    early. Returns ``order``, ``room_after[i]`` (their total capacity),
    ``largest_after[i]`` (the largest one) and ``later[i][g]`` (tasks of g the heuristic
    put on them), each list with a last entry for ``i = len(nodes)``.
    """
    ng, nn, cap = len(job.groups), len(job.nodes), job.capacities
    order = sorted(range(nn), key=lambda n: -cap[n])
    room_after = [0.0] * (nn + 1)
    largest_after = [0.0] * (nn + 1)
    later = [[0] * ng for _ in range(nn + 1)]
    for i in range(nn - 1, -1, -1):
        room_after[i] = room_after[i + 1] + cap[order[i]]
        largest_after[i] = max(largest_after[i + 1], cap[order[i]])
        later[i] = [later[i + 1][g] + counts[g][order[i]] for g in range(ng)]
    return order, room_after, largest_after, later
