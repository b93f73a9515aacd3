"""The domain model: frozen, pure data (no pyspark, no I/O beyond file loading)."""

from __future__ import annotations

from streamscale.model.cluster import Cluster, Node, VmType
from streamscale.model.io import (
    dump,
    load,
    load_cluster,
    load_models,
    load_plan,
    load_snapshot,
    load_topology,
    save,
)
from streamscale.model.performance import ModelPoint, PerformanceModel
from streamscale.model.plan import (
    Allocation,
    CoreMove,
    Placement,
    Plan,
    PlanDiff,
    Routing,
    ShardMove,
    unit_id,
)
from streamscale.model.snapshot import NodeStats, OperatorStats, ShardStats, Snapshot, Traffic
from streamscale.model.topology import Edge, Grouping, Operator, OperatorKind, Topology

__all__ = [
    "Allocation",
    "Cluster",
    "CoreMove",
    "Edge",
    "Grouping",
    "ModelPoint",
    "Node",
    "NodeStats",
    "Operator",
    "OperatorKind",
    "OperatorStats",
    "PerformanceModel",
    "Placement",
    "Plan",
    "PlanDiff",
    "Routing",
    "ShardMove",
    "ShardStats",
    "Snapshot",
    "Topology",
    "Traffic",
    "VmType",
    "dump",
    "load",
    "load_cluster",
    "load_models",
    "load_plan",
    "load_snapshot",
    "load_topology",
    "save",
    "unit_id",
]
