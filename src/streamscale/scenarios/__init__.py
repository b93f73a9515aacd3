"""Scenarios run against the Spark runtime: surges, the Spark-native baselines, scoring."""
