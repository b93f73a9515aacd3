"""The arguments of Spark's stateful ``GroupedData`` methods, checked as Spark checks them.

``applyInPandasWithState``, ``transformWithStateInPandas`` and ``transformWithState``
take an output mode, a schema (a ``StructType`` or a DDL string) and a function or
processor; each check here refuses a wrong one in one line naming the method and the
argument, before a query starts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamscale.errors import StreamscaleError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["check_arity", "check_output_mode", "struct_type"]


def check_output_mode(mode: object, allowed: tuple[str, ...], *, method: str) -> str:
    """``mode`` in lower case when it is one of ``allowed`` (Spark reads it case-blind).

    >>> check_output_mode("Update", ("append", "update"), method="applyInPandasWithState")
    'update'
    """
    got = str(mode).lower()
    if got not in allowed:
        raise StreamscaleError(
            f"outputMode must be one of {', '.join(allowed)}", item=f"{method}: {mode!r}"
        )
    return got


def struct_type(schema: object, *, what: str, method: str) -> StructType:
    """``schema`` (a ``StructType`` or a DDL string such as ``"k string, n long"``) as a
    ``StructType``; needs an active SparkSession for a string, as Spark's parser does."""
    from pyspark.sql import types as T

    if isinstance(schema, T.StructType):
        return schema
    if not isinstance(schema, str) or not schema.strip():
        raise StreamscaleError(f"{what} must be a StructType or a DDL string", item=method)
    try:
        parsed = T._parse_datatype_string(schema)
    except Exception as exc:  # Spark's parse error: its first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StreamscaleError(f"{what} {schema!r} does not parse: {first}", item=method) from None
    if not isinstance(parsed, T.StructType):
        raise StreamscaleError(f"{what} {schema!r} is not a struct", item=method)
    return parsed


def check_arity(fn: Callable[..., Any], names: tuple[str, ...], *, what: str) -> None:
    """Refuse ``fn`` unless it takes ``len(names)`` positional arguments (``names`` say
    which, in the message); a callable whose signature cannot be read passes.

    >>> check_arity(lambda key, rows, state: None, ("key", "rows", "state"), what="func")
    >>> check_arity(lambda rows: None, ("key", "rows", "state"), what="func")
    Traceback (most recent call last):
    ...
    streamscale.errors.StreamscaleError: func: must take 3 arguments (key, rows, state)
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*names)
    except TypeError:
        raise StreamscaleError(
            f"must take {len(names)} arguments ({', '.join(names)})", item=what
        ) from None
