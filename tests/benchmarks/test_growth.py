"""benchmarks/_growth.py: the soak's growth fit per 10,000 batches and its 95 % interval,
on series with a planted growth, against scipy's least squares computed here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal, stats

from tests.benchmarks.conftest import load

G = load("_growth")

#: a soak's samples: every 50 batches to batch 5,000, the first 500 batches warm-up
BATCH = np.arange(0, 5001, 50, dtype=float)
WARMUP = 500.0


def _planted(pct: float, seed: int, *, sd: float = 1.0, start: float = 400.0) -> np.ndarray:
    """``start`` at the warm-up's end, growing ``pct`` % of it per 10,000 batches, plus
    independent normal noise of ``sd``."""
    rng = np.random.default_rng(seed)
    return start * (1 + pct / 100 * (BATCH - WARMUP) / 10_000) + rng.normal(0, sd, BATCH.size)


def test_the_fit_on_the_samples_is_scipys_least_squares() -> None:
    y = _planted(3.0, 1, sd=2.0)
    g = G.growth_per_10k(BATCH, y, warmup=WARMUP, blocks=None)
    keep = BATCH >= WARMUP
    ref = stats.linregress(BATCH[keep], y[keep])
    start = ref.intercept + ref.slope * WARMUP
    t = stats.t.ppf(0.975, keep.sum() - 2)
    assert g.samples == g.points == keep.sum() == 91 and g.df == 89
    assert g.slope == pytest.approx(ref.slope, rel=1e-9)
    assert g.slope_se == pytest.approx(ref.stderr, rel=1e-9)
    assert g.start == pytest.approx(start, rel=1e-12)
    assert g.per_10k == pytest.approx(ref.slope * 1e4 / start * 100, rel=1e-9)
    assert g.ci95_low == pytest.approx((ref.slope - t * ref.stderr) * 1e6 / start, rel=1e-9)
    assert g.ci95_high == pytest.approx((ref.slope + t * ref.stderr) * 1e6 / start, rel=1e-9)


def test_the_block_fit_is_least_squares_through_the_block_means() -> None:
    x = np.arange(1000, 6000, 50, dtype=float)  # 100 samples: 10 blocks of 10
    y = 50 + 0.001 * x + np.random.default_rng(5).normal(0, 0.5, x.size)
    g = G.growth_per_10k(x, y, blocks=10)
    bx, by = x.reshape(10, 10).mean(axis=1), y.reshape(10, 10).mean(axis=1)
    ref = stats.linregress(bx, by)
    start = ref.intercept + ref.slope * 1000
    t = stats.t.ppf(0.975, 8)
    assert (g.samples, g.points, g.df) == (100, 10, 8)
    assert g.slope == pytest.approx(ref.slope, rel=1e-9)
    assert g.slope_se == pytest.approx(ref.stderr, rel=1e-9)
    assert g.per_10k == pytest.approx(ref.slope * 1e6 / start, rel=1e-9)
    assert g.ci95_high - g.ci95_low == pytest.approx(2 * t * ref.stderr * 1e6 / start, rel=1e-9)
    # the planted line: 0.001 a batch from 51 at batch 1,000, +19.6 % per 10,000 batches
    assert g.ci95_low < 0.001 * 1e6 / 51 < g.ci95_high


def test_flat_series_interval_contains_zero() -> None:
    g = G.growth_per_10k(BATCH, _planted(0.0, 2), warmup=WARMUP)
    assert g.ci95_low < 0 < g.ci95_high
    assert abs(g.per_10k) < 1.0


def test_three_percent_is_estimated_near_three_and_inside_its_interval() -> None:
    g = G.growth_per_10k(BATCH, _planted(3.0, 3), warmup=WARMUP)
    assert g.per_10k == pytest.approx(3.0, abs=1.0)
    assert g.ci95_low < 3.0 < g.ci95_high
    assert g.start == pytest.approx(400.0, rel=0.01)


def test_twenty_percent_interval_excludes_five_and_contains_twenty() -> None:
    g = G.growth_per_10k(BATCH, _planted(20.0, 4), warmup=WARMUP)
    assert 5.0 < g.ci95_low < 20.0 < g.ci95_high
    assert g.per_10k == pytest.approx(20.0, abs=2.0)


def test_autocorrelated_noise_the_sample_fit_is_too_narrow_the_block_fit_is_not() -> None:
    """AR(1) noise (ρ = 0.9) on +3 % per 10,000 batches, 300 series: the interval of a fit
    on the samples holds 3 in far fewer than 95 % of them; the block means' interval in
    about 95 %."""
    x = np.arange(400) * 50.0
    inside = {"samples": 0, "blocks": 0}
    for seed in range(300):
        e = signal.lfilter([1.0], [1.0, -0.9], np.random.default_rng([7, seed]).normal(0, 0.3, 400))
        y = 100 * (1 + 0.03 * x / 10_000) + e
        for name, blocks in (("samples", None), ("blocks", 10)):
            g = G.growth_per_10k(x, y, blocks=blocks)
            inside[name] += g.ci95_low <= 3.0 <= g.ci95_high
    assert inside["samples"] / 300 < 0.5
    assert inside["blocks"] / 300 >= 0.85


def test_warmup_and_missing_samples_are_left_out() -> None:
    x = [0, 10, 20, 30, 40, 50, 60, 70]
    y = [1e6, None, 10.0, math.nan, 12.0, 13.0, 14.0, 15.0]
    g = G.growth_per_10k(x, y, warmup=5, blocks=None)
    # batches 20, 40, 50, 60, 70: least squares slope 0.1 a batch, start 10.0 at batch 20
    assert g.samples == 5 and g.slope == pytest.approx(0.1, rel=1e-12)
    assert g.start == pytest.approx(10.0, rel=1e-12) and g.slope_se == pytest.approx(0, abs=1e-12)
    assert g.per_10k == pytest.approx(0.1 * 10_000 / 10.0 * 100)


def test_too_few_points_or_no_positive_start() -> None:
    assert G.growth_per_10k([0, 1], [1.0, 2.0], blocks=None) is None
    assert G.growth_per_10k(range(5), [1.0] * 5, blocks=10) is None  # 2 blocks at most
    g = G.growth_per_10k([0, 1, 2, 3], [-1.0, 0.0, 1.0, 2.0], blocks=None)
    assert g.slope == pytest.approx(1.0) and g.per_10k is None and g.ci95_high is None
