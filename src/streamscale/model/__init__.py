"""The domain model: frozen, pure data (no pyspark, no I/O beyond file loading)."""

from __future__ import annotations

from streamscale.model.cluster import Cluster, Node, VmType
from streamscale.model.ids import (
    InstanceId,
    ShardId,
    SlotId,
    UnitId,
    group_id,
    instance_id,
    instance_of,
    operator_of,
    parse_instance,
    parse_unit,
    unit_id,
)
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
)
from streamscale.model.snapshot import NodeStats, OperatorStats, ShardStats, Snapshot, Traffic
from streamscale.model.topology import Edge, Grouping, Operator, OperatorKind, Topology

__all__ = [
    "Allocation",
    "Cluster",
    "CoreMove",
    "Edge",
    "Grouping",
    "InstanceId",
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
    "ShardId",
    "ShardMove",
    "ShardStats",
    "SlotId",
    "Snapshot",
    "Topology",
    "Traffic",
    "UnitId",
    "VmType",
    "dump",
    "group_id",
    "instance_id",
    "instance_of",
    "load",
    "load_cluster",
    "load_models",
    "load_plan",
    "load_snapshot",
    "load_topology",
    "operator_of",
    "parse_instance",
    "parse_unit",
    "save",
    "unit_id",
]
