"""``gma``: the Elastic Allocator's GMA (paper 002) as a live policy.

At each decision:

1. **Cores per instance** as ``elastic`` sizes them (registered ``queueing``
   allocator, paper 000 §4.1).
2. **Other work on the nodes.** ``Snapshot.nodes[n].cpu`` (% of one core) is what
   node ``n`` is busy with; this job's own share there — the shard loads the
   current plan routes to units on ``n`` — is taken off, and the rest is the
   existing usage F0 of §IV (bandwidth is taken as reported). Nodes the snapshot
   does not report keep their declared ``reserved_cpu``/``reserved_bandwidth_mbps``.
3. **Units to nodes** by the registered ``gma`` placer (§IV.E, Algorithm 1): each
   unit carries its share of its operator's CPU demand and traffic, nodes accept
   up to ``d_cpu``/``d_bw`` of their capacity counting the other work. The placer
   sees the fewest leading nodes whose cores hold the units, one more at a time
   while GMA finds no placement within the limits or gives a node more units than
   cores (on the whole cluster its best effort is taken as it is), so
   the job packs onto ``executor-0 …``, leaves busy nodes and scales in by vacating
   the highest nodes. Units that stay on their node keep their ids.
4. **Shards to units** by the registered ``collocate`` balancer (balanced within
   ``θ``, communicating shards on one node).
"""

from __future__ import annotations

from collections.abc import Callable
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
from streamscale.model import Cluster, Plan, Routing, Snapshot
from streamscale.planning.adapters.elastic_allocator import GMA_SETTINGS
from streamscale.planning.registry import PlanningContext, StepResult

__all__ = ["GMA_POLICY_SETTINGS", "GmaPolicy", "other_work"]

GMA_POLICY_SETTINGS = without(ELASTIC_SETTINGS, "theta_low", "target_utilization").merged(
    without(GMA_SETTINGS, "usage"), group="gma"
)


def other_work(context: PlanningContext, current: Plan) -> dict[str, float]:
    """CPU (% of one core) per reported node that is not this job's, under ``current``."""
    snap = context.snapshot
    if snap is None:
        return {}
    own = dict.fromkeys(snap.nodes, 0.0)
    for inst, ld in (context.loads or {}).items():
        table = current.routing.tables.get(inst, ())
        for s, unit in enumerate(table):
            node = current.placement.nodes.get(unit)
            if node in own and s < len(ld.shard_load):
                own[node] += 100.0 * float(ld.shard_load[s])
    return {n: max(0.0, st.cpu - own[n]) for n, st in snap.nodes.items()}


def _fits(cluster: Cluster) -> Callable[[StepResult], bool]:
    """GMA's own limits held and no node given more units than cores (a Spark task
    holds a core: more would queue behind each other)."""
    cores = {n.name: n.cores for n in cluster.nodes}

    def ok(res: StepResult) -> bool:
        per: dict[str, int] = {}
        for node in res.plan.placement.nodes.values():
            per[node] = per.get(node, 0) + 1
        within = all(k <= cores.get(n, 0) for n, k in per.items())
        return bool(res.figures.get("feasible", True)) and within

    return ok


@policy(
    "gma",
    "Elastic Allocator GMA: queueing-model cores, units to nodes under CPU/bandwidth headroom",
    settings=GMA_POLICY_SETTINGS,
    steps=(("allocator", "queueing"), ("placer", "gma"), ("balancer", "collocate")),
    initial=packed_initial,
)
class GmaPolicy(QueueingSized):
    """GMA (paper 002, §IV.E) as a live policy (module docstring)."""

    def decide(self, snapshot: Snapshot, current: Plan, now: float) -> Decision:
        context = self.context(snapshot, now)
        sized, figures = self.compose(context, current, [("allocator", "queueing")])
        other = other_work(context, current)
        nodes = {n: replace(st, cpu=other[n]) for n, st in snapshot.nodes.items()}
        placing = replace(
            context,
            snapshot=replace(snapshot, nodes=nodes),
            params={**context.params, "usage": "observed"},
        )
        # GMA splits an operator's demand over its units by the shards the routing sends
        # them; the new units have none yet, so it sees the even split they will get
        unrouted = Plan(sized.allocation, sized.placement, Routing({}))
        placed, place_figs, offered = place_packed(
            self.insts, placing, unrouted, "gma", feasible=_fits(self.cluster)
        )
        placed = Plan(placed.allocation, placed.placement, sized.routing)
        plan, route_figs = self.compose(context, placed, [("balancer", "collocate")])
        figures.update(place_figs)
        figures.update({k: v for k, v in route_figs.items() if k != "cores"})
        figures["other_cpu_percent"] = other
        figures["nodes_offered"] = offered
        figures["nodes_used"] = len(set(plan.placement.nodes.values()))
        figures["cores"] = plan.allocation.total
        reason = f"gma: {plan.allocation.total} cores on {figures['nodes_used']} node(s)"
        return decision(current, plan, reason, figures)
