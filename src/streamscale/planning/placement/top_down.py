"""Top-down group-aware task allocation (TD).

Paper 001, §4, Algorithms 4–5. TD works on group pairs, not task pairs: it
takes group pairs by relative significance, fuses a whole pair onto the
roomiest node when it fits and otherwise splits it — only the unplaced group
when its partner is already placed (fill the partner's nodes, best expected
IMC gain first, k = ⌊μ/pc_t⌋ tasks at a time), or both in balanced slices of
σ = pc_ti + pc_tj·⌊|v_j|/|v_i|⌋, k = ⌊μ/σ⌋ per node. Splits resolve lazily:
tasks of a group are interchangeable, so a split group is just its per-node
task counts plus its unplaced remainder, and ``resolveSplits`` reads them in
O(1). Tasks left over are placed by ``allocateSingleTasks``.
"""

from __future__ import annotations

from typing import Literal

from streamscale.planning.placement.backtrack import backtrack as backtrack_search
from streamscale.planning.placement.groups import EPS, GroupJob, TaskAllocation
from streamscale.planning.placement.task_level import (
    Priority,
    allocate_single_tasks,
    fit_count,
    group_pair_order,
    top_node,
)
from streamscale.settings import Setting

__all__ = ["LITERAL", "NO_SPLIT", "SINGLES", "NoSplit", "Partners", "Singles", "Split", "top_down"]

#: The setting, declared once (the planner's schema takes it; defaults below read it).
NO_SPLIT = Setting(
    "no_split",
    str,
    "partial",
    "a node that takes no balanced split: part of one split, or the pair to R",
    choices=("partial", "to-r"),
)

#: The setting, declared once (the planner's schema takes it; defaults below read it).
LITERAL = Setting("literal", bool, False, "Algorithm 5 exactly as printed (no extra fills)")

#: The setting, declared once (the planner's schema takes it; defaults below read it).
SINGLES = Setting(
    "singles",
    str,
    "least-loaded",
    "where tasks without a partner go",
    choices=("least-loaded", "affinity"),
)

Singles = Literal["least-loaded", "affinity"]
Split = Literal["balanced", "max-links"]
NoSplit = Literal["partial", "to-r"]
Partners = Literal["best", "all"]


