"""Two-tier routing of keyed tuples onto Spark tasks (paper 000, §3).

A key maps to one of ``E`` instances of its operator (Elasticutor's elastic
executors) and to one of ``Z`` shards of that instance by two *static* hashes that
never change, so a key's state never leaves its instance. Which task (unit) serves a shard is the plan's routing
table, which may change at any batch boundary. This module turns a
:class:`~streamscale.model.Plan` into the partition of every shard, from which the
keyed stage (:mod:`~streamscale.runtime.spark.keyed.keyed`) gives each Spark partition
exactly the shards of one unit.

The two hashes are Spark's own, over the key's string form
(``cast(key as string)``), so the keyed stage computes a row's shard as a column
expression (:func:`global_shard_column`), with no Python on the map side:

* instance ``e = pmod(xxhash64(key), E)`` (XXH64, seed 42);
* shard ``s = pmod(hash(key), Z)`` (Spark's Murmur3 x86 32-bit, seed 42);
* global shard ``g = e·Z + s``.

They are two different hash functions, not one hash cut in two: with ``E`` and
``Z`` powers of two, ``h mod E`` and ``h mod Z`` of a single hash share their low
bits, which would tie a key's shard to its instance (every instance would use only
``Z/E`` of its shards). xxhash64 and Murmur3 are independent mixing functions, both
built into Spark (code-generated, no Python), and both deterministic across
processes, machines and Spark versions (Spark keeps them stable for bucketed
tables), unlike Python's salted ``hash``. :func:`instance_of`, :func:`shard_of` and
:func:`global_shards` compute the same values in Python
(:func:`~streamscale.runtime.spark.routing.hashing.xxhash64_bytes`,
:func:`~streamscale.runtime.spark.routing.hashing.murmur3_bytes`) for strings, integers and
booleans. State records which scheme wrote it (:data:`HASH_SCHEME`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamscale.errors import StreamscaleError
from streamscale.model import Plan, Topology
from streamscale.model.ids import instance_id
from streamscale.runtime.spark.routing.hashing import murmur3_bytes, xxhash64_bytes

__all__ = [
    "HASH_SCHEME",
    "PartitionMap",
    "global_shard_column",
    "global_shards",
    "instance_of",
    "key_bytes",
    "shard_of",
]

#: The key → (instance, shard) hashes, as recorded with an operator's state.
HASH_SCHEME = "spark-xxhash64-murmur3/string"


def key_bytes(key: Any) -> bytes:
    """The UTF-8 bytes of ``cast(key as string)`` in Spark (strings, integers, booleans)."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, bool | np.bool_):
        return b"true" if key else b"false"
    return str(key).encode("utf-8")


def _hashes(keys: Sequence[Any], instances: int, shards: int) -> tuple[np.ndarray, np.ndarray]:
    data = [key_bytes(k) for k in keys]
    e = xxhash64_bytes(data) % instances  # numpy's % of a positive modulus is Spark's pmod
    s = murmur3_bytes(data).astype(np.int64) % shards
    return e, s


def instance_of(key: Any, instances: int) -> int:
    """The instance ``pmod(xxhash64(key), E)`` that owns ``key`` forever (paper 000, §3)."""
    return int(_hashes([key], instances, 1)[0][0])


def shard_of(key: Any, shards: int) -> int:
    """The local shard ``pmod(hash(key), Z)`` of ``key`` within its instance (paper 000, §3)."""
    return int(_hashes([key], 1, shards)[1][0])


def global_shards(keys: Iterable[Any], instances: int, shards: int) -> np.ndarray:
    """Global shard index ``e·Z + s`` of every key (int64 array), hashing each distinct key once."""
    seq = list(keys)
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in seq), np.int64, len(seq))
    e, s = _hashes(list(index), instances, shards)
    return (e * shards + s)[codes]


def global_shard_column(key: Any, instances: int, shards: int) -> Any:
    """The Spark column ``e·Z + s`` (long) of a key column, as :func:`global_shards`."""
    from pyspark.sql import functions as F

    text = key.cast("string")
    e = F.pmod(F.xxhash64(text), F.lit(instances).cast("long"))
    s = F.pmod(F.hash(text), F.lit(shards)).cast("long")
    return e * F.lit(shards).cast("long") + s


