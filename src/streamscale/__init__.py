"""streamscale: elasticity and scheduling for stateful stream processing on Spark.

Layers (see ``ARCHITECTURE``): :mod:`streamscale.model` (pure domain types),
:mod:`streamscale.planning` (pure algorithms), :mod:`streamscale.control`
(the Collector → Planner → Realizer loop), :mod:`streamscale.runtime.spark`
(the data pipeline), :mod:`streamscale.sim` (the cluster simulator).
"""

from __future__ import annotations

from streamscale.errors import StreamscaleError

__version__ = "0.1.0"
__all__ = ["StreamscaleError", "__version__"]
