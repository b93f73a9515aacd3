"""Growth of a long run's figure per 10,000 batches, with its 95 % interval.

A soak samples each figure (memory, files, threads, bytes) every few batches. Whether
the figure grows is the slope of a line through the samples after a warm-up; how sure
that is, the slope's standard error. Samples a few batches apart are autocorrelated (a
heap between two collections, Python workers forking and exiting, a file rotated every
few hundred batches), so the residuals of a plain least-squares fit on the samples are
not independent and its interval is too narrow. :func:`growth_per_10k` fits on the means
of non-overlapping blocks of consecutive samples instead (the method of batch means of
simulation output analysis): block means a long stretch of samples apart are nearly
independent, and the interval takes Student's t with ``blocks - 2`` degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ["BLOCKS", "Growth", "growth_per_10k"]

#: Blocks of consecutive samples the fit averages over (its points).
BLOCKS = 10
#: The unit of growth: batches.
PER = 10_000


@dataclass(frozen=True)
class Growth:
    """One figure's fitted growth: ``per_10k`` and its interval in percent of the fitted
    value at the start of the fit window per 10,000 batches; ``slope`` and ``slope_se`` in
    the figure's unit per batch; ``start`` the fitted value at the window's first sample;
    ``samples`` the samples fitted, ``points`` the points of the fit (block means, or the
    samples themselves) and ``df`` the t distribution's degrees of freedom."""

    per_10k: float | None
    ci95_low: float | None
    ci95_high: float | None
    slope: float
    slope_se: float
    start: float
    samples: int
    points: int
    df: int

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def growth_per_10k(
    batch: Sequence[float] | np.ndarray,
    value: Sequence[float | None] | np.ndarray,
    *,
    warmup: float = 0.0,
    blocks: int | None = BLOCKS,
    level: float = 0.95,
) -> Growth | None:
    """Growth of ``value`` over ``batch`` per 10,000 batches after ``warmup``, in percent.

    Ordinary least squares of the figure on the batch index over the samples with
    ``batch >= warmup`` (missing values, ``None`` or NaN, left out). With ``blocks`` the
    samples, in batch order, are cut into that many non-overlapping blocks of consecutive
    samples (sizes differing by at most one) and the line is fitted through the blocks'
    mean batch and mean value; ``blocks=None`` fits the samples themselves (the interval
    then assumes independent samples). The growth is ``slope × 10,000 / start × 100``,
    ``start`` the fitted value at the window's first sample's batch; its interval is
    ``slope ± t × se`` scaled the same way, ``se`` the slope's standard error from the
    fit's residuals and ``t`` Student's quantile at ``(1 + level) / 2`` with
    ``points - 2`` degrees of freedom. ``start`` is taken as known: the interval is the
    slope's.

    Parameters
    ----------
    batch, value
        The samples: the batch index and the figure there.
    warmup
        Samples before this batch are left out.
    blocks
        Blocks of the batch-means fit (at most half the samples, so that each block holds
        two or more), or ``None`` for a fit on the samples.
    level
        The interval's coverage.

    Returns
    -------
    Growth or None
        ``None`` when fewer than three points remain. ``per_10k`` and its interval are
        ``None`` when the fitted start is not positive (a percentage of it means nothing).

    Examples
    --------
    Four samples on a line through 10 at batch 0, rising 0.5 a batch: +50,000 % per
    10,000 batches, exactly (zero residuals, a zero-width interval).

    >>> g = growth_per_10k([0, 1, 2, 3], [10.0, 10.5, 11.0, 11.5], blocks=None)
    >>> g.per_10k, g.ci95_low, g.ci95_high, g.df
    (50000.0, 50000.0, 50000.0, 2)

    Six samples after a warm-up of 100 batches (the sample at batch 0 is left out),
    fitted on the samples: ``x̄`` = 350, ``ȳ`` = 22.667, ``Sxx`` = 175,000, ``Sxy`` =
    1,800, so the slope is 0.0102857 a batch and the start ``ȳ + slope × (100 - 350)``
    = 20.095; ``0.0102857 × 10,000 / 20.095`` = 511.8 %. The residuals' squares sum to
    0.17905, ``se = √(0.17905 / 4 / 175,000)`` = 0.00050575 and ``t(0.975, 4)`` = 2.7764,
    so the interval is 511.8 ± 69.9 %.

    >>> x = [0, 100, 200, 300, 400, 500, 600]
    >>> y = [99.0, 20.0, 21.4, 22.0, 23.2, 24.0, 25.4]
    >>> g = growth_per_10k(x, y, warmup=100, blocks=None)
    >>> round(g.slope, 7), round(g.start, 3), round(g.per_10k, 1), g.samples
    (0.0102857, 20.095, 511.8, 6)
    >>> round(g.ci95_low, 1), round(g.ci95_high, 1)
    (442.0, 581.7)
    """
    x = np.asarray(batch, dtype=float)
    y = np.asarray([math.nan if v is None else v for v in value], dtype=float)
    keep = (x >= warmup) & np.isfinite(y) & np.isfinite(x)
    x, y = x[keep], y[keep]
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    n = len(x)
    if blocks is None:
        px, py = x, y
    else:
        k = min(int(blocks), n // 2)
        if k < 3:
            return None
        px = np.array([c.mean() for c in np.array_split(x, k)])
        py = np.array([c.mean() for c in np.array_split(y, k)])
    m = len(px)
    if m < 3 or np.ptp(px) == 0:
        return None
    dx = px - px.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (py - py.mean())) / sxx
    intercept = float(py.mean()) - slope * float(px.mean())
    resid = py - (intercept + slope * px)
    df = m - 2
    se = math.sqrt(float(resid @ resid) / df / sxx)
    start = intercept + slope * float(x[0])
    t = float(stats.t.ppf(0.5 + level / 2, df))
    if start > 0:
        scale = 100.0 * PER / start
        pct, lo, hi = slope * scale, (slope - t * se) * scale, (slope + t * se) * scale
    else:
        pct = lo = hi = None
    return Growth(pct, lo, hi, slope, se, start, n, m, df)
