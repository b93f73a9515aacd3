"""What a run keeps: versioned shard state (the backend interface, local and pyarrow-filesystem backends, changelogs, bounded I/O) and the retention of a long run's output."""
