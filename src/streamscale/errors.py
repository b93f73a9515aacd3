"""Errors a user can cause. The CLI prints them in one line and exits non-zero."""

from __future__ import annotations

__all__ = ["InfeasibleError", "ModelError", "StreamscaleError"]


class StreamscaleError(Exception):
    """Base of every error streamscale raises for bad input or an impossible request.

    Parameters
    ----------
    message
        What is wrong, in one line.
    item
        The offending item (operator, edge, node, file, field), named in the message.
    """

    exit_code = 2

    def __init__(self, message: str, *, item: str | None = None) -> None:
        self.item = item
        super().__init__(f"{item}: {message}" if item else message)


class ModelError(StreamscaleError):
    """A topology, cluster, model, snapshot or plan is malformed or inconsistent."""


class InfeasibleError(StreamscaleError):
    """The request cannot be satisfied with the resources given."""

    exit_code = 3
