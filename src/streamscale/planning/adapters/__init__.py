"""Adapters from the domain model to each planner family (one module per family)."""
