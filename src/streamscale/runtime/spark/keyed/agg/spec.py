"""An aggregation as the user declares it (driver side), and what its tasks are given.

:class:`Aggregation` is the operator ``key_by(keys).agg(*aggs)`` adds to a job: it
reads each ``pyspark.sql.functions`` aggregate Column (its function, argument and
options, from the Column's expression tree) and refuses anything it cannot merge,
at build time, in one line naming the aggregate. Against the operator's input
(:meth:`Aggregation.resolve`, once per input schema) it lets Spark itself name and
type the outputs — the schema of ``df.groupBy(keys).agg(*aggs)`` — and builds the
partial aggregates Spark computes before the shuffle (:func:`partials`).

:class:`AggOp` is the part a reduce task needs: plain data, no Spark objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.accumulators import AggCall, Slot, canonical, slots_of

__all__ = [
    "MODES",
    "WE",
    "WS",
    "AggOp",
    "Aggregation",
    "Parsed",
    "Resolved",
    "parse_agg",
    "partials",
]

#: Output modes, as Spark's (``append`` needs a window and a watermark).
MODES = ("update", "complete", "append")
N_ROWS = "__ss_n"  # input rows per partial row (the shard's load, for the planners)
WIN, WS, WE = "__ss_w", "__ss_ws", "__ss_we"  # a window, its start and end
LATE = "__ss_late"  # a session partial of rows behind the late-row watermark
_KEY_TYPES = (
    "StringType", "IntegerType", "LongType", "ShortType", "ByteType", "BooleanType",
    "DateType", "TimestampType", "TimestampNTZType", "DoubleType", "FloatType",
    "DecimalType", "BinaryType",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Parsed:
    """One aggregate Column, read: canonical function, its argument Column, options."""

    func: str
    arg: Any  # pyspark Column: the aggregated expression
    ignore_nulls: bool
    column: Any  # the user's Column (Spark names and types the output from it)
    text: str
    options: tuple[float, ...] = ()  # a sketch's settings (AggCall.options)


_UNITS_US = {
    "microsecond": 1, "millisecond": 1_000, "second": 1_000_000, "minute": 60_000_000,
    "hour": 3_600_000_000, "day": 86_400_000_000, "week": 604_800_000_000,
}  # fmt: skip


def interval_us(text: str, *, item: str) -> int:
    """Microseconds of a Spark interval string such as ``"10 seconds"`` or
    ``"1 minute 30 seconds"`` (fixed-length units only).

    Raises
    ------
    StreamscaleError
        Not ``<number> <unit>`` pairs of microseconds to weeks, or not positive.
    """
    words = text.replace("interval", "").replace("INTERVAL", "").split()
    total = 0.0
    try:
        if not words or len(words) % 2:
            raise ValueError(text)
        for num, unit in zip(words[::2], words[1::2], strict=True):
            total += float(num) * _UNITS_US[unit.lower().removesuffix("s")]
    except (KeyError, ValueError):
        raise StreamscaleError(
            f"interval {text!r} is not '<number> <unit>' (microseconds to weeks)", item=item
        ) from None
    if total <= 0:
        raise StreamscaleError(f"interval {text!r} must be positive", item=item)
    return int(total)


def _seq(s: Any) -> list[Any]:
    return [s.apply(i) for i in range(s.size())]


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def parse_agg(col: Any, *, max_collect: int | None = None) -> Parsed:
    """Read one ``pyspark.sql.functions`` aggregate Column (optionally aliased).

    Raises
    ------
    StreamscaleError
        Not a Column, not an aggregate call, or one :func:`canonical` refuses.
    """
    from pyspark.sql import Column

    text = str(col)
    if not isinstance(col, Column) or not hasattr(col, "_jc"):
        raise StreamscaleError("not a pyspark.sql.functions aggregate Column", item=text)
    text = text.removeprefix("Column<'").removesuffix("'>")
    node = col._jc.node()
    if _kind(node) == "Alias":
        node = node.child()
    if _kind(node) != "UnresolvedFunction" or node.isUserDefinedFunction():
        raise StreamscaleError(
            "not an aggregate function call (e.g. F.sum('x'), F.count('*'))", item=text
        )
    args = _seq(node.arguments())
    name = str(node.functionName())
    ignore = False
    if name.lower() in ("first", "last", "first_value", "last_value") and len(args) == 2:
        flag = args[1]
        if _kind(flag) != "Literal" or not isinstance(flag.value(), bool):
            raise StreamscaleError(f"{name}'s ignorenulls must be a literal", item=text)
        ignore, args = bool(flag.value()), args[:1]
    options: tuple[float, ...] = ()
    if name.lower() in _SKETCHES:
        args, options = _sketch_options(name.lower(), args, text)
    fn = canonical(
        name, distinct=bool(node.isDistinct()), args=len(args), item=text, max_collect=max_collect
    )
    from pyspark import SparkContext
    from pyspark.sql.classic.column import Column as ClassicColumn

    jvm = SparkContext._active_spark_context._jvm  # type: ignore[union-attr]
    arg = ClassicColumn(jvm.org.apache.spark.sql.Column(args[0]))
    return Parsed(fn, arg, ignore, col, text, options)


_SKETCHES = ("approx_count_distinct", "approxcountdistinct", "percentile_approx",
             "approx_percentile")  # fmt: skip


def _literal(node: Any, what: str, item: str) -> float:
    if _kind(node) != "Literal" or isinstance(node.value(), bool | str):
        raise StreamscaleError(f"{what} must be a number literal", item=item)
    return float(node.value())


def _sketch_options(name: str, args: list[Any], item: str) -> tuple[list[Any], tuple[float, ...]]:
    """The value argument and the sketch settings of ``approx_count_distinct(x[, rsd])`` or
    ``percentile_approx(x, p | [p, ...][, accuracy])`` (Spark's defaults 0.05, 10000)."""
    from streamscale.runtime.spark.keyed.agg.sketches import hll_lg_k, kll_k

    if name.startswith("approx") and "count" in name:
        if len(args) not in (1, 2):
            raise StreamscaleError("approx_count_distinct takes (column[, rsd])", item=item)
        rsd = _literal(args[1], "rsd", item) if len(args) == 2 else 0.05
        if not 0 < rsd < 1:
            raise StreamscaleError("rsd must be in (0, 1)", item=item)
        return args[:1], (float(hll_lg_k(rsd)),)
    if len(args) not in (2, 3):
        raise StreamscaleError(
            "percentile_approx takes (column, percentage[, accuracy])", item=item
        )
    p = args[1]
    many = _kind(p) == "UnresolvedFunction" and str(p.functionName()).lower() == "array"
    ps = [_literal(x, "a percentage", item) for x in _seq(p.arguments())] if many else [
        _literal(p, "the percentage", item)
    ]  # fmt: skip
    if not ps or not all(0.0 <= x <= 1.0 for x in ps):
        raise StreamscaleError("percentages must be in [0, 1]", item=item)
    acc = _literal(args[2], "accuracy", item) if len(args) == 3 else 10_000
    if acc < 1 or acc != int(acc):
        raise StreamscaleError("accuracy must be a positive integer", item=item)
    return args[:1], (float(kll_k(int(acc))), float(many), *ps)


def partials(p: Parsed, call: AggCall) -> list[Any]:
    """The Columns Spark computes per group of a batch for ``call`` (its :func:`slots_of`)."""
    from pyspark.sql import functions as F

    slots = slots_of(call)
    a = p.arg
    f = call.func
    if f == "count":
        cols = [F.count(a)]
    elif f == "sum":
        cols = [F.sum(a)]
    elif f == "min":
        cols = [F.min(a)]
    elif f == "max":
        cols = [F.max(a)]
    elif f == "avg":
        cols = [F.sum(a.cast("double")), F.count(a)]
    elif f == "first":
        cols = [F.first(a, ignorenulls=p.ignore_nulls)]
    elif f == "last":
        cols = [F.last(a, ignorenulls=p.ignore_nulls)]
    elif f == "collect_list":
        cols = [F.collect_list(a)]
    elif f == "approx_count_distinct":
        # Spark's sketch takes ints, longs, strings and binaries; other values by their text
        cols = [F.hll_sketch_agg(a, int(call.options[0]))]
    elif f == "percentile_approx":
        x = a.cast("double")
        cols = [F.kll_sketch_agg_double(x, int(call.options[0])), F.count(F.when(F.isnan(x), 1))]
    else:  # count_distinct, collect_set
        cols = [F.collect_set(a)]
    return [c.alias(s.column) for c, s in zip(cols, slots, strict=True)]


@dataclass(frozen=True, slots=True)
class AggOp:
    """What a reduce task needs of an aggregation (picklable, no Spark objects).

    ``keys``: the grouping columns of the state (the user's keys, and the window's
    bounds for a windowed aggregation); ``out``: the output columns, in order.
    """

    keys: tuple[str, ...]
    calls: tuple[AggCall, ...]
    mode: str
    max_collect: int | None
    out: tuple[str, ...]
    window: str | None = None  # output column of the window (its bounds: WS, WE)
    session: bool = False  # session windows: overlapping ones of a key merge
    bounds: tuple[str, str] | None = None  # output the window as (start, end) columns
    wait_ms: float = 0.0  # emulated cost: waited per input row in the reduce task

    @property
    def slots(self) -> tuple[Slot, ...]:
        return tuple(s for c in self.calls for s in slots_of(c))


@dataclass(frozen=True, slots=True)
class Resolved:
    """An aggregation against one input schema."""

    op: AggOp
    group: tuple[Any, ...]  # Spark group-by Columns of the partial aggregation
    partial: tuple[Any, ...]  # Spark partial-aggregate Columns (aliased to slot names)
    out_schema: Any  # pyspark StructType of the output (Spark's own)
    flat: tuple[Any, ...] = ()  # Columns replacing the window struct by its bounds


@dataclass(slots=True)
class Aggregation:
    """``key_by(keys).agg(*aggs)``: the graph's function for a declarative keyed operator.

    Parameters
    ----------
    keys
        Grouping column names.
    aggs
        ``pyspark.sql.functions`` aggregate Columns.
    mode
        ``update`` (default: the groups changed this batch, full values) or ``complete``
        (every group, every batch).
    max_collect
        The most values a ``collect_list``/``collect_set`` of one group may hold
        (required with either; exceeding it fails the batch, naming the group).
    """

    keys: tuple[str, ...]
    aggs: tuple[Any, ...]
    mode: str = "update"
    max_collect: int | None = None
    parsed: tuple[Parsed, ...] = ()
    window: tuple[str, str, str | None] | None = None  # (time column, size | gap, slide)
    time_mode: str | None = None  # "EventTime": windows close on the query's watermark
    session: bool = False  # session windows (``window`` = (time column, gap, None))
    drops_late: bool = False  # rows of windows closed before the batch are dropped
    bounds: tuple[str, str] | None = None  # the window as two columns (start, end)
    wait_ms: float = 0.0  # emulated per-row cost, waited (see build)
    _cache: dict[str, Resolved] = field(default_factory=dict, repr=False)
    columns: dict[Any, Any] = field(default_factory=dict, repr=False)  # plan-only Columns

    vectorized = True  # marks the graph node's function as a declarative operator

    @property
    def batch_clock(self) -> bool:
        """Whether the operator needs Spark's batches without input (windows closing)."""
        return self.time_mode is not None

    @classmethod
    def build(
        cls,
        keys: Sequence[str],
        aggs: Sequence[Any],
        *,
        mode: str = "update",
        max_collect: int | None = None,
        item: str = "agg",
        window: tuple[str, str, str | None] | None = None,
        watermark: tuple[str, int] | None = None,
        session: bool = False,
        bounds: tuple[str, str] | None = None,
        wait_ms: float = 0.0,
    ) -> Aggregation:
        """Check and read the declaration; one line naming what is refused.

        ``window``: (time column, size, slide) of a windowed aggregation, or with
        ``session`` (time column, gap, None) of session windows; ``watermark``: the
        query's (column, delay), closing windows on that column; ``bounds``: names of
        two output columns holding the window's start and end in place of Spark's
        ``window`` struct (what ``.select("window.start", "window.end", ...)`` gives);
        ``wait_ms``: an emulated per-row cost for benchmarks, waited (slept) by the reduce
        task per input row its partials stand for (a windowed row counts once per
        window holding it), so it counts in the task's busy time as the operator's work.
        """
        if not keys:
            raise StreamscaleError("key_by needs at least one column", item=item)
        if not aggs:
            raise StreamscaleError("agg() needs at least one aggregate", item=item)
        modes = MODES if window is not None else MODES[:2]
        if session:
            modes = ("append", "complete")  # Spark has no update mode for session windows
            assert window is not None
            interval_us(window[1], item=item)
        if mode not in modes:
            raise StreamscaleError(
                f"output mode {mode!r} is not one of {', '.join(modes)}"
                + (" (append needs a window)" if mode == "append" else ""),
                item=item,
            )
        closes = window is not None and watermark is not None and watermark[0] == window[0]
        if mode == "append" and not closes:
            assert window is not None
            raise StreamscaleError(
                "append mode needs withWatermark(...) on the window's time column "
                f"{window[0]!r} (as Spark)",
                item=item,
            )
        if bounds is not None and (
            window is None
            or len(bounds) != 2
            or not all(isinstance(b, str) and b for b in bounds)
            or bounds[0] == bounds[1]
        ):
            raise StreamscaleError(
                "bounds= takes two distinct column names, for a windowed aggregation",
                item=item,
            )
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int | float) or not wait_ms >= 0:
            raise StreamscaleError("wait_ms must be a number of milliseconds >= 0", item=item)
        if max_collect is not None and (isinstance(max_collect, bool) or int(max_collect) < 1):
            raise StreamscaleError("max_collect must be an integer >= 1", item=item)
        parsed = tuple(parse_agg(a, max_collect=max_collect) for a in aggs)
        mode_t = "EventTime" if closes and mode != "complete" else None
        # Spark drops late rows in complete mode too for session windows (its restore step
        # filters them), not for windows (its complete mode keeps every row)
        late = closes and (mode != "complete" or session)
        return cls(
            tuple(keys), tuple(aggs), mode, max_collect, parsed, window, mode_t, session, late,
            None if bounds is None else (str(bounds[0]), str(bounds[1])), float(wait_ms),
        )  # fmt: skip

    def resolve(self, df: Any, *, item: str = "agg") -> Resolved:
        """The aggregation against ``df``'s schema (cached per schema).

        Raises
        ------
        StreamscaleError
            A key or argument column Spark cannot resolve, a key of a type that cannot
            be grouped on Arrow, an ``avg`` of decimals, or two outputs of one name.
        """
        sig = df.schema.simpleString()  # pure Python (json() asks the JVM per field)
        got = self._cache.get(sig)
        if got is None:
            got = self._cache[sig] = self._resolve(df, item)
        return got

    def _resolve(self, df: Any, item: str) -> Resolved:
        from pyspark.errors import AnalysisException, IllegalArgumentException
        from pyspark.sql import functions as F

        types = {f.name: f.dataType for f in df.schema.fields}
        for k in self.keys:
            if k not in types:
                raise StreamscaleError(f"no key column {k!r} in the input", item=item)
            if type(types[k]).__name__ not in _KEY_TYPES:
                raise StreamscaleError(
                    f"key column {k!r} of type {types[k].simpleString()} cannot be grouped",
                    item=item,
                )
        group: list[Any] = [F.col(k) for k in self.keys]
        if self.window is not None:
            t, size, slide = self.window
            if self.session:
                group.insert(0, F.session_window(t, size))
            else:
                group.insert(0, F.window(t, size, slide) if slide else F.window(t, size))
        try:
            schema = df.groupBy(*group).agg(*self.aggs).schema
        except (AnalysisException, IllegalArgumentException) as e:
            msg = str(e).strip().splitlines()[0]
            raise StreamscaleError(
                f"Spark cannot resolve the aggregation: {msg}", item=item
            ) from None
        fields = schema.fields[len(group) :]
        names = [f.name for f in fields]
        dup = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(self.keys)))
        if dup:
            raise StreamscaleError(
                f"two output columns named {dup[0]!r}: alias one of them", item=item
            )
        calls = []
        for i, (p, f) in enumerate(zip(self.parsed, fields, strict=True)):
            if p.func == "avg" and type(f.dataType).__name__ == "DecimalType":
                raise StreamscaleError("avg of a decimal column is not supported", item=p.text)
            if p.func == "percentile_approx" and not _numeric(f.dataType):
                raise StreamscaleError(
                    "percentile_approx of a non-numeric column is not supported", item=p.text
                )
            calls.append(AggCall(p.func, f.name, i, p.ignore_nulls, p.options))
        parsed = [_sketch_input(p, df) for p in self.parsed]
        cols = [c for p, call in zip(parsed, calls, strict=True) for c in partials(p, call)]
        cols.append(F.count(F.lit(1)).alias(N_ROWS))
        if self.window is None:
            op = AggOp(self.keys, tuple(calls), self.mode, self.max_collect, tuple(schema.names),
                       wait_ms=self.wait_ms)  # fmt: skip
            return Resolved(op, tuple(group), tuple(cols), schema)
        win = schema.names[0]
        if self.bounds is not None:
            taken = set(self.keys) | set(names)
            clash = [b for b in self.bounds if b in taken]
            if clash:
                raise StreamscaleError(
                    f"bounds column {clash[0]!r} is also a key or an output", item=item
                )
            from pyspark.sql import types as T

            wtype = schema.fields[0].dataType
            flat_fields = [T.StructField(b, f.dataType, True)
                           for b, f in zip(self.bounds, wtype.fields, strict=True)]  # fmt: skip
            schema = T.StructType([*flat_fields, *schema.fields[1:]])
        op = AggOp((WS, WE, *self.keys), tuple(calls), self.mode, self.max_collect,
                   tuple(schema.names), win, self.session, self.bounds, self.wait_ms)  # fmt: skip
        group[0] = group[0].alias(WIN)
        flat = (F.col(f"{WIN}.start").alias(WS), F.col(f"{WIN}.end").alias(WE))
        return Resolved(op, tuple(group), tuple(cols), schema, flat)


def _numeric(t: Any) -> bool:
    from pyspark.sql import types as T

    inner = t.elementType if isinstance(t, T.ArrayType) else t
    return isinstance(inner, T.NumericType)


def _sketch_input(p: Parsed, df: Any) -> Parsed:
    """``p``, with an ``approx_count_distinct``'s argument as Spark's HLL sketch takes it:
    ints, longs, strings and binaries as they are, other values by their text."""
    if p.func != "approx_count_distinct":
        return p
    from dataclasses import replace

    from pyspark.sql import types as T

    t = df.select(p.arg).schema.fields[0].dataType
    direct = isinstance(t, T.IntegerType | T.LongType | T.StringType | T.BinaryType)
    return p if direct else replace(p, arg=p.arg.cast("string"))
