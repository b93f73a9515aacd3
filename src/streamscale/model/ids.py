"""Identifiers of the domain, built and read in one place.

Plans, files and metrics carry identifiers as strings; this module is the only
place that writes or reads those strings. Every other module goes through the
typed values and functions here, never through slicing.

=========  ===================  ===========================================
kind       string form          meaning
=========  ===================  ===========================================
operator   ``op``               a vertex of the topology
instance   ``op[e]`` or ``op``  instance ``e`` of ``op`` (Elasticutor's
                                "elastic executor", paper 000);
                                a bare ``op`` is an operator-level instance
                                (RC units, paper 001 groups, paper 004 tasks)
unit       ``inst#i``           the ``i``-th core-sized piece of an instance:
                                one Spark task
shard      ``op/g``             global shard (key group) ``g = e·Z + s``
slot       ``vm/l``             slot ``l`` of a VM (paper 004)
node       ``executor-i``       a node; on Spark, executor ``i`` of the job
=========  ===================  ===========================================

Parsing reads from the right (``#digits``, ``[digits]``), so operator names may
contain any character.

Examples
--------
>>> unit = unit_id(instance_id("count", 2), 0)
>>> unit, instance_of(unit), operator_of(unit), parse_unit(unit)
('count[2]#0', 'count[2]', 'count', UnitId(instance='count[2]', index=0))
>>> odd = unit_id(instance_id("a#b", 1), 3)  # only the trailing parts are read
>>> odd, operator_of(odd)
('a#b[1]#3', 'a#b')
>>> group_id("count", 17), slot_id("vm0", 1), node_index(executor_node(4))
('count/17', 'vm0/1', 4)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "InstanceId",
    "ShardId",
    "SlotId",
    "UnitId",
    "executor_node",
    "group_id",
    "instance_id",
    "instance_of",
    "node_index",
    "operator_of",
    "parse_instance",
    "parse_slot",
    "parse_unit",
    "slot_id",
    "unit_id",
]

_UNIT = re.compile(r"^(?P<inst>.+)#(?P<i>\d+)$")
_INSTANCE = re.compile(r"^(?P<op>.+)\[(?P<e>\d+)\]$")
_SLOT = re.compile(r"^(?P<vm>.+)/(?P<l>\d+)$")
_NODE = re.compile(r"^executor-(?P<i>\d+)$")


@dataclass(frozen=True, slots=True, order=True)
class InstanceId:
    """An instance: number ``index`` of ``operator`` (``None``: the operator itself)."""

    operator: str
    index: int | None = None

    def __str__(self) -> str:
        return self.operator if self.index is None else f"{self.operator}[{self.index}]"

    @classmethod
    def parse(cls, text: str) -> InstanceId:
        return _parse_instance(text)


@dataclass(frozen=True, slots=True, order=True)
class UnitId:
    """Unit ``index`` of ``instance`` (an instance's string form)."""

    instance: str
    index: int

    def __str__(self) -> str:
        return f"{self.instance}#{self.index}"

    @classmethod
    def parse(cls, text: str) -> UnitId | None:
        return _parse_unit(text)

    @property
    def operator(self) -> str:
        return InstanceId.parse(self.instance).operator


@dataclass(frozen=True, slots=True, order=True)
class ShardId:
    """Global shard (key group) ``shard`` of ``operator``."""

    operator: str
    shard: int

    def __str__(self) -> str:
        return f"{self.operator}/{self.shard}"

    @classmethod
    def parse(cls, text: str) -> ShardId | None:
        m = _SLOT.match(text)
        return cls(m.group("vm"), int(m.group("l"))) if m else None


@dataclass(frozen=True, slots=True, order=True)
class SlotId:
    """Slot ``index`` of VM (node) ``vm`` (paper 004)."""

    vm: str
    index: int

    def __str__(self) -> str:
        return f"{self.vm}/{self.index}"

    @classmethod
    def parse(cls, text: str) -> SlotId | None:
        m = _SLOT.match(text)
        return cls(m.group("vm"), int(m.group("l"))) if m else None


# Plans name each unit once per routing entry (10⁵ shards over 10³ units), so the same
# strings are parsed over and over; the values are frozen, so they are shared safely.
_CACHE = 1 << 16


@lru_cache(maxsize=_CACHE)
def _parse_instance(text: str) -> InstanceId:
    m = _INSTANCE.match(text)
    return InstanceId(m.group("op"), int(m.group("e"))) if m else InstanceId(text)


@lru_cache(maxsize=_CACHE)
def _parse_unit(text: str) -> UnitId | None:
    m = _UNIT.match(text)
    return UnitId(m.group("inst"), int(m.group("i"))) if m else None


def instance_id(operator: str, index: int | None = None) -> str:
    """``op[e]`` (``index`` given) or ``op``."""
    return str(InstanceId(operator, index))


def parse_instance(text: str) -> InstanceId:
    """The instance named ``text`` (a bare operator name when it has no ``[e]``)."""
    return InstanceId.parse(text)


def unit_id(instance: str, index: int) -> str:
    """Canonical name of the ``index``-th unit of ``instance``."""
    return str(UnitId(instance, index))


def parse_unit(text: str) -> UnitId | None:
    """The unit named ``text``, ``None`` when it is no ``inst#i``."""
    return UnitId.parse(text)


def instance_of(unit: str) -> str:
    """The instance a unit belongs to (``unit`` itself when it is no ``inst#i``)."""
    u = _parse_unit(unit)
    return u.instance if u is not None else unit


def operator_of(ident: str) -> str:
    """The operator of an instance or unit id."""
    return InstanceId.parse(instance_of(ident)).operator


def group_id(operator: str, shard: int) -> str:
    """Canonical id of key group ``shard`` (global index) of ``operator``."""
    return str(ShardId(operator, shard))


def slot_id(vm: str, index: int) -> str:
    """Name of slot ``index`` (0-based) of ``vm``."""
    return str(SlotId(vm, index))


def parse_slot(text: str) -> SlotId | None:
    return SlotId.parse(text)


def executor_node(index: int) -> str:
    """Node name of executor ``index`` of a Spark job (``executor-i``)."""
    return f"executor-{index}"


def node_index(node: str) -> int | None:
    """``i`` of ``executor-i``; ``None`` for other node names."""
    m = _NODE.match(node)
    return int(m.group("i")) if m else None
