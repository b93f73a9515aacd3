"""Mergeable sketches of ``approx_count_distinct`` and ``percentile_approx``.

Spark builds each batch's partial per group with its own DataSketches aggregates
(``hll_sketch_agg``, ``kll_sketch_agg_double``: binary sketches in the Apache
DataSketches formats); the shard state keeps one sketch per group, and merging a
batch's partials into it is a union in the same library (the ``datasketches``
package, C++ inside): one library call per sketch merged, never per row.

============================ ========================= ================= =================
function                     partial (Spark)            merge             final value
============================ ========================= ================= =================
approx_count_distinct(x, r)  ``hll_sketch_agg(x, lgK)`` HLL union         the estimate
percentile_approx(x, p, a)   ``kll_sketch_agg_double``  KLL merge         quantile(s) at p
============================ ========================= ================= =================

Accuracy follows the user's arguments: ``lgK`` is the smallest whose HLL relative
standard error ``1.04 / √2^lgK`` is at most ``rsd`` (Spark's default 0.05 → lgK 9);
KLL's ``k`` the smallest whose normalized rank error (``≈ 2.296 / k^0.9723``, the
library's single-sided 99 % bound) is at most ``1 / accuracy``, capped at 65,535 (the
format's most). A group with fewer values than ``k`` keeps them all, so its quantiles
are exact — Spark's ``percentile_approx`` on the same values gives the same answer.
The quantile is the smallest value whose share of values at or below it reaches
``p`` (inclusive rank), as Spark's; NaNs, which the sketch ignores, are counted beside
it and sort after every number, as in Spark. Estimates differ from Spark's own HLL++ and
Greenwald-Khanna answers by at most those errors, not by identity (reference for the
bounds: DataSketches' HLL and KLL documentation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa

__all__ = [
    "hll_estimates",
    "hll_lg_k",
    "kll_k",
    "kll_quantiles",
    "merge_hll",
    "merge_kll",
]

_HLL_MIN, _HLL_MAX = 4, 21
_KLL_MIN, _KLL_MAX = 8, 65535


def hll_lg_k(rsd: float) -> int:
    """The HLL ``lgK`` for a relative standard deviation ``rsd``.

    >>> hll_lg_k(0.05), hll_lg_k(0.01)
    (9, 14)
    """
    want = math.log2((1.04 / rsd) ** 2)
    return max(_HLL_MIN, min(_HLL_MAX, math.ceil(want)))


def kll_k(accuracy: int) -> int:
    """The KLL ``k`` for Spark's ``accuracy`` (relative rank error ``1 / accuracy``).

    >>> kll_k(100), kll_k(10_000)
    (269, 30565)
    """
    eps = 1.0 / accuracy
    k = math.ceil((2.296 / eps) ** (1 / 0.9723))
    return max(_KLL_MIN, min(_KLL_MAX, k))


def merge_hll(blobs: Sequence[bytes | None], lg_k: int) -> bytes | None:
    """One HLL sketch of every value the sketches ``blobs`` saw (``None``: no sketch)."""
    got = [b for b in blobs if b is not None]
    if len(got) <= 1:
        return got[0] if got else None
    import datasketches as ds

    u = ds.hll_union(lg_k)
    for b in got:
        u.update(ds.hll_sketch.deserialize(b))
    return bytes(u.get_result(ds.tgt_hll_type.HLL_4).serialize_compact())


def merge_kll(blobs: Sequence[bytes | None]) -> bytes | None:
    """One KLL sketch of every value the sketches ``blobs`` saw (``None``: no sketch)."""
    got = [b for b in blobs if b is not None]
    if len(got) <= 1:
        return got[0] if got else None
    import datasketches as ds

    first = ds.kll_doubles_sketch.deserialize(got[0])
    for b in got[1:]:
        first.merge(ds.kll_doubles_sketch.deserialize(b))
    return bytes(first.serialize())


def hll_estimates(blobs: pa.Array) -> pa.Array:
    """Each sketch's distinct-count estimate, rounded (0 for no sketch), as int64."""
    import datasketches as ds

    out = [
        0 if b is None else round(ds.hll_sketch.deserialize(b).get_estimate())
        for b in blobs.to_pylist()
    ]
    return pa.array(out, pa.int64())


def kll_quantiles(
    blobs: pa.Array, ps: Sequence[float], *, many: bool, nans: pa.Array | None = None
) -> pa.Array:
    """Each sketch's quantiles at ``ps`` (inclusive rank): one double per row, or a list
    per row when ``many``; null for a sketch of no values.

    ``nans``: NaNs per row, which the sketch does not hold; as in Spark they sort after
    every number, so a rank beyond the numbers is NaN.
    """
    import datasketches as ds

    extra = [0] * len(blobs) if nans is None else [int(x or 0) for x in nans.to_pylist()]
    out: list[object] = []
    for b, n_nan in zip(blobs.to_pylist(), extra, strict=True):
        sk = None if b is None else ds.kll_doubles_sketch.deserialize(b)
        n = 0 if sk is None or sk.is_empty() else int(sk.n)
        if n + n_nan == 0:
            out.append(None)
            continue
        qs = [
            float(sk.get_quantile(min(1.0, p * (n + n_nan) / n), inclusive=True))
            if sk is not None and n and p * (n + n_nan) <= n
            else math.nan
            for p in ps
        ]
        out.append(qs if many else qs[0])
    return pa.array(out, pa.list_(pa.float64()) if many else pa.float64())
