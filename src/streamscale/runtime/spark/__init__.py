"""The Spark data pipeline, in rooms (docs/architecture.md, "The runtime's rooms").

``routing`` (where a key goes), ``sources``, ``compat`` (Spark-API compatibility),
``cluster`` (cluster managers), ``state`` (shard state, output retention),
``executors`` (the session and its executors), ``keyed`` (the keyed data path),
``driver`` (the job driver); ``api`` is the Python API.
"""