class _TopDown:
    """Mutable state of one topDown run (per-node spare capacity, task counts)."""

    __slots__ = (
        "all_partners",
        "cap",
        "counts",
        "free",
        "init",
        "job",
        "literal",
        "nn",
        "no_split",
        "pc",
        "spare",
        "split",
    )

    def __init__(
        self,
        job: GroupJob,
        split: Split = "balanced",
        *,
        literal: bool = LITERAL.default,
        no_split: NoSplit = NO_SPLIT.default,
        partners: Partners | None = None,
        spare: bool | None = None,
    ) -> None:
        self.job = job
        self.split = split
        self.literal = literal
        self.all_partners = (partners or ("best" if literal else "all")) == "all"
        self.spare = (not literal) if spare is None else spare
        self.no_split = no_split
        self.nn = len(job.nodes)
        self.pc = job.task_cost
        self.init = list(job.capacities)
        self.cap = list(job.capacities)
        self.counts = [[0] * self.nn for _ in job.groups]
        self.free = list(job.tasks)

    def place(self, g: int, n: int, k: int) -> None:
        self.counts[g][n] += k
        self.cap[n] -= k * self.pc[g]
        self.free[g] -= k

    def fits(self, cost: float, n: int) -> bool:
        return cost <= self.cap[n] + EPS * max(1.0, self.init[n])

    def only_node(self, g: int) -> int:
        """The node holding all of ``g``, or -1 if its tasks are spread."""
        found = -1
        for n, x in enumerate(self.counts[g]):
            if x:
                if found >= 0:
                    return -1
                found = n
        return found

    # -- Algorithm 5, mode "second" -----------------------------------------
    def fill_partner(self, i: int, j: int, link: float) -> None:
        """Place unplaced tasks of ``j`` on the nodes of the fully placed ``i``.

        Nodes are taken by expected IMC gain of the pair on them
        (Algorithm 4, line 14): |u_i on n| · (tasks of u_j that fit) · link imc.
        Algorithm 5 read literally fills only the first of them and leaves the
        rest of u_j to R; §4's text collocates "as many tasks as possible" on
        the nodes hosting u_i, so every such node is filled in turn (over 2000
        random jobs of §7.3, seed 1: 93.0 % of optimal against 91.1 % for the
        literal reading). With ``literal`` (or ``partners="best"``) only the
        first node is filled.
        """
        pc = self.pc[j]
        row_i = self.counts[i]
        scored: list[tuple[float, int]] = []
        for n in range(self.nn):
            if row_i[n]:
                k = min(self.free[j], fit_count(self.cap[n], pc))
                if k:
                    scored.append((-row_i[n] * k * link, n))
        scored.sort()
        for _, n in scored:
            k = int(min(self.free[j], fit_count(self.cap[n], pc)))
            if k:
                self.place(j, n, k)
            if not self.free[j] or not self.all_partners:
                return

    # -- Algorithm 5, mode "both" -------------------------------------------
    def allocate_pair(self, a: int, b: int) -> None:
        """Fuse the unplaced parts of ``a`` and ``b`` on the roomiest node, or split both.

        Paper 001, §4, Algorithm 5 with mode = both; the recursion on ⟨w_i, w_j⟩
        is a loop. As printed, Algorithm 5 does not terminate when the roomiest
        node takes no minimum balanced split (k = ⌊μ/σ⌋ = 0): nothing is placed,
        ⟨w_i, w_j⟩ = ⟨v_i, v_j⟩ and the recursion meets the same node again.
        ``no_split`` completes that case: ``partial`` (the default, also with
        ``literal``) places the largest part of one balanced split that fits —
        one task of the smaller group and as many of the larger as fit — so the
        recursion ends only as §4 says it does (the pair fits, the smaller group
        is exhausted, or both are); ``to-r`` stops and leaves both remainders
        to R. With ``spare`` (default: without ``literal``), once the smaller
        group is exhausted on a node the rest of that node is filled with the
        larger group — §4's "filling the spare space"; without it, the larger
        group's remainder goes to R (Algorithm 5, lines 18–19).
        """
        pc = self.pc
        while self.free[a] and self.free[b]:
            n = top_node(self.cap)
            fa, fb = self.free[a], self.free[b]
            if self.fits(fa * pc[a] + fb * pc[b], n):
                self.place(a, n, fa)
                self.place(b, n, fb)
                return
            s, g = (a, b) if fa <= fb else (b, a)
            ns, ng = self.free[s], self.free[g]
            r = ng // ns
            k = fit_count(self.cap[n], pc[s] + pc[g] * r)
            balanced = self.literal or self.split == "balanced"
            if not balanced:
                us, ug = self.most_links(s, g, n)
                if us < 1 or ug < 1:
                    return
            elif k >= 1:
                us = int(min(k, ns))
                ug = int(min(k * r, ng))
            elif self.no_split == "to-r":
                return
            else:
                us = 1
                ug = int(min(ng, fit_count(self.cap[n] - pc[s], pc[g])))
                if ug < 1 or not self.fits(pc[s], n):
                    return
            if us == ns and balanced and self.spare:
                rest = self.cap[n] - us * pc[s] - ug * pc[g]
                ug = int(min(ng, ug + fit_count(rest, pc[g])))
            self.place(s, n, us)
            self.place(g, n, ug)

    def most_links(self, s: int, g: int, n: int) -> tuple[int, int]:
        """The slice (u_s, u_g) of most links |u_s|·|u_g| that fits node ``n``.

        §4 notes this maximises one split's collocation but may starve the next
        pair; ties go to the slice with more tasks of the smaller group.
        """
        pc, cap = self.pc, self.cap[n]
        best = (0, 0, 0)
        for us in range(1, self.free[s] + 1):
            if not self.fits(us * pc[s], n):
                break
            ug = int(min(self.free[g], fit_count(cap - us * pc[s], pc[g])))
            if us * ug >= best[0]:
                best = (us * ug, us, ug)
        return best[1], best[2]

    # -- Algorithm 4, lines 19–24 -------------------------------------------
    def fuse_nodes(self, a: int, b: int) -> None:
        na, nb = self.only_node(a), self.only_node(b)
        if na < 0 or nb < 0 or na == nb:
            return
        dst, src = na, nb
        if self.init[src] >= self.init[dst]:
            dst, src = src, dst
        used = self.init[src] - self.cap[src]
        if not self.fits(used, dst):
            return
        for row in self.counts:
            if row[src]:
                row[dst] += row[src]
                row[src] = 0
        self.cap[dst] -= used
        self.cap[src] = self.init[src]

    # -- singles ---------------------------------------------------------------
    def allocate_singles_affinity(self) -> None:
        """Each leftover task on the fitting node where its links gain most.

        An alternative to Algorithm 3 (which ignores IMC): ties go to the
        roomiest node, heaviest tasks first as in Algorithm 3.
        """
        job = self.job
        neigh: list[list[tuple[int, float]]] = [[] for _ in job.groups]
        for (a, b), w in zip(job.ends, job.link_imc, strict=True):
            neigh[a].append((b, w))
            neigh[b].append((a, w))
        for g in sorted(
            (g for g in range(len(self.free)) if self.free[g]), key=lambda g: -self.pc[g]
        ):
            cost = self.pc[g]
            while self.free[g]:
                best, best_key = -1, (0.0, 0.0)
                for n in range(self.nn):
                    if not self.fits(cost, n):
                        continue
                    gain = sum(w * self.counts[h][n] for h, w in neigh[g])
                    key = (gain, self.cap[n])
                    if best < 0 or key > best_key:
                        best, best_key = n, key
                if best < 0:
                    return
                self.place(g, best, 1)


