"""Per-task performance models (paper 004 §5): threads → peak rate, CPU %, memory %.

A model holds measured points for a task running on one slot. Between measured
thread counts values are interpolated linearly; past the last point they stay
flat (the paper stops profiling once the peak rate flattens).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamscale.errors import ModelError

_MODEL_KEYS = frozenset({"task", "points", "approximate", "source"})
_POINT_KEYS = frozenset({"threads", "rate", "cpu", "memory"})

__all__ = ["ModelPoint", "PerformanceModel"]


@dataclass(frozen=True, slots=True)
class ModelPoint:
    """One measured thread count: peak stable rate (tuples/s), CPU % and memory % of a slot."""

    threads: int
    rate: float
    cpu: float
    memory: float


@dataclass(frozen=True, slots=True)
class PerformanceModel:
    """I_t(q), C_t(q), M_t(q) for one task, and the inverse T_t(ω)."""

    task: str
    points: tuple[ModelPoint, ...]
    approximate: bool = False
    source: str = ""

    @classmethod
    def build(
        cls, task: str, points: Iterable[ModelPoint], *, approximate: bool = False, source: str = ""
    ) -> PerformanceModel:
        """Validate and build from measured points (paper 004, §5); one must be at 1 thread.

        Examples
        --------
        Measured at one and three threads; two threads are interpolated, the peak
        ω̂ = 220 t/s needs τ̂ = 3 threads, and 150 t/s needs T(150) = 2.

        >>> m = PerformanceModel.build("parse", [ModelPoint(1, 100.0, 20.0, 10.0),
        ...                                      ModelPoint(3, 220.0, 50.0, 20.0)])
        >>> m.rate(2), m.cpu(2), m.peak_rate, m.peak_threads, m.threads_for(150.0)
        (160.0, 35.0, 220.0, 3, 2)
        >>> m.threads_for(300.0)
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: parse: rate 300 exceeds the model's peak 220
        """
        pts = tuple(sorted(points, key=lambda p: p.threads))
        item = f"model {task}"
        if not pts:
            raise ModelError("model has no points", item=item)
        if pts[0].threads != 1:
            raise ModelError("model must start at 1 thread", item=item)
        for a, b in itertools.pairwise(pts):
            if a.threads == b.threads:
                raise ModelError(f"thread count {a.threads} measured twice", item=item)
        for p in pts:
            if p.threads < 1 or not p.rate > 0 or p.cpu < 0 or p.memory < 0:
                raise ModelError(f"invalid point at {p.threads} threads", item=item)
        return cls(task, pts, approximate, source)

    @property
    def max_threads(self) -> int:
        return self.points[-1].threads

    def _interp(self, q: float, field: str) -> float:
        xs = [p.threads for p in self.points]
        ys = [getattr(p, field) for p in self.points]
        if q <= xs[0]:
            return ys[0]
        if q >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, q)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (q - x0) / (x1 - x0)

    def rate(self, threads: float) -> float:
        """I(q): peak stable input rate with ``threads`` threads on one slot."""
        return self._interp(threads, "rate")

    def cpu(self, threads: float) -> float:
        """C(q): CPU % of one slot at peak rate."""
        return self._interp(threads, "cpu")

    def memory(self, threads: float) -> float:
        """M(q): memory % of one slot at peak rate."""
        return self._interp(threads, "memory")

    @property
    def peak_rate(self) -> float:
        """ω̂ = max_q I(q)."""
        return max(self.rate(q) for q in range(1, self.max_threads + 1))

    @property
    def peak_threads(self) -> int:
        """τ̂ = T(ω̂): the fewest threads reaching the peak rate."""
        return self.threads_for(self.peak_rate)

    def threads_for(self, omega: float) -> int:
        """T(ω): the smallest q with I(q) ≥ ω; raises when no q reaches ω."""
        for q in range(1, self.max_threads + 1):
            if self.rate(q) >= omega - 1e-9:
                return q
        raise ModelError(
            f"rate {omega:g} exceeds the model's peak {self.peak_rate:g}", item=self.task
        )

    def scaled(self, omega: float, threads: int) -> tuple[float, float]:
        """CPU % and memory % of ``threads`` threads serving ``omega`` (< peak): scaled down
        proportionally to the load, as the paper's prediction does (§8)."""
        cap = self.rate(threads)
        f = 1.0 if cap <= 0 else min(1.0, omega / cap)
        return self.cpu(threads) * f, self.memory(threads) * f

    def to_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "approximate": self.approximate,
            "source": self.source,
            "points": [
                {"threads": p.threads, "rate": p.rate, "cpu": p.cpu, "memory": p.memory}
                for p in self.points
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> PerformanceModel:
        task = str(d.get("task") or "")
        if not task:
            raise ModelError("model has no task name", item="model")
        for k in d:
            if k not in _MODEL_KEYS and k != "kind":
                raise ModelError(f"unknown field {k!r}", item=f"model {task}")
        raw = d.get("points")
        if not isinstance(raw, list):
            raise ModelError("points must be a list", item=f"model {task}")
        pts = []
        for i, p in enumerate(raw):
            if isinstance(p, Mapping) and (extra := set(p) - _POINT_KEYS):
                raise ModelError(
                    f"point {i} has unknown field {sorted(map(str, extra))[0]!r}",
                    item=f"model {task}",
                )
            try:
                pts.append(
                    ModelPoint(
                        int(p["threads"]), float(p["rate"]), float(p["cpu"]), float(p["memory"])
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelError(f"point {i} malformed ({exc})", item=f"model {task}") from None
            if not all(math.isfinite(x) for x in (pts[-1].rate, pts[-1].cpu, pts[-1].memory)):
                raise ModelError(f"point {i} not finite", item=f"model {task}")
        return cls.build(
            task,
            pts,
            approximate=bool(d.get("approximate", False)),
            source=str(d.get("source", "")),
        )
