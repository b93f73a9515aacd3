"""Where a key goes: Spark's hash functions, the two-tier routing of keys onto shards and units, and the realizer that turns a plan into a routing table (pure: no Spark session)."""
