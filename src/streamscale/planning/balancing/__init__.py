"""Balancing planners: which task (or node) serves each shard / key group.

One module per algorithm family; import the algorithms from their modules.
"""

from __future__ import annotations

__all__: list[str] = []
