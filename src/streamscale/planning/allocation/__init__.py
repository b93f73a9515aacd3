"""Allocation planners: how many cores (units) each instance gets.

One module per algorithm family; import the algorithms from their modules.
"""

from __future__ import annotations

__all__: list[str] = []