@dataclass(frozen=True, slots=True)
class PartitionMap:
    """Where every shard of one keyed operator runs in a batch.

    Attributes
    ----------
    operator
        The keyed operator's name.
    instances, shards
        ``E`` and ``Z`` of the operator.
    units
        Distinct target units, in partition order (partition ``p`` runs ``units[p]``).
    shard_partition
        Partition of each global shard (length ``E·Z``).
    """

    operator: str
    instances: int
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
            inst = instance_id(operator, e)
            table = tables.get(inst)
            if table is None:
                raise StreamscaleError("plan has no routing table", item=f"instance {inst}")
            if len(table) != z:
                raise StreamscaleError(
                    f"routing table has {len(table)} entries, expected {z}",
                    item=f"instance {inst}",
                )
            for unit in table:
                if not unit:
                    raise StreamscaleError("routing table names no unit", item=f"instance {inst}")
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
            self.instances,
            self.shards,
            tuple(self.units[p] for p in order),
            tuple(new_index[p] for p in self.shard_partition),
        )

    def folded(self, n: int, shard_load: Mapping[int, float]) -> PartitionMap:
        """At most ``n`` partitions: the heaviest ``n`` units keep theirs, and the shards of
        every other unit are spread one by one, heaviest first, each onto the partition with
        the least load so far (list scheduling, longest first).

        For a batch that would otherwise hand tasks to executors still starting (their
        JVM and Python workers cold, the batch waiting on them), or a plan whose units
        share fewer cores than there are units: the plan is unchanged, only this batch runs
        it on the cores that are ready. Spreading a folded unit's shards rather than moving
        the unit whole keeps the batch level: eight equal units on six cores put two units
        on two of the cores (the batch lasts twice a unit's work), eight units of four
        shards on six cores at most a unit and a half. A shard stays whole (its keys and
        their order go to one task); a shard's state is read by whichever task runs it.
        A shard weighs its load in the last batch plus the mean shard's
        (:func:`_shard_weights`), so that the shards one small batch left idle spread too.

        >>> m = PartitionMap("op", 1, 4, ("a", "b", "c"), (0, 1, 2, 2))
        >>> f = m.folded(2, {0: 3.0, 1: 1.0, 2: 0.5, 3: 0.5})
        >>> f.units, f.shard_partition  # c (two shards) outweighs b: kept; b joins c
        (('a', 'c'), (0, 1, 1, 1))
        >>> m = PartitionMap("op", 1, 6, ("a", "b", "c"), (0, 0, 1, 1, 2, 2))
        >>> m.folded(2, {g: 1.0 for g in range(6)}).shard_partition  # c's shards split
        (0, 0, 1, 1, 0, 1)
        """
        if n < 1:
            raise ValueError("n must be >= 1")
        if self.partitions <= n:
            return self
        weight = _shard_weights(len(self.shard_partition), shard_load)
        load = [0.0] * len(self.units)
        for g, p in enumerate(self.shard_partition):
            load[p] += weight[g]
        order = sorted(range(len(self.units)), key=lambda p: (-load[p], p))
        kept = {p: i for i, p in enumerate(order[:n])}
        acc = [load[p] for p in order[:n]]
        out = [kept.get(p, -1) for p in self.shard_partition]
        moved = [g for g, p in enumerate(self.shard_partition) if p not in kept]
        for g in sorted(moved, key=lambda g: (-weight[g], g)):
            i = min(range(n), key=lambda j: (acc[j], j))
            out[g] = i
            acc[i] += weight[g]
        return PartitionMap(
            self.operator,
            self.instances,
            self.shards,
            tuple(self.units[p] for p in order[:n]),
            tuple(out),
        )

    @property
    def partitions(self) -> int:
        return len(self.units)

    def shards_of(self, partition: int) -> tuple[int, ...]:
        """Global shards the plan gives to ``partition``."""
        return tuple(g for g, p in enumerate(self.shard_partition) if p == partition)


def _shard_weights(count: int, shard_load: Mapping[int, float]) -> list[float]:
    """Each global shard's load for folding: its load in the last batch plus the mean
    shard's. One small batch leaves most shards with no tuples (140 tuples over 256
    shards): by their measured loads alone every idle shard would follow the others onto
    the least loaded partition, so each shard counts the mean besides (a prior of one
    mean-loaded shard); all ones when nothing is measured."""
    known = [max(0.0, float(v)) for g, v in shard_load.items() if 0 <= g < count]
    mean = sum(known) / count if count else 0.0
    if not mean > 0:
        return [1.0] * count
    return [max(0.0, float(shard_load.get(g, 0.0))) + mean for g in range(count)]
