"""``left.join(right, on=…, within=…, how=…)``: a stream-stream join as a keyed operator.

The driver side of the join (the graph's function): it checks the declaration as Spark
does (:meth:`Join.build`), resolves the output schema (Spark's for
``left.join(right, on=keys, how=how)``: the keys once, then the left side's other
columns, then the right side's; ``left_semi``: the left side's), and tags each batch's
rows by side before the shuffle (:meth:`Join.tagged`): one DataFrame of ``SIDE``, the
keys, each side's other columns as one struct (null for the other side's rows) and the
row's time in µs. The reduce side is :func:`~streamscale.runtime.spark.keyed.agg.join.fold_join`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamscale.errors import StreamscaleError
from streamscale.runtime.spark.keyed.agg.join import HOWS, LCOL, RCOL, SIDE, TCOL, JoinOp
from streamscale.runtime.spark.keyed.agg.spec import N_ROWS

__all__ = ["Join", "signed_interval_us"]


def signed_interval_us(v: Any, *, item: str) -> int:
    """Microseconds of a bound: seconds (any sign) or a Spark interval string, optionally
    negative (``"-5 seconds"``)."""
    from streamscale.runtime.spark.keyed.agg.spec import interval_us

    if isinstance(v, bool):
        raise StreamscaleError(f"bound {v!r} is not seconds or an interval string", item=item)
    if isinstance(v, int | float):
        return round(v * 1_000_000)
    if not isinstance(v, str):
        raise StreamscaleError(f"bound {v!r} is not seconds or an interval string", item=item)
    text = v.strip()
    try:
        return round(float(text) * 1_000_000)
    except ValueError:
        pass
    if text.startswith("-"):
        return -interval_us(text[1:], item=item)
    return interval_us(text, item=item)


@dataclass(slots=True)
class Join:
    """A stream-stream join (driver side).

    Parameters
    ----------
    keys
        Join columns (the same names on both sides).
    how
        ``inner``, ``left``, ``right``, ``full`` or ``left_semi``.
    left_from, right_from
        The graph operators whose output forms each side (several: their union).
    times
        ``(left time column, right time column)`` of the time condition, or ``None``.
    lower_us, upper_us
        ``right.t BETWEEN left.t + lower AND left.t + upper`` (µs).
    watermark
        The query's watermark column and delay (ms), or ``None``.
    cut_lineage
        Whether each side's rows are cut from their lineage before the sides' union
        (:meth:`tagged`): needed when a keyed operator's output is upstream of a side.
    """

    keys: tuple[str, ...]
    how: str
    left_from: tuple[str, ...]
    right_from: tuple[str, ...]
    times: tuple[str, str] | None
    lower_us: int | None
    upper_us: int | None
    watermark: tuple[str, int] | None
    cut_lineage: bool = True
    schemas: dict[str, Any] = field(default_factory=dict, repr=False)  # side -> StructType
    columns: dict[Any, Any] = field(default_factory=dict, repr=False)  # plan-only Columns

    vectorized = True
    two_sided = True
    drops_late = True
    batch_clock = True
    session = False
    window = None

    @property
    def time_mode(self) -> str | None:
        """``EventTime`` when the watermark evicts state (Spark then runs a batch without
        input when the watermark advances), else ``None``."""
        return "EventTime" if self.watermark is not None and self.times is not None else None

    @classmethod
    def build(
        cls,
        keys: Sequence[str],
        *,
        how: str,
        left_from: tuple[str, ...],
        right_from: tuple[str, ...],
        within: tuple[str, str, Any, Any] | None,
        watermark: tuple[str, int] | None,
        item: str,
        cut_lineage: bool = True,
    ) -> Join:
        """Check the declaration as Spark's ``UnsupportedOperationChecker`` does (one line
        naming what is refused)."""
        if how not in HOWS:
            raise StreamscaleError(f"how={how!r} is not one of {', '.join(HOWS)}", item=item)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise StreamscaleError("join needs on= column names", item=item)
        if set(left_from) & set(right_from):
            raise StreamscaleError(
                "join needs two distinct streams (a self-join of one stream is not supported)",
                item=item,
            )
        times = None
        lower = upper = None
        if within is not None:
            if not isinstance(within, tuple | list) or len(within) != 4:
                raise StreamscaleError(
                    "within must be (left time column, right time column, lower, upper)",
                    item=item,
                )
            lt, rt, lo, up = within
            if not (isinstance(lt, str) and lt and isinstance(rt, str) and rt):
                raise StreamscaleError("within needs two time column names", item=item)
            times = (lt, rt)
            lower = signed_interval_us(lo, item=item)
            upper = signed_interval_us(up, item=item)
            if lower > upper:
                raise StreamscaleError(f"within: lower {lo!r} is above upper {up!r}", item=item)
        if how != "inner" and (watermark is None or within is None):
            raise StreamscaleError(
                f"a {how} stream-stream join needs withWatermark(...) on the input and "
                "within=(...), a time range (as Spark)",
                item=item,
            )
        return cls(tuple(keys), how, left_from, right_from, times, lower, upper, watermark,
                   cut_lineage)  # fmt: skip

    def op(self) -> JoinOp:
        """What the reduce tasks are given."""
        return JoinOp(self.keys, self.how, self.lower_us, self.upper_us)

    def check_side(self, schema: Any, side: str, *, item: str) -> None:
        """Refuse a side without the keys or its time column, or a clash of names."""
        names = schema.fieldNames()
        for k in self.keys:
            if k not in names:
                raise StreamscaleError(f"no column {k!r} on the {side} side", item=item)
        if self.times is not None:
            t = self.times[0 if side == "left" else 1]
            if t not in names:
                raise StreamscaleError(f"no time column {t!r} on the {side} side", item=item)
        self.schemas[side] = schema
        if "left" in self.schemas and "right" in self.schemas:
            left, right = self.schemas["left"], self.schemas["right"]
            for k in self.keys:
                if left[k].dataType != right[k].dataType:
                    raise StreamscaleError(
                        f"key {k!r} is {left[k].dataType.simpleString()} on the left and "
                        f"{right[k].dataType.simpleString()} on the right",
                        item=item,
                    )
            if self.how != "left_semi":
                both = (set(left.fieldNames()) & set(right.fieldNames())) - set(self.keys)
                if both:
                    raise StreamscaleError(
                        f"column {sorted(both)[0]!r} is on both sides (rename one)", item=item
                    )

    def _others(self, side: str) -> list[Any]:
        return [f for f in self.schemas[side].fields if f.name not in self.keys]

    def out_schema(self) -> Any:
        """Spark's output columns of ``left.join(right, on=keys, how=how)`` (nullable)."""
        from pyspark.sql import types as T

        left = self.schemas["left"]
        fields = [left[k] for k in self.keys] + self._others("left")
        if self.how != "left_semi":
            fields += self._others("right")
        return T.StructType([T.StructField(f.name, f.dataType, True) for f in fields])

    def _struct_type(self, side: str) -> Any:
        from pyspark.sql import types as T

        return T.StructType([T.StructField(f.name, f.dataType, True) for f in self._others(side)])

    def _side_rows(self, df: Any, side: str) -> Any:
        # The tagging Columns depend on the side's schema only: built once per schema
        # and kept (built each batch, they cost ~200 py4j round trips a side).
        names = tuple(df.columns) if self.watermark is not None and self.times is None else ()
        key = ("side", side, *(self.schemas[x].simpleString() for x in ("left", "right")), names)
        cols = self.columns.get(key)
        if cols is None:
            if len(self.columns) > 16:  # schemas change: keep the recent ones only
                self.columns.clear()
            cols = self.columns[key] = self._side_columns(side, names)
        return df.select(*cols)

    def _side_columns(self, side: str, names: tuple[str, ...]) -> list[Any]:
        from pyspark.sql import functions as F

        own = F.struct(*(F.col(f.name) for f in self._others(side)))
        lcol = own if side == "left" else F.lit(None).cast(self._struct_type("left"))
        rcol = own if side == "right" else F.lit(None).cast(self._struct_type("right"))
        if self.times is not None:
            tname = self.times[0 if side == "left" else 1]
        elif self.watermark is not None and self.watermark[0] in names:
            tname = self.watermark[0]  # late rows are dropped on the watermark column
        else:
            tname = None
        t = F.unix_micros(F.col(tname).cast("timestamp")) if tname else F.lit(None)
        return [
            F.lit(0 if side == "left" else 1).cast("byte").alias(SIDE),
            *(F.col(k) for k in self.keys),
            lcol.alias(LCOL),
            rcol.alias(RCOL),
            t.cast("long").alias(TCOL),
            F.lit(1).cast("long").alias(N_ROWS),
        ]

    def tagged(self, frames: Mapping[str, Any | None], *, item: str) -> Any | None:
        """One DataFrame of both sides' rows of a batch, tagged by side (``None``: no side
        has a frame, or a missing side's columns were never seen)."""
        sides: dict[str, Any] = {}
        for side, names in (("left", self.left_from), ("right", self.right_from)):
            dfs = [frames[n] for n in names if frames.get(n) is not None]
            if dfs:
                df = dfs[0]
                for other in dfs[1:]:
                    df = df.unionByName(other)
                self.check_side(df.schema, side, item=item)
                sides[side] = df.localCheckpoint(eager=False) if self.cut_lineage else df
        if not sides or len(self.schemas) < 2:
            return None
        # With cut_lineage, each side is cut from its lineage (a local checkpoint, filled
        # as the join's stage reads it; ~0.5 s a batch on Nexmark Q3, so only where
        # needed). Sides derived from the same cached rows (an aggregation's
        # output joined with its own input) otherwise make Spark renew the attributes
        # of one side's copy of the shared plan when it analyses their union; that
        # copy then misses the cache and Spark runs the keyed stage that produced it
        # again, inside the join's stage: the stage's state would be written twice.
        session = next(iter(sides.values())).sparkSession
        for side in ("left", "right"):
            if side not in sides:
                sides[side] = session.createDataFrame([], self.schemas[side])
        return self._side_rows(sides["left"], "left").unionByName(
            self._side_rows(sides["right"], "right")
        )

    def resolve(self, df: Any, *, item: str) -> Any:
        """The output schema (``df``: the tagged rows; both sides' schemas are known)."""
        del df, item
        return self.out_schema()
