"""Declarative keyed operators: ``key_by(...).agg(...)`` on Arrow shard state.

:mod:`accumulators` (the supported aggregates and their accumulators),
:mod:`kernels` (vectorized merges on Arrow tables) and :mod:`operator` (the Spark
data path: partial aggregates before the shuffle, merged per shard in the task).
"""
