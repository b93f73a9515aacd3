"""The keyed data path: the map side and the keyed stage of an elastic keyed operator, the declarative keyed operators (``agg/``), the bundled operator functions and the executors' worker daemon."""
