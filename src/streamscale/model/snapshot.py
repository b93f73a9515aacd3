"""Snapshots: what a collector observed over one statistics period.

Loads are in cores (1.0 = one core fully busy); rates in tuples/s; sizes in bytes.
A shard is identified by its operator and its index within the operator
(instance ``e`` with ``Z`` shards owns indices ``e·Z … e·Z+Z−1``); in ALBIC's
terms a shard is a key group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streamscale.errors import ModelError

__all__ = ["NodeStats", "OperatorStats", "ShardStats", "Snapshot", "Traffic", "batch_headroom"]


def batch_headroom(overhead_s: float, cycle_s: float) -> float:
    """The share of a micro-batch cycle a core's work may take so that batches keep the
    cycle: ``1 − F / max(T, 2F)`` for a fixed cost ``F`` per batch and a target cycle ``T``
    (a batch of overhead ``F`` whose busiest core works ``u`` of the cycle settles at a
    cycle of ``F / (1 − u)``, which is ``T`` at ``u = 1 − F/T``). An overhead of half the
    target or more aims at a cycle of ``2F`` instead (cores beyond that only shorten the
    part that shrinks, so the share never falls below one half); 1 when either is unknown.

    >>> batch_headroom(0.5, 2.0)
    0.75
    >>> batch_headroom(3.0, 2.0)  # overhead above the trigger: a 6 s cycle, half of it work
    0.5
    >>> batch_headroom(0.0, 2.0), batch_headroom(0.5, 0.0)
    (1.0, 1.0)
    """
    if not (overhead_s > 0 and cycle_s > 0):
        return 1.0
    return 1.0 - overhead_s / max(cycle_s, 2.0 * overhead_s)


@dataclass(frozen=True, slots=True)
class OperatorStats:
    """Per operator: input and output rate, and service rate μ per core (tuples/s)."""

    input_rate: float = 0.0
    output_rate: float = 0.0
    service_rate: float | None = None
    backlog: float = 0.0


@dataclass(frozen=True, slots=True)
class ShardStats:
    """Per shard (key group): load in cores, tuples in the period, state size, output rate,
    and tuples queued for it (waiting or held back) at the end of the period."""

    operator: str
    shard: int
    load: float = 0.0
    rows: int = 0
    state_bytes: int = 0
    output_rate: float = 0.0
    backlog: float = 0.0


@dataclass(frozen=True, slots=True)
class Traffic:
    """Tuples/s from one shard of an operator to one shard of a downstream operator."""

    src: str
    src_shard: int
    dst: str
    dst_shard: int
    rate: float


@dataclass(frozen=True, slots=True)
class NodeStats:
    """Per node: CPU use (% of one core), bandwidth use (Mbit/s), marked for removal."""

    cpu: float = 0.0
    bandwidth_mbps: float = 0.0
    marked_for_removal: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Observed statistics at ``time`` (seconds, from the collector's clock).

    A micro-batch runtime also reports ``batch_overhead_s``, the part of a batch's wall
    time that more cores do not shorten (the batch minus, per keyed stage, its longest
    task: Spark's job and stage scheduling, exchanges, the driver's round trips), and
    ``cycle_target_s``, the batch cycle it aims at (the trigger interval); both 0 where
    unknown or not micro-batched.
    """

    time: float = 0.0
    operators: Mapping[str, OperatorStats] = field(default_factory=dict)
    shards: tuple[ShardStats, ...] = ()
    edges: Mapping[str, float] = field(default_factory=dict)
    traffic: tuple[Traffic, ...] = ()
    nodes: Mapping[str, NodeStats] = field(default_factory=dict)
    batch_overhead_s: float = 0.0
    cycle_target_s: float = 0.0

    @classmethod
    def build(
        cls,
        *,
        time: float = 0.0,
        operators: Mapping[str, OperatorStats] | None = None,
        shards: Iterable[ShardStats] = (),
        edges: Mapping[str, float] | None = None,
        traffic: Iterable[Traffic] = (),
        nodes: Mapping[str, NodeStats] | None = None,
        batch_overhead_s: float = 0.0,
        cycle_target_s: float = 0.0,
    ) -> Snapshot:
        """Validate and build; raises :class:`ModelError` naming the offending item.

        Examples
        --------
        >>> s = Snapshot.build(
        ...     operators={"count": OperatorStats(input_rate=500.0, service_rate=400.0)},
        ...     shards=[ShardStats("count", 0, load=0.7), ShardStats("count", 1, load=0.5)])
        >>> [sh.load for sh in s.shards_of("count")]
        [0.7, 0.5]
        >>> Snapshot.build(shards=[ShardStats("count", 0, load=-1.0)])
        Traceback (most recent call last):
        ...
        streamscale.errors.ModelError: shard count/0: values must be >= 0
        """
        snap = cls(
            time,
            dict(operators or {}),
            tuple(shards),
            dict(edges or {}),
            tuple(traffic),
            dict(nodes or {}),
            float(batch_overhead_s),
            float(cycle_target_s),
        )
        snap.validate()
        return snap

    def validate(self) -> None:
        if not (self.batch_overhead_s >= 0 and self.cycle_target_s >= 0):
            raise ModelError("batch figures must be >= 0", item="snapshot")
        for name, o in self.operators.items():
            if o.input_rate < 0 or o.output_rate < 0 or o.backlog < 0:
                raise ModelError("rates must be >= 0", item=f"operator {name}")
            if o.service_rate is not None and not o.service_rate > 0:
                raise ModelError("service_rate must be > 0", item=f"operator {name}")
        seen: set[tuple[str, int]] = set()
        for s in self.shards:
            item = f"shard {s.operator}/{s.shard}"
            if (s.operator, s.shard) in seen:
                raise ModelError("reported twice", item=item)
            seen.add((s.operator, s.shard))
            if s.shard < 0 or s.load < 0 or s.rows < 0 or s.state_bytes < 0 or s.output_rate < 0:
                raise ModelError("values must be >= 0", item=item)
        for t in self.traffic:
            if t.rate < 0:
                raise ModelError(
                    "rate must be >= 0",
                    item=f"traffic {t.src}/{t.src_shard}->{t.dst}/{t.dst_shard}",
                )
        for name, rate in self.edges.items():
            if rate < 0:
                raise ModelError("rate must be >= 0", item=f"edge {name}")

    @property
    def batch_headroom(self) -> float:
        """:func:`batch_headroom` of this snapshot's batch figures (1: not micro-batched
        or unknown)."""
        return batch_headroom(self.batch_overhead_s, self.cycle_target_s)

    def shards_of(self, operator: str) -> tuple[ShardStats, ...]:
        return tuple(s for s in self.shards if s.operator == operator)

    @property
    def marked_for_removal(self) -> frozenset[str]:
        return frozenset(n for n, s in self.nodes.items() if s.marked_for_removal)
