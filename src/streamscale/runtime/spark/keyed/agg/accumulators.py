"""The aggregate functions of ``key_by(...).agg(...)``: their accumulators, merged and finished.

Every supported aggregate is *algebraic*: a batch's rows of one group reduce to a
fixed set of accumulator values (Spark computes them before the shuffle, as its own
partial aggregation), and accumulators of the same group merge into one without the
rows. Each accumulator is a :class:`Slot`: a column of the shard state and the way two
of its values merge (:data:`MERGES`):

============== ================================ ======================= =====================
function       partial (Spark, per batch)        merge                   final value
============== ================================ ======================= =====================
count          ``count(x)`` / ``count(*)``       sum                     the sum
sum            ``sum(x)``                        sum (null if all null)  the sum
min / max      ``min(x)`` / ``max(x)``           min / max               as is
avg / mean     ``sum(double x)``, ``count(x)``   sum, sum                sum / count (null: 0)
first / last   ``first(x[, ignorenulls])``       the oldest / newest     as is
count_distinct ``collect_set(x)``                set union               its size
collect_list   ``collect_list(x)``               concatenation (bounded) the list
collect_set    ``collect_set(x)``                set union (bounded)     the set
approx_count_distinct, percentile_approx: a mergeable sketch (HLL, KLL) per group —
               :mod:`~streamscale.runtime.spark.keyed.agg.sketches`
============== ================================ ======================= =====================

``first``/``last`` merge in batch order (older state before the batch's partial), as
Spark's streaming aggregation: the value kept is the one of the earliest (latest)
batch that had one; with ``ignorenulls`` the earliest (latest) non-null one. They are
associative, not commutative; every other merge is both.

Everything here is pure (no Spark): functions of Arrow arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.sketches import hll_estimates, kll_quantiles

__all__ = [
    "FUNCTIONS",
    "MERGES",
    "AggCall",
    "Slot",
    "canonical",
    "finish",
    "slots_of",
]

#: Canonical names of the supported aggregates.
FUNCTIONS: tuple[str, ...] = (
    "count", "sum", "min", "max", "avg", "first", "last", "count_distinct",
    "collect_list", "collect_set", "approx_count_distinct", "percentile_approx",
)  # fmt: skip

#: How each kind of accumulator merges (the pyarrow hash aggregate, or a list kernel).
MERGES: tuple[str, ...] = ("sum", "sum1", "min", "max", "first", "last", "first_nn",
                           "last_nn", "list", "set", "hll", "kll")  # fmt: skip

# Spark's function names (as they appear in an aggregate Column) -> canonical name.
_NAMES = {
    "count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "avg", "mean": "avg",
    "first": "first", "first_value": "first", "last": "last", "last_value": "last",
    "collect_list": "collect_list", "array_agg": "collect_list", "collect_set": "collect_set",
    "approx_count_distinct": "approx_count_distinct",
    "approxcountdistinct": "approx_count_distinct",
    "percentile_approx": "percentile_approx", "approx_percentile": "percentile_approx",
}  # fmt: skip
_BOUNDED = ("collect_list", "collect_set")


def canonical(
    name: str, *, distinct: bool, args: int, item: str, max_collect: int | None = None
) -> str:
    """The canonical function of a Spark aggregate call, or one line naming why not.

    Parameters
    ----------
    name
        The function's name in the Column (``sum``, ``count``, ``mean`` …).
    distinct
        Whether the call is ``DISTINCT``.
    args
        The number of (value) arguments.
    item
        The aggregate as the user wrote it, for the message.
    max_collect
        The declared bound of ``collect_list``/``collect_set`` (``None``: none).

    Raises
    ------
    StreamscaleError
        Not one of :data:`FUNCTIONS`, a ``DISTINCT`` other than ``count``, more than
        one argument, or a collection without a declared bound.
    """
    fn = _NAMES.get(name.lower())
    if fn is None:
        raise StreamscaleError(
            f"aggregate {name!r} is not supported (supported: {', '.join(FUNCTIONS)})",
            item=item,
        )
    if distinct:
        if fn != "count":
            raise StreamscaleError(f"{name}(DISTINCT ...) is not supported", item=item)
        fn = "count_distinct"
    if args != 1:
        raise StreamscaleError(f"{fn} of {args} columns is not supported (one column)", item=item)
    if fn in _BOUNDED and max_collect is None:
        raise StreamscaleError(f"{fn} needs a bound: pass max_collect= to agg()", item=item)
    return fn


@dataclass(frozen=True, slots=True)
class AggCall:
    """One aggregate of an ``agg``: canonical function, output name and options.

    ``ignore_nulls`` applies to ``first``/``last``; ``index`` numbers the call in its
    ``agg`` (it names the call's state columns); ``options``: a sketch's settings —
    ``(lgK,)`` for ``approx_count_distinct``, ``(k, many, *percentages)`` for
    ``percentile_approx`` (``many``: 1 when the percentages were an array).
    """

    func: str
    name: str
    index: int
    ignore_nulls: bool = False
    options: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.func not in FUNCTIONS:
            raise StreamscaleError(f"unknown aggregate {self.func!r}", item=self.name)


@dataclass(frozen=True, slots=True)
class Slot:
    """One accumulator column of the shard state, and how its values merge."""

    column: str
    merge: str
    call: str  # output name of the aggregate it belongs to (for messages)
    lg_k: int = 0  # an HLL sketch's lgK (its union's)


def slots_of(call: AggCall) -> tuple[Slot, ...]:
    """The accumulator columns of ``call``, in the order its partials are computed."""
    a = f"__a{call.index}"
    f = call.func
    if f == "count":
        return (Slot(a, "sum", call.name),)
    if f == "sum":
        return (Slot(a, "sum1", call.name),)
    if f in ("min", "max"):
        return (Slot(a, f, call.name),)
    if f == "avg":
        return (Slot(f"{a}_s", "sum1", call.name), Slot(f"{a}_c", "sum", call.name))
    if f in ("first", "last"):
        return (Slot(a, f"{f}_nn" if call.ignore_nulls else f, call.name),)
    if f == "collect_list":
        return (Slot(a, "list", call.name),)
    if f == "approx_count_distinct":
        return (Slot(a, "hll", call.name, int(call.options[0])),)
    if f == "percentile_approx":  # the sketch, and the NaNs it does not hold
        return (Slot(a, "kll", call.name), Slot(f"{a}_nan", "sum", call.name))
    return (Slot(a, "set", call.name),)  # count_distinct, collect_set


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def finish(table: pa.Table, calls: Sequence[AggCall]) -> dict[str, pa.Array]:
    """Each call's value per row of merged accumulators ``table``, by output name."""
    out: dict[str, pa.Array] = {}
    for call in calls:
        (first, *rest) = slots_of(call)
        a = _column(table, first.column)
        if call.func == "count":
            out[call.name] = pc.fill_null(a, 0)
        elif call.func == "avg":
            c = _column(table, rest[0].column)
            s = a.cast(pa.float64())
            zero = pc.fill_null(pc.equal(c, 0), True)
            out[call.name] = pc.if_else(zero, pa.scalar(None, pa.float64()), pc.divide(s, c))
        elif call.func == "count_distinct":
            out[call.name] = pc.fill_null(pc.list_value_length(a), 0).cast(pa.int64())
        elif call.func == "approx_count_distinct":
            out[call.name] = hll_estimates(a)
        elif call.func == "percentile_approx":
            many = bool(call.options[1])
            nans = _column(table, rest[0].column)
            out[call.name] = kll_quantiles(a, call.options[2:], many=many, nans=nans)
        elif call.func in _BOUNDED:
            empty = pa.array([[]], type=a.type)[0]
            out[call.name] = pc.if_else(pc.is_null(a), empty, a)
        else:
            out[call.name] = a
    return out
