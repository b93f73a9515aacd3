"""The Spark data pipeline: sources, elastic keyed operators, shard state, metrics."""
