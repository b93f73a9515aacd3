"""Sources by Spark format name: one module plus one :func:`register_source` call.

A source streamscale knows more about than Spark does is a :class:`SourceEntry`: its
PySpark ``DataSource`` (registered with a session before a query reads it), its options
(a frozen dataclass with ``from_options``: unknown names and bad values are refused
before Spark starts, one line naming the option) and, optionally, what it has offered
so far (its end offsets — what the mid-batch watch reads to see a surge as it arrives,
the way a Kafka source's end offsets would serve). The bundled sources (the workload
generator, trace replay, Nexmark) register themselves in their own modules, which
:func:`source` imports on first use; any other module registers its own the same way
(``docs/extending.md``, "A source"). Formats nobody registered are Spark's own sources
(files, rate, Kafka), which check their options themselves.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class TicksSpec:
...     rate: float = 1.0
...     @classmethod
...     def from_options(cls, options):
...         return cls(float(options.get("rate", 1.0)))
>>> _ = register_source(SourceEntry("doc_ticks", datasource=lambda: None, spec=lambda: TicksSpec,
...     available=lambda o: (lambda s: TicksSpec.from_options(o).rate * s)))
>>> source("doc_ticks").offered({"rate": "2"})(10.0)
20.0
>>> check_options("doc_ticks", {"rat": "2"}, item="source")
Traceback (most recent call last):
...
streamscale.errors.StreamscaleError: source: 'rat': unknown doc_ticks option (known: rate)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from streamscale.errors import StreamscaleError

__all__ = [
    "SourceEntry", "check_options", "register_all", "register_source", "source",
    "source_offered", "sources",
]  # fmt: skip

#: modules whose import registers a bundled source (imported on first lookup)
BUNDLED = (
    "streamscale.runtime.spark.sources.sources",
    "streamscale.runtime.spark.sources.trace",
    "streamscale.nexmark.source",
)


@dataclass(frozen=True)
class SourceEntry:
    """One source streamscale knows.

    Parameters
    ----------
    name
        Spark's format name (``spark.readStream.format(name)``).
    datasource
        Returns the PySpark ``DataSource`` class (called when a query needs it, so that
        registering imports nothing heavy).
    spec
        Returns the options class: a dataclass whose public fields are the option names
        and whose ``from_options(options)`` checks their values.
    available
        Optional: ``available(options)`` returns ``f(elapsed_s)``, the tuples the source
        has offered ``elapsed_s`` after the stream's start (its ``t0`` offset).
    """

    name: str
    datasource: Callable[[], Any]
    spec: Callable[[], Any]
    available: Callable[[Mapping[str, Any]], Callable[[float], float]] | None = None

    def offered(self, options: Mapping[str, Any]) -> Callable[[float], float] | None:
        """What the source has offered ``elapsed_s`` into the stream (``None``: unknown)."""
        return None if self.available is None else self.available(options)


_SOURCES: dict[str, SourceEntry] = {}
_loaded = False


def register_source(entry: SourceEntry) -> SourceEntry:
    """Make ``entry`` known by its format name (a later registration replaces it)."""
    if not entry.name or not isinstance(entry.name, str):
        raise StreamscaleError("a source needs a format name", item=repr(entry.name))
    _SOURCES[entry.name] = entry
    return entry


def _load_bundled() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in BUNDLED:
            importlib.import_module(mod)


def source(name: str) -> SourceEntry | None:
    """The entry registered for format ``name`` (``None``: one of Spark's own sources)."""
    _load_bundled()
    return _SOURCES.get(name)


def source_offered(fmt: str, options: Mapping[str, Any]) -> Callable[[float], float] | None:
    """What the source registered as ``fmt`` has offered ``elapsed_s`` into the stream
    with ``options`` (``None``: not registered, or it does not know)."""
    entry = source(fmt)
    return None if entry is None else entry.offered(options)


def sources() -> tuple[str, ...]:
    """Every registered format name, sorted."""
    _load_bundled()
    return tuple(sorted(_SOURCES))


def check_options(fmt: str, options: Mapping[str, Any], *, item: str) -> None:
    """A registered source's options checked before Spark starts: unknown names (listing
    the known ones) and bad values are one-line errors naming the option."""
    entry = source(fmt)
    if entry is None:
        return
    spec_cls = entry.spec()
    known = [f.name for f in fields(spec_cls) if not f.name.startswith("_")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise StreamscaleError(
            f"unknown {fmt} option (known: {', '.join(known)})", item=f"{item}: '{unknown[0]}'"
        )
    spec_cls.from_options(options)


def register_all(spark: Any, only: str | None = None) -> None:
    """Register the ``DataSource`` of every registered source (or of ``only``) with
    ``spark``; formats nobody registered are left to Spark."""
    _load_bundled()
    for name, entry in _SOURCES.items():
        if only is None or name == only:
            cls = entry.datasource()
            if cls is not None:
                spark.dataSource.register(cls)
