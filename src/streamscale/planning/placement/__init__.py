"""Placement planners: where each unit (task, operator instance) runs.

One module per algorithm family; import the algorithms from their modules.
"""

from __future__ import annotations

__all__: list[str] = []
