from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscale.errors import ModelError
from streamscale.model import ModelPoint, PerformanceModel


def blob() -> PerformanceModel:
    return PerformanceModel.build(
        "blob", [ModelPoint(1, 2, 5, 10), ModelPoint(10, 12, 20, 30), ModelPoint(50, 30, 60, 90)]
    )


def test_interpolation_between_measured_points() -> None:
    m = blob()
    assert m.rate(1) == 2 and m.rate(10) == 12
    assert m.rate(5.5) == pytest.approx(7.0)
    assert m.cpu(30) == pytest.approx(40.0)
    assert m.rate(80) == 30  # flat past the last measured point


def test_inverse_and_peak() -> None:
    m = blob()
    assert m.threads_for(2) == 1
    assert m.threads_for(12) == 10
    assert m.threads_for(12.1) == 11
    assert m.peak_rate == 30 and m.peak_threads == 50
    with pytest.raises(ModelError, match="exceeds"):
        m.threads_for(31)


def test_bad_models() -> None:
    with pytest.raises(ModelError, match="start at 1"):
        PerformanceModel.build("x", [ModelPoint(2, 1, 1, 1)])
    with pytest.raises(ModelError, match="twice"):
        PerformanceModel.build("x", [ModelPoint(1, 1, 1, 1), ModelPoint(1, 2, 1, 1)])


@given(st.lists(st.floats(1, 1e5), min_size=1, max_size=8), st.floats(0.1, 1e5))
def test_threads_for_is_the_smallest(rates: list[float], omega: float) -> None:
    m = PerformanceModel.build("t", [ModelPoint(i + 1, r, 50, 50) for i, r in enumerate(rates)])
    if omega > m.peak_rate:
        with pytest.raises(ModelError):
            m.threads_for(omega)
        return
    q = m.threads_for(omega)
    assert m.rate(q) >= omega - 1e-9
    assert all(m.rate(p) < omega - 1e-9 for p in range(1, q))
