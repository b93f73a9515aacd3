"""Warm the executors' Python workers before they run a batch.

A batch whose tasks land on a fresh Python worker pays for forking it and importing
pandas, pyarrow and the keyed stage first; a duration-bound run would count that
against the policy it runs. :func:`warm_up` runs one tiny task per core that does
those imports, before a query's first batch (the job driver) and when executors join
a running job (:meth:`ExecutorResources.apply
<streamscale.runtime.spark.executors.resources.ExecutorResources.apply>`).

The keyed stage's module is named, not imported, here (as
:func:`~streamscale.runtime.spark.executors.resources.executor_conf` names the worker
daemon): the executors room sits below the keyed one (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["WARM_MODULES", "warm_up"]

#: What every keyed stage's task imports.
WARM_MODULES: tuple[str, ...] = ("pandas", "pyarrow", "streamscale.runtime.spark.keyed.keyed")


def _warm(_: int, modules: tuple[str, ...] = WARM_MODULES) -> int:
    for name in modules:
        importlib.import_module(name)
    return os.getpid()


def warm_up(sc: Any, tasks: int) -> set[int]:
    """Start Python workers for ``tasks`` tasks (at least one) with :data:`WARM_MODULES`
    imported; the process ids of the workers that ran them."""
    n = max(1, tasks)
    return set(sc.parallelize(range(n), n).map(_warm).collect())
