"""Errors a user can cause. The CLI prints them in one line and exits non-zero."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = [
    "EXTRAS",
    "InfeasibleError",
    "ModelError",
    "StreamscaleError",
    "import_extra",
    "missing_extra",
    "require_extra",
]

#: the top-level modules each optional extra of the package installs (pyproject.toml,
#: ``[project.optional-dependencies]``); a plain install runs the data pipeline and the
#: elastic policy without them.
EXTRAS: dict[str, tuple[str, ...]] = {"papers": ("ortools", "pymetis", "matplotlib")}


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


def missing_extra(exc: BaseException) -> StreamscaleError | None:
    """The one-line error for ``exc`` when it is the import of an extra's module that is
    not installed; ``None`` for any other exception.

    >>> print(missing_extra(ModuleNotFoundError("No module named 'pymetis'", name="pymetis")))
    pymetis: needs the 'papers' extra: pip install "streamscale[papers]"
    """
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    for extra, modules in EXTRAS.items():
        if top in modules:
            return StreamscaleError(
                f"needs the '{extra}' extra: pip install \"streamscale[{extra}]\"", item=top
            )
    return None


def import_extra(module: str) -> ModuleType:
    """``importlib.import_module(module)``, or the one-line error naming the extra that
    installs it (:func:`missing_extra`)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        err = missing_extra(exc)
        if err is None:
            raise
        raise err from None


def require_extra(extra: str) -> None:
    """Refuse, in one line and before anything heavy starts, a command that needs
    ``extra`` when one of its modules is not installed (:func:`missing_extra`)."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise missing_extra(ModuleNotFoundError(module, name=module)) or StreamscaleError(
                f"{module} is not installed", item=extra
            )
