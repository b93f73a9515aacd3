"""Runtimes that execute jobs: Spark (the data pipeline)."""
