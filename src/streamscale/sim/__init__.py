"""A time-stepped simulator of a continuous-operator cluster (paper 000, §5 scale).

:class:`Simulator` is the kernel; :class:`SimCollector` and :class:`SimRealizer`
are its Collector and Realizer (``streamscale.control`` drives them unchanged
with the simulated clock); :func:`simulate` runs a policy end to end;
:mod:`streamscale.sim.workloads` holds the micro-benchmark and the SSE-like
workload.
"""

from __future__ import annotations

from streamscale.sim.collector import SimCollector
from streamscale.sim.kernel import Demand, SimConfig, Simulator
from streamscale.sim.realizer import SimRealizer
from streamscale.sim.run import Sample, SimResult, simulate
from streamscale.sim.workloads import MicroBenchmark, StockExchange

__all__ = [
    "Demand",
    "MicroBenchmark",
    "Sample",
    "SimCollector",
    "SimConfig",
    "SimRealizer",
    "SimResult",
    "Simulator",
    "StockExchange",
    "simulate",
]
