"""Settings declared once: name, type, default, bounds and a one-line description.

Every tunable of a planner, policy, controller or source is a :class:`Setting` in
the :class:`Schema` declared next to the code that reads it. The same schema
parses ``--param KEY=VALUE`` pairs, YAML values and Python keyword values,
rejects unknown names (listing the known ones) and out-of-range values (naming
the setting), and writes the CLI's ``--help`` text, so a default or a bound is
written in exactly one place.

Examples
--------
>>> s = Schema("policy", Setting("theta", float, 1.2, "δ threshold", low=1.0))
>>> s.parse({"theta": "1.5"})
{'theta': 1.5}
>>> s.parse({})
{'theta': 1.2}
>>> s.parse({"thta": 2})
Traceback (most recent call last):
...
streamscale.errors.StreamscaleError: thta: unknown policy setting (known: theta)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from streamscale.errors import StreamscaleError

__all__ = ["Frozen", "Schema", "Setting", "parse_pairs", "split_params"]

_TYPES: tuple[type, ...] = (bool, int, float, str)


@dataclass(frozen=True, slots=True)
class Setting:
    """One tunable.

    Parameters
    ----------
    name
        What users write (``--param name=value``, a YAML key, a keyword argument).
    type
        ``bool``, ``int``, ``float`` or ``str``.
    default
        The value when unset; ``None`` means "derived at run time" (the description
        says from what).
    description
        One line for ``--help``.
    low, high
        Inclusive bounds for numbers (``None``: unbounded).
    low_open
        ``True``: the value must be strictly greater than ``low``.
    choices
        For strings: the allowed values.
    """

    name: str
    type: type
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise TypeError(f"setting {self.name}: unsupported type {self.type!r}")
        if self.default is not None:
            self.coerce(self.default)

    def coerce(self, value: Any) -> Any:
        """``value`` (a Python value or the text of one) as this setting's type, checked."""
        if value is None:
            if self.default is None:
                return None
            raise StreamscaleError("needs a value", item=self.name)
        v = self._typed(value)
        if isinstance(v, int | float) and not isinstance(v, bool):
            self._check_bounds(v)
        if self.choices is not None and v not in self.choices:
            raise StreamscaleError(
                f"must be one of {', '.join(self.choices)}; got {value!r}", item=self.name
            )
        return v

    def _typed(self, value: Any) -> Any:
        if isinstance(value, str) and self.type is not str:
            with contextlib.suppress(yaml.YAMLError):
                value = yaml.safe_load(value) if value.strip() else value
        t = self.type
        if t is bool:
            if isinstance(value, bool):
                return value
            raise StreamscaleError(f"must be true or false, got {value!r}", item=self.name)
        if t is str:
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                return str(value)
            raise StreamscaleError(f"must be a string, got {value!r}", item=self.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StreamscaleError(f"must be a number, got {value!r}", item=self.name)
        if not math.isfinite(value):
            raise StreamscaleError(f"must be finite, got {value!r}", item=self.name)
        if t is int:
            if isinstance(value, float) and not value.is_integer():
                raise StreamscaleError(f"must be an integer, got {value!r}", item=self.name)
            return int(value)
        return float(value)

    def _check_bounds(self, v: float) -> None:
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            op = ">" if self.low_open else ">="
            raise StreamscaleError(f"must be {op} {self.low:g}, got {v:g}", item=self.name)
        if self.high is not None and v > self.high:
            raise StreamscaleError(f"must be <= {self.high:g}, got {v:g}", item=self.name)

    @property
    def bounds(self) -> str:
        """The bounds in words, e.g. ``> 0``, ``[0, 1]``, ``one of a|b``; empty if none."""
        if self.choices:
            return "one of " + "|".join(self.choices)
        if self.low is not None and self.high is not None:
            return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"<= {self.high:g}"
        return ""

    def help(self) -> str:
        default = "derived" if self.default is None else f"{self.default!r}"
        extra = f", {self.bounds}" if self.bounds else ""
        return f"{self.name} ({self.type.__name__}, default {default}{extra}): {self.description}"


class Frozen(Mapping[str, Any]):
    """Parsed settings, read-only: what the edge (CLI, Python API) hands the core.

    ``group`` names the schema that parsed them; the core reads these values as they
    are, without coercing or defaulting them again.
    """

    __slots__ = ("_values", "group")

    def __init__(self, group: str, values: Mapping[str, Any]) -> None:
        self.group = group
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Frozen({self.group!r}, {self._values!r})"

    def derive(self, **values: Any) -> Frozen:
        """These settings with derived values filled in (a ``None`` default resolved at
        run time, e.g. ``max_cores`` from the cluster); nothing is parsed again."""
        return Frozen(self.group, {**self._values, **values})


@dataclass(frozen=True, slots=True)
class Schema:
    """The settings of one component (a policy family, the controller, a planner, a source)."""

    group: str
    settings: tuple[Setting, ...] = field(default_factory=tuple)

    def __init__(self, group: str, *settings: Setting) -> None:
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "settings", tuple(settings))
        names = [s.name for s in settings]
        if len(set(names)) != len(names):
            raise ValueError(f"{group}: a setting is declared twice")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.settings)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {s.name: s.default for s in self.settings}

    def freeze(self, values: Mapping[str, Any] | None, *, group: str | None = None) -> Frozen:
        """:meth:`parse` (defaults filled) as a read-only :class:`Frozen` mapping."""
        return Frozen(group or self.group, self.parse(values))

    def parse(self, values: Mapping[str, Any] | None, *, defaults: bool = True) -> dict[str, Any]:
        """Checked values; unknown names are errors. ``defaults`` fills what is unset."""
        out = self.defaults() if defaults else {}
        for key, raw in (values or {}).items():
            if key not in self:
                known = ", ".join(self.names) or "none"
                raise StreamscaleError(f"unknown {self.group} setting (known: {known})", item=key)
            out[key] = self[key].coerce(raw)
        return out

    def read(self, values: Mapping[str, Any] | None) -> dict[str, Any]:
        """This schema's settings out of ``values``, which may hold other components' too.

        Defaults fill what is unset; names this schema does not declare are left to the
        schemas that do (:func:`streamscale.planning.registry.check_params` rejects names
        no chosen component declares). Values of a :class:`Frozen` mapping were parsed
        at the edge and are taken as they are.
        """
        if isinstance(values, Frozen):
            return {s.name: values.get(s.name, s.default) for s in self.settings}
        return self.parse({k: v for k, v in (values or {}).items() if k in self})

    def help(self) -> str:
        return "; ".join(s.help() for s in self.settings)

    def merged(self, other: Schema, *, group: str | None = None) -> Schema:
        """This schema and ``other`` together (names must not clash)."""
        return Schema(group or self.group, *self.settings, *other.settings)


def parse_pairs(items: Iterable[str], *, option: str = "--param") -> dict[str, str]:
    """``KEY=VALUE`` strings as a mapping of raw strings (typing is the schema's job)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StreamscaleError("expected KEY=VALUE", item=f"{option} {item}")
        out[key.strip()] = value.strip()
    return out


def split_params(values: Mapping[str, Any], *schemas: Schema) -> list[dict[str, Any]]:
    """Route each value to the schema that declares it; unknown names list every known one.

    Returns one mapping per schema (only the names given, values as given): each
    schema's :meth:`Schema.parse` then types and checks its part, once.
    """
    parts: list[dict[str, Any]] = [{} for _ in schemas]
    for key, raw in values.items():
        for i, schema in enumerate(schemas):
            if key in schema:
                parts[i][key] = raw
                break
        else:
            known = ", ".join(n for s in schemas for n in s.names) or "none"
            groups = " or ".join(dict.fromkeys(s.group for s in schemas))
            raise StreamscaleError(f"unknown {groups} setting (known: {known})", item=key)
    return parts
