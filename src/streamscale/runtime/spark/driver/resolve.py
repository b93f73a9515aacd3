"""Names in a job's description resolved: a ``module:function`` path, an option value."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from streamscale.errors import StreamscaleError

__all__ = ["option_text", "resolve_function"]


def resolve_function(path: str, *, item: str) -> Callable[..., Any]:
    """Import ``package.module:function``; a one-line error naming ``item`` when it fails."""
    mod_name, sep, attr = path.partition(":")
    if not sep or not mod_name or not attr:
        raise StreamscaleError(f"function {path!r} is not of the form module:function", item=item)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise StreamscaleError(f"cannot import {mod_name!r}: {exc}", item=item) from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise StreamscaleError(f"{mod_name!r} has no function {attr!r}", item=item)
    return fn  # type: ignore[no-any-return]


def option_text(v: Any) -> str:
    """A source option as Spark takes it: booleans lower-case, lists comma-joined."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return str(v)
