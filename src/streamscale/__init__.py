"""streamscale: elasticity and scheduling for stateful stream processing on Spark.

What a user types comes from here::

    import streamscale

    spark = streamscale.session("local[2]")
    events = spark.readStream.format("rate").load().selectExpr("CAST(value % 10 AS STRING) AS user")
    counts = streamscale.stream(events).key_by("user").applyInPandasWithState(
        running_count, "user string, count long", "total long", "append", "NoTimeout"
    )
    result = counts.to("parquet", path="counts").run(checkpoint="ck", max_batches=2)

* :func:`stream` — a job over a streaming DataFrame (:class:`Stream`); ``key_by(k)``
  (:class:`KeyedStream`) answers Spark's stateful ``GroupedData`` methods;
* :func:`session` — a SparkSession; :class:`Executors` — the Spark executors a run may
  hold, given once to :func:`session` and to :meth:`Stream.run`;
* :class:`StreamingQuery` — what :meth:`Stream.start` returns: the running job, with
  Spark's ``awaitTermination``, ``stop``, ``isActive``, ``lastProgress``,
  ``recentProgress`` and ``exception``; :meth:`Stream.run` starts it and waits for its end;
* :class:`RunResult` and :class:`GraphBatch` — what :meth:`Stream.run` (and
  ``StreamingQuery.result()``) returns (its recent batches, ``records``, each a
  :class:`GraphBatch`);
* :class:`StreamscaleError` — every error a user can cause, in one line.

The names are loaded on first use, so ``import streamscale`` (and the pure layers below
it, :mod:`streamscale.model` and :mod:`streamscale.planning`) pulls in neither Spark nor
the runtime. The layers: see ``docs/architecture.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from streamscale.errors import StreamscaleError

if TYPE_CHECKING:
    from streamscale.runtime.spark.api import KeyedStream, Stream, WindowedStream, stream
    from streamscale.runtime.spark.app import Executors, session
    from streamscale.runtime.spark.driver.graph_batch import GraphBatch
    from streamscale.runtime.spark.driver.query import StreamingQuery
    from streamscale.runtime.spark.driver.result import RunResult

__version__ = "0.1.0"
__all__ = [
    "Executors",
    "GraphBatch",
    "KeyedStream",
    "RunResult",
    "Stream",
    "StreamingQuery",
    "StreamscaleError",
    "WindowedStream",
    "__version__",
    "session",
    "stream",
]

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "stream": "streamscale.runtime.spark.api",
    "Stream": "streamscale.runtime.spark.api",
    "KeyedStream": "streamscale.runtime.spark.api",
    "WindowedStream": "streamscale.runtime.spark.api",
    "session": "streamscale.runtime.spark.app",
    "Executors": "streamscale.runtime.spark.app",
    "RunResult": "streamscale.runtime.spark.driver.result",
    "GraphBatch": "streamscale.runtime.spark.driver.graph_batch",
    "StreamingQuery": "streamscale.runtime.spark.driver.query",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamscale' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
