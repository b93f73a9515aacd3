"""``td`` and ``tl``: task allocation (paper 001) as live policies.

At each decision:

1. **Cores per instance** as ``elastic`` sizes them: the registered ``queueing``
   allocator (paper 000, §4.1's M/M/k model, with the same backlog catch-up and
   utilisation floor), capped at the cluster's cores.
2. **Tasks to nodes** by the registered ``td`` placer (paper 001, §4: top-down,
   group-aware) or ``tl`` placer (§3.2: task-level, pairs by relative
   significance). Every instance ``op[e]`` is a group whose tasks are its units;
   the IMC between two instances is the snapshot's shard-to-shard ``traffic``
   between their shards (two keyed operators sharing a key: ``a[e]`` talks to
   ``b[e]`` only), else the edge's rate spread evenly. Each task costs one whole
   core (a Spark task holds an executor core), so no node gets more units than
   cores. The placer sees the fewest leading nodes whose cores hold the units,
   one more at a time while it cannot place them all, so a job packs onto
   ``executor-0 …`` and scale-in vacates the highest nodes. Units that stay on
   their node keep their ids.
3. **Shards to units** by the registered ``collocate`` balancer: balanced within
   ``θ``, shard ``g`` of a downstream operator routed to a unit on the node of its
   upstream partner's unit, so the traffic TD/TL kept inside a node is the
   traffic that flows there.
"""

from __future__ import annotations

from dataclasses import replace

from streamscale.control.controller import Decision
from streamscale.control.policies.base import (
    decision,
    packed_initial,
    place_packed,
    without,
)
from streamscale.control.policies.elasticutor import ELASTIC_SETTINGS, QueueingSized
from streamscale.control.policies.spec import policy
from streamscale.model import Plan, Snapshot
from streamscale.planning.adapters.task_allocation import PAIRS_SETTINGS, TD_SETTINGS

__all__ = ["TD_POLICY_SETTINGS", "TL_POLICY_SETTINGS", "TaskAllocationPolicy", "TdPolicy"]


_SIZING = without(ELASTIC_SETTINGS, "theta_low", "target_utilization")
# The policy sets these itself: every task one whole core.
TD_POLICY_SETTINGS = _SIZING.merged(without(TD_SETTINGS, "task_cost"), group="td")
TL_POLICY_SETTINGS = _SIZING.merged(without(PAIRS_SETTINGS, "task_cost"), group="tl")


class TaskAllocationPolicy(QueueingSized):
    """Queueing-model cores, paper 001 placement, traffic-aware routing (module docstring)."""

    placer = "tl"

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        sized, figures = self.compose(context, current, [("allocator", "queueing")])
        placing = replace(context, params={**context.params, "task_cost": "core"})
        placed, place_figs, offered = place_packed(self.insts, placing, sized, self.placer)
        plan, route_figs = self.compose(context, placed, [("balancer", "collocate")])
        figures.update(place_figs)
        figures.update({k: v for k, v in route_figs.items() if k != "cores"})
        figures["nodes_offered"] = offered
        figures["nodes_used"] = len(set(plan.placement.nodes.values()))
        figures["cores"] = plan.allocation.total
        reason = f"{self.name}: {plan.allocation.total} cores on {figures['nodes_used']} node(s)"
        return decision(current, plan, reason, figures)


@policy(
    "tl",
    "task allocation TL: queueing-model cores, task pairs by significance, traffic kept local",
    settings=TL_POLICY_SETTINGS,
    steps=(("allocator", "queueing"), ("placer", "tl"), ("balancer", "collocate")),
    initial=packed_initial,
)
class TlPolicy(TaskAllocationPolicy):
    """TL (paper 001, §3.2) as a live policy."""

    placer = "tl"


@policy(
    "td",
    "task allocation TD: queueing-model cores, group-aware top-down placement, traffic local",
    settings=TD_POLICY_SETTINGS,
    steps=(("allocator", "queueing"), ("placer", "td"), ("balancer", "collocate")),
    initial=packed_initial,
)
class TdPolicy(TaskAllocationPolicy):
    """TD (paper 001, §4) as a live policy."""

    placer = "td"
