"""Two-tier routing of keyed tuples onto Spark tasks (paper 000, §3, "elastic executor").

A key maps to one of ``E`` executors and to one of ``Z`` shards of that
executor by two *static* hashes that never change, so a key's state never
leaves its executor. Which task (unit) serves a shard is the plan's routing
table, which may change at any batch boundary. This module turns a
:class:`~streamscale.model.Plan` into the partition of every shard, from which the
keyed stage (:mod:`~streamscale.runtime.spark.keyed`) gives each Spark partition
exactly the shards of one unit.

The hashes are BLAKE2b digests with distinct personalisation strings, so they
are stable across processes and machines (Python's ``hash`` is salted per
process) and independent of each other (with one shared hash, ``E`` and ``Z``
powers of two would tie a key's shard to its executor).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Plan, Topology
from streamscale.model.ids import instance_id

__all__ = [
    "PartitionMap",
    "executor_instance",
    "executor_of",
    "global_shards",
    "key_hash",
    "shard_of",
]

_EXECUTOR_PERSON = b"ss-executor"
_SHARD_PERSON = b"ss-shard"


def key_hash(key: Any, person: bytes) -> int:
    """A 64-bit hash of ``str(key)``, stable across processes, personalised by ``person``."""
    data = key if isinstance(key, bytes) else str(key).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest(), "little")


def executor_of(key: Any, executors: int) -> int:
    """The executor ``h1(key) % E`` that owns ``key`` forever (paper 000, §3)."""
    return key_hash(key, _EXECUTOR_PERSON) % executors


def shard_of(key: Any, shards: int) -> int:
    """The local shard ``h2(key) % Z`` of ``key`` within its executor (paper 000, §3)."""
    return key_hash(key, _SHARD_PERSON) % shards


def executor_instance(operator: str, executor: int) -> str:
    """Instance id ``op[e]`` of an elastic executor."""
    return instance_id(operator, executor)


def global_shards(keys: Iterable[Any], executors: int, shards: int) -> np.ndarray:
    """Global shard index ``e·Z + s`` of every key (int64 array), hashing each distinct key once."""
    seq = list(keys)
    cache: dict[Any, int] = {}
    out = np.empty(len(seq), dtype=np.int64)
    for i, k in enumerate(seq):
        g = cache.get(k)
        if g is None:
            g = executor_of(k, executors) * shards + shard_of(k, shards)
            cache[k] = g
        out[i] = g
    return out


@dataclass(frozen=True, slots=True)
class PartitionMap:
    """Where every shard of one keyed operator runs in a batch.

    Attributes
    ----------
    operator
        The keyed operator's name.
    executors, shards
        ``E`` and ``Z`` of the operator.
    units
        Distinct target units, in partition order (partition ``p`` runs ``units[p]``).
    shard_partition
        Partition of each global shard (length ``E·Z``).
    """

    operator: str
    executors: int
    shards: int
    units: tuple[str, ...]
    shard_partition: tuple[int, ...]

    @classmethod
    def from_plan(cls, plan: Plan, topology: Topology, operator: str) -> PartitionMap:
        """Read the routing tables of ``operator`` from ``plan``; every table must be complete.

        Raises
        ------
        StreamscaleError
            A table is missing, has the wrong length, or names an empty unit.
        """
        op = topology.operator(operator)
        e_count, z = op.instances, op.shards
        tables: Mapping[str, Sequence[str]] = plan.routing.tables
        units: list[str] = []
        index: dict[str, int] = {}
        parts: list[int] = []
        for e in range(e_count):
            inst = executor_instance(operator, e)
            table = tables.get(inst)
            if table is None:
                raise StreamscaleError("plan has no routing table", item=f"executor {inst}")
            if len(table) != z:
                raise StreamscaleError(
                    f"routing table has {len(table)} entries, expected {z}",
                    item=f"executor {inst}",
                )
            for unit in table:
                if not unit:
                    raise StreamscaleError("routing table names no unit", item=f"executor {inst}")
                p = index.get(unit)
                if p is None:
                    p = index[unit] = len(units)
                    units.append(unit)
                parts.append(p)
        return cls(operator, e_count, z, tuple(units), tuple(parts))

    def by_load(self, shard_load: Mapping[int, float]) -> PartitionMap:
        """The same assignment with partitions numbered by descending load.

        Spark hands a stage's tasks to free cores in partition order, so
        numbering the heaviest unit first turns its list scheduling into
        longest-processing-time-first, which shortens a batch whenever there are
        more units than cores (Graham's LPT bound, 4/3 of the optimal makespan).
        Which shards share a task never changes, so state and per-key order are
        unaffected.
        """
        load = [0.0] * len(self.units)
        for g, p in enumerate(self.shard_partition):
            load[p] += shard_load.get(g, 0.0)
        order = sorted(range(len(self.units)), key=lambda p: (-load[p], p))
        new_index = {old: new for new, old in enumerate(order)}
        return PartitionMap(
            self.operator,
            self.executors,
            self.shards,
            tuple(self.units[p] for p in order),
            tuple(new_index[p] for p in self.shard_partition),
        )

    @property
    def partitions(self) -> int:
        return len(self.units)

    def shards_of(self, partition: int) -> tuple[int, ...]:
        """Global shards the plan gives to ``partition``."""
        return tuple(g for g, p in enumerate(self.shard_partition) if p == partition)
