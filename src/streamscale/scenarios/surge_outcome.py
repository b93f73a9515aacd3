"""What one policy's run of the surge scenario recorded, and the sampler that records
executors' task time and the host's CPU while it runs (shared by the scenario and the
restart-based baseline, :mod:`~streamscale.scenarios.restart`)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from streamscale.scenarios.scoring import BatchSpan, ExecutorSpan, Request

__all__ = ["ExecutorSampler", "SurgeOutcome"]


@dataclass
class SurgeOutcome:
    """What Spark recorded of one policy's run (epoch seconds throughout).

    ``t0`` is the generator's start (the offsets' ``t0``): emit times and the schedule
    count from it. ``samples`` are :class:`ExecutorSampler` readings, ``rescales`` the
    restart baseline's rescale records, ``settings`` what the policy ran with.
    """

    policy: str
    t0: float = math.nan
    end_s: float = math.nan
    spans: list[BatchSpan] = field(default_factory=list)
    executors: list[ExecutorSpan] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    #: the requests made while a batch ran (epoch seconds)
    mid_batch: list[float] = field(default_factory=list)
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    #: the host's busy CPU share (0-1) over each sampling interval: ``(epoch s, share)``
    cpu: list[tuple[float, float]] = field(default_factory=list)
    rescales: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class ExecutorSampler:
    """Samples, every ``interval_s``, each live executor's task time so far (ms), from
    Spark's status store, in a background thread: when an added executor first ran
    tasks is read from it. It samples the host's busy CPU share too (every executor of
    a loopback cluster shares the host: an executor starting takes CPU from the rest)."""

    def __init__(self, sc: Any, interval_s: float = 0.5) -> None:
        self.sc, self.interval_s = sc, interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.cpu: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-sampler", daemon=True)

    def __enter__(self) -> ExecutorSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        import psutil

        psutil.cpu_percent(None)  # the first reading starts the interval
        while not self._stop.wait(self.interval_s):
            self.cpu.append((time.time(), psutil.cpu_percent(None) / 100.0))
            try:
                seq = self.sc._jsc.sc().statusStore().executorList(True)
                now = time.time()
                reading = {}
                for i in range(seq.size()):
                    e = seq.apply(i)
                    if str(e.id()) != "driver":
                        reading[str(e.id())] = float(e.totalDuration())
                self.samples.append((now, reading))
            except Exception:  # the context is stopping: the run is over
                return
