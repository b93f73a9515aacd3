"""streamscale: elasticity and scheduling for stateful stream processing on Spark.

Layers (see ``ARCHITECTURE``): :mod:`streamscale.model` (pure domain types),
:mod:`streamscale.planning` (pure algorithms), :mod:`streamscale.control`
(the Collector → Planner → Realizer loop), :mod:`streamscale.runtime.spark`
(the data pipeline), :mod:`streamscale.sim` (the cluster simulator).
"""

from __future__ import annotations

from streamscale.errors import StreamscaleError

__version__ = "0.1.0"
__all__ = ["StreamscaleError", "__version__", "stream"]


def stream(df: object, **kwargs: object) -> object:
    """A job over a streaming DataFrame: see :func:`streamscale.runtime.spark.api.stream`."""
    from streamscale.runtime.spark.api import stream as _stream

    return _stream(df, **kwargs)  # type: ignore[arg-type]
