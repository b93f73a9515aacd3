"""A time-stepped simulator of a continuous-operator cluster (paper 000, §5 scale)."""

from __future__ import annotations

from streamscale.sim.kernel import Demand, SimConfig, Simulator

__all__ = ["Demand", "SimConfig", "Simulator"]