def top_down(
    job: GroupJob,
    *,
    priority: Priority = "significance",
    singles: Singles = SINGLES.default,
    split: Split = "balanced",
    literal: bool = LITERAL.default,
    no_split: NoSplit = NO_SPLIT.default,
    partners: Partners | None = None,
    spare: bool | None = None,
    backtrack: bool = True,
) -> TaskAllocation:
    """topDown (paper 001, §4, Algorithms 4–5).

    Parameters
    ----------
    job
        The group job.
    priority
        Order of group pairs: ``significance`` (Eq. 2, TD-RS, the default) or
        ``imc`` (TD-IMC of Fig. 8).
    singles
        How leftover tasks are placed: ``least-loaded`` is Algorithm 3 as in
        the paper; ``affinity`` puts each on the fitting node where its links
        gain most.
    split
        How a pair that does not fit one node is sliced: ``balanced`` is
        Algorithm 5 (σ-sized slices in the groups' size ratio); ``max-links``
        gives each node the slice with the most collocated links.
    literal
        Algorithm 5 as written: mode "second" fills only the best partner
        node, and mode "both" leaves the larger group's remainder to R once
        the smaller group is exhausted (``split`` is then ignored). The
        default adds the fills §4's text describes (see
        :meth:`_TopDown.fill_partner` and :meth:`_TopDown.allocate_pair`).
    no_split
        What mode "both" does at a roomiest node that takes no minimum
        balanced split, a case Algorithm 5 as printed never leaves (its
        recursion meets the same node again): ``partial`` places one task of
        the smaller group with as many of the larger as fit, ``to-r`` leaves
        both remainders to R. On paper 001's §7.3 jobs a node holds only three
        tasks, so this case decides most pairs whose groups differ threefold
        in size (``task_allocation_ablation.jsonl``).
    partners
        Mode "second" (one group placed): fill only the ``best`` node of the
        placed partner by expected IMC gain (Algorithm 5 as printed) or ``all``
        of them in that order (§4's "as many tasks as possible"). Default:
        ``best`` with ``literal``, else ``all``.
    spare
        Mode "both": once the smaller group is exhausted on a node, fill the
        node's spare room with the larger group (§4's "filling the spare
        space") instead of leaving its remainder to R (Algorithm 5, line 19).
        Default: not ``literal``. ``partners`` and ``spare`` separate the two
        rules ``literal`` switches together.
    backtrack
        When a task fits nowhere after Algorithm 3, search for a complete
        allocation that keeps as many of TD's placements as it can (§2.2:
        "we will need to backtrack and try a different allocation"; see
        :func:`~streamscale.planning.placement.backtrack.backtrack`). False
        is the single pass as printed, which then reports the task unplaced.

    Returns
    -------
    TaskAllocation
        Complete, or with ``unplaced`` tasks when some task fits nowhere.

    Examples
    --------
    Groups ``A`` and ``B`` have two tasks of 30 % each, ``C`` one of 40 %; an ``A``–``B``
    task link carries 8/4 = 2 MB/s and a ``B``–``C`` link 6/2 = 3. The five tasks (160 %)
    need both nodes of 100 %; trying all 18 count vectors shows that the best gain is 7 (e.g.
    one ``A`` and one ``B`` per node, ``C`` beside one ``B``: 2 + 2 + 3).

    >>> from streamscale.planning.placement.groups import GroupJob
    >>> job = GroupJob.build([("A", 2, 60.0), ("B", 2, 60.0), ("C", 1, 40.0)],
    ...                      [("A", "B", 8.0), ("B", "C", 6.0)], {"n0": 100.0, "n1": 100.0})
    >>> a = top_down(job)
    >>> a.node_counts(), a.gain, a.loads
    ({'A': {'n0': 1, 'n1': 1}, 'B': {'n0': 1, 'n1': 1}, 'C': {'n0': 1}}, 7.0, (100.0, 60.0))
    """
    if split not in ("balanced", "max-links"):
        raise ValueError(f"unknown split policy {split!r}")
    if no_split not in ("partial", "to-r"):
        raise ValueError(f"unknown no_split policy {no_split!r}")
    if partners not in (None, "best", "all"):
        raise ValueError(f"unknown partners policy {partners!r}")
    st = _TopDown(job, split, literal=literal, no_split=no_split, partners=partners, spare=spare)
    free = st.free
    for e in group_pair_order(job, priority):
        a, b = job.ends[e]
        # resolveSplits: a group with unplaced tasks stands for that remainder;
        # a fully placed one for its splits (its per-node counts).
        if free[a] or free[b]:
            if not free[a]:
                st.fill_partner(a, b, job.link_imc[e])
            elif not free[b]:
                st.fill_partner(b, a, job.link_imc[e])
            else:
                st.allocate_pair(a, b)
        else:
            st.fuse_nodes(a, b)
    if singles == "affinity":
        st.allocate_singles_affinity()
    elif singles == "least-loaded":
        allocate_single_tasks(job, st.counts, st.cap, free)
    else:
        raise ValueError(f"unknown singles policy {singles!r}")
    counts = st.counts
    if backtrack and any(free):
        counts = backtrack_search(job, counts) or counts
    name = "td" if priority == "significance" else "td-imc"
    return TaskAllocation.of(job, counts, name)
