"""Cluster managers by master URL and the loopback Spark standalone cluster."""
