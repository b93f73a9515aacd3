"""A job's description resolved: a ``module:function`` path, an option value, the source."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.model import Topology

__all__ = ["SourceSpec", "option_text", "resolve_function"]

#: A source operator's parameters that are the job's, not Spark's source options.
_SOURCE_KEYS = ("format", "trigger_s")


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """A job's source as its operator's parameters declare it, parsed once: Spark's
    source ``format``, the trigger interval and Spark's source options (text, as
    ``DataStreamReader.option`` takes them; the operator's ``rate`` as ``rate`` when
    the options do not set it)."""

    format: str
    trigger_s: float
    options: Mapping[str, str]

    @classmethod
    def of(cls, topology: Topology, source: str, *, source_class: type | None = None) -> SourceSpec:
        """``source``'s settings in ``topology``; its options are checked against the
        format unless the job brings its own ``source_class``.

        Raises
        ------
        StreamscaleError
            A bad trigger or option, naming the source operator.
        """
        from streamscale.runtime.run_config import source_trigger
        from streamscale.runtime.spark.sources.sources import check_source_options

        item = f"operator {source}"
        src = topology.operator(source)
        params = dict(src.params)
        fmt = str(params.get("format", "streamscale_generator"))
        trigger_s = source_trigger(params, item=item)
        options = {k: option_text(v) for k, v in params.items() if k not in _SOURCE_KEYS}
        if src.rate is not None and "rate" not in options:
            options["rate"] = option_text(src.rate)
        if source_class is None:
            check_source_options(fmt, options, item=item)
        return cls(fmt, trigger_s, options)


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
