"""Streaming sources: the paced reader, the source registry, the workload generator and trace replay."""
