"""Cluster managers by master URL: one :func:`register_manager` call each.

A master URL is served by the first registered :class:`ClusterManager` whose pattern
matches it. ``elastic`` says whether streamscale may size the application's executors
through Spark's allocation client (``requestTotalExecutors`` / ``killExecutors``, as
:class:`~streamscale.runtime.spark.executors.resources.ExecutorResources` does); a local master
runs on the driver's cores. A URL no manager matches is refused before Spark starts,
naming the known managers. Spark 4 has no Mesos support, so ``mesos://`` is refused.

Examples
--------
>>> manager_for("spark://127.0.0.1:7077").name
'standalone'
>>> manager_for("local[2]").elastic
False
>>> manager_for("mesos://host:5050") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ClusterManager", "manager_for", "managers", "register_manager"]


@dataclass(frozen=True)
class ClusterManager:
    """A cluster manager: its name, the master URLs it serves (a regular expression,
    matched in full) and whether streamscale can add and remove its executors."""

    name: str
    pattern: str
    elastic: bool
    _re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_re", re.compile(self.pattern))

    def serves(self, master: str) -> bool:
        return self._re.fullmatch(master) is not None


_MANAGERS: list[ClusterManager] = []


def register_manager(manager: ClusterManager) -> ClusterManager:
    """Make ``manager`` known (one with the same name is replaced, keeping its place)."""
    for i, m in enumerate(_MANAGERS):
        if m.name == manager.name:
            _MANAGERS[i] = manager
            return manager
    _MANAGERS.append(manager)
    return manager


def manager_for(master: str) -> ClusterManager | None:
    """The first registered manager serving ``master`` (``None``: none does)."""
    return next((m for m in _MANAGERS if m.serves(master)), None)


def managers() -> tuple[ClusterManager, ...]:
    """Every registered manager, in lookup order."""
    return tuple(_MANAGERS)


register_manager(ClusterManager("local", r"local(\[(\*|[1-9]\d*)(,\d+)?\])?", elastic=False))
register_manager(ClusterManager("standalone", r"spark://\S+", elastic=True))
register_manager(ClusterManager("kubernetes", r"k8s://\S+", elastic=True))
register_manager(ClusterManager("yarn", r"yarn", elastic=True))
