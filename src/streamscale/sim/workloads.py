"""Seeded workloads for the simulator (paper 000, §5.1 and §5.4).

A finite source ``rate`` may ramp up linearly over ``ramp_s`` seconds.

* :class:`MicroBenchmark` — generator → calculator (Fig. 5): keys Zipf(α) over
  10 K values, ω random permutations of the key frequencies per minute, per-tuple
  cost N(μ, (0.5μ)²), 128-byte tuples, 32 KB of state per shard.
* :class:`StockExchange` — an SSE-like application (Fig. 17): a transactor
  followed by 6 statistics and 5 event operators, all keyed by stock; per-stock
  order rates drift (log-normal random walk per epoch) with bursts of sudden
  popularity, standing in for the proprietary order trace (Fig. 18).

Key → instance and key → shard are static hashes (CONTRACTS.md):
``instance = h1(key) % E`` and ``shard = h2(key) % Z`` with a splitmix64 mix.
Every random choice is a pure function of the seed and the epoch, so any time
can be evaluated in any order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from streamscale.errors import ModelError
from streamscale.model import Cluster, Edge, Operator, Topology

__all__ = [
    "MicroBenchmark",
    "StockExchange",
    "key_shards",
    "mix64",
    "zipf_weights",
]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of ``x + salt`` (a fixed, well-spread integer hash)."""
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint64) + np.uint64(salt) * np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def key_shards(keys: int, instances: int, shards: int) -> np.ndarray:
    """Global shard index ``e·Z + s`` of each key ``0 … keys−1``."""
    k = np.arange(keys, dtype=np.uint64)
    e = (mix64(k, 1) % np.uint64(instances)).astype(np.int64)
    s = (mix64(k, 2) % np.uint64(shards)).astype(np.int64)
    return e * shards + s


def zipf_weights(keys: int, alpha: float) -> np.ndarray:
    """Frequencies ∝ 1/rank^α over ``keys`` keys (α = 0 is uniform), summing to 1."""
    if keys < 1:
        raise ModelError("keys must be >= 1", item="workload.keys")
    w = 1.0 / np.arange(1, keys + 1, dtype=float) ** alpha
    return w / w.sum()


class _Weights:
    """Per-(operator shape, version) shard weights from per-key frequencies, cached."""

    def __init__(self, keys: int) -> None:
        self.keys = keys
        self._maps: dict[tuple[int, int], np.ndarray] = {}
        self._cache: dict[tuple[int, int, object], np.ndarray] = {}

    def shard_weights(self, e: int, z: int, version: object, freq: np.ndarray) -> np.ndarray:
        key = (e, z, version)
        p = self._cache.get(key)
        if p is None:
            m = self._maps.get((e, z))
            if m is None:
                m = self._maps[(e, z)] = key_shards(self.keys, e, z)
            p = np.bincount(m, freq, minlength=e * z)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = p
        return p


@dataclass(frozen=True)
class MicroBenchmark:
    """The micro-benchmark of paper 000, §5.1 (defaults are the paper's)."""

    nodes: int = 32
    cores: int = 8
    instances: int = 32
    shards: int = 256
    keys: int = 10_000
    alpha: float = 0.5
    omega: float = 0.0
    cost_ms: float = 1.0
    tuple_bytes: int = 128
    state_bytes_per_shard: int = 32 * 1024
    generators: int = 32
    rate: float = math.inf
    ramp_s: float = 0.0
    bandwidth_mbps: float = 1000.0
    seed: int = 0
    _w: _Weights = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.omega < 0:
            raise ModelError("omega must be >= 0", item="workload.omega")
        object.__setattr__(self, "_w", _Weights(self.keys))

    def cluster(self) -> Cluster:
        return Cluster.uniform(self.nodes, cores=self.cores, bandwidth_mbps=self.bandwidth_mbps)

    def topology(self, *, instances: int | None = None, shards: int | None = None) -> Topology:
        """Generator → calculator → sink; ``instances``/``shards`` override the calculator's."""
        e = instances or self.instances
        z = shards or self.shards
        ops = [
            Operator("generator", kind="source", instances=self.generators, tuple_bytes=128),
            Operator(
                "calculator",
                key="key",
                cost_ms=self.cost_ms,
                state_bytes=self.state_bytes_per_shard * e * z,
                tuple_bytes=self.tuple_bytes,
                instances=e,
                shards=z,
            ),
            Operator("sink", kind="sink"),
        ]
        edges = [Edge("generator", "calculator", "key"), Edge("calculator", "sink")]
        return Topology.build("micro-benchmark", ops, edges)

    def static_topology(self) -> Topology:
        """The static approach's topology: one instance per core, same shards per operator."""
        e = self.nodes * self.cores
        return self.topology(instances=e, shards=max(1, self.instances * self.shards // e))

    def version(self, now: float) -> int:
        """Index of the key permutation in force at ``now``.

        One shuffle every 60/ω s, the first after half a period (30/ω s), so that
        even ω = 1 shuffles within a one-minute run.
        """
        return 0 if self.omega <= 0 else math.floor(now * self.omega / 60.0 + 0.5 + 1e-9)

    def shuffle_times(self, end: float) -> list[float]:
        """Times of the key shuffles before ``end``."""
        if self.omega <= 0:
            return []
        period = 60.0 / self.omega
        return [t for k in range(1, int(end / period) + 2) if (t := (k - 0.5) * period) < end]

    def frequencies(self, version: int) -> np.ndarray:
        """Per-key frequencies after ``version`` shuffles (permutation 0 = identity)."""
        base = zipf_weights(self.keys, self.alpha)
        if version == 0:
            return base
        perm = np.random.default_rng([self.seed, version]).permutation(self.keys)
        return base[perm]

    def capacity(self) -> float:
        """Tuples/s the cluster's cores can process (every core busy)."""
        return self.nodes * self.cores * 1000.0 / self.cost_ms

    def hot_shard_ceiling(self, end: float) -> float:
        """Tuples/s at which the hottest shard fills one core, for the worst key
        permutation in force before ``end`` (a shard is never split over cores)."""
        worst = max(
            float(self._w.shard_weights(self.instances, self.shards, v, self.frequencies(v)).max())
            for v in range(self.version(end) + 1)
        )
        return 1000.0 / self.cost_ms / worst

    # Demand protocol
    def rate_at(self, now: float) -> float:
        return self.rate

    def demand(self) -> _Demand:
        return _Demand(self, self.frequencies)


_STATS = ("volume", "vwap", "moving_avg", "index", "turnover", "spread")
_EVENTS = ("price_alarm", "volume_alarm", "momentum", "halt", "imbalance")


@dataclass(frozen=True)
class StockExchange:
    """An SSE-like order stream and analytics topology (paper 000, §5.4, Fig. 17).

    Orders (96 B) reach a transactor keyed by stock; each order yields a trade
    with probability ``trade_ratio`` (a 160-byte record) sent to 6 statistics
    operators (≈200–400 MB of state each) and 5 event operators (< 10 MB).
    ``state_scale`` multiplies every operator's state (a scaled-down cluster
    keeps the state per instance of the full one).
    Popularity: Zipf(α) over ``stocks`` at the start; every ``epoch_s`` each
    stock's log-rate takes a N(0, ``volatility``²) step and with probability
    ``burst_p`` a stock bursts by ×``burst_x`` for ``burst_epochs`` epochs.
    """

    nodes: int = 32
    cores: int = 8
    instances: int = 32
    shards: int = 64
    stocks: int = 2000
    alpha: float = 0.5
    rate: float = math.inf
    ramp_s: float = 0.0
    transactor_ms: float = 0.1
    statistics_ms: float = 0.25
    event_ms: float = 0.05
    trade_ratio: float = 0.6
    epoch_s: float = 2.0
    volatility: float = 0.15
    burst_p: float = 0.002
    burst_x: float = 3.0
    burst_epochs: int = 5
    bandwidth_mbps: float = 1000.0
    state_scale: float = 1.0
    seed: int = 0
    _w: _Weights = field(init=False, repr=False, compare=False)
    _walk: dict[int, tuple[int, np.ndarray]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_w", _Weights(self.stocks))
        object.__setattr__(self, "_walk", {})

    def cluster(self) -> Cluster:
        return Cluster.uniform(self.nodes, cores=self.cores, bandwidth_mbps=self.bandwidth_mbps)

    def topology(self, *, instances: int | None = None, shards: int | None = None) -> Topology:
        e = instances or self.instances
        z = shards or self.shards
        rng = np.random.default_rng([self.seed, 17])

        def keyed(name: str, cost: float, state: float, out: int) -> Operator:
            return Operator(
                name,
                key="stock",
                cost_ms=cost,
                state_bytes=int(state),
                tuple_bytes=out,
                instances=e,
                shards=z,
            )

        ops = [
            Operator("orders", kind="source", instances=self.nodes, tuple_bytes=96),
            keyed("transactor", self.transactor_ms, 50e6 * self.state_scale, 160),
        ]
        scale = self.state_scale
        ops += [keyed(n, self.statistics_ms, rng.uniform(200e6, 400e6) * scale, 64) for n in _STATS]
        ops += [keyed(n, self.event_ms, rng.uniform(1e6, 10e6) * scale, 64) for n in _EVENTS]
        ops.append(Operator("sink", kind="sink"))
        edges = [Edge("orders", "transactor", "key")]
        edges += [
            Edge("transactor", n, "key", selectivity=self.trade_ratio) for n in (*_STATS, *_EVENTS)
        ]
        edges += [Edge(n, "sink") for n in (*_STATS, *_EVENTS)]
        return Topology.build("sse", ops, edges)

    def static_topology(self, *, sized_by_cost: bool = False) -> Topology:
        """The static approach: one core per instance, every core used.

        By default every operator gets the same number of instances: a static
        deployment does not know its operators' per-tuple costs. ``sized_by_cost``
        sizes each operator in proportion to its expected load (an oracle that
        knows every cost and the trade ratio; not the paper's baseline).
        """
        topo = self.topology()
        share = {"transactor": self.transactor_ms}
        share.update({n: self.statistics_ms * self.trade_ratio for n in _STATS})
        share.update({n: self.event_ms * self.trade_ratio for n in _EVENTS})
        if not sized_by_cost:
            share = dict.fromkeys(share, 1.0)
        total = sum(share.values())
        cores = self.nodes * self.cores
        per_op = self.instances * self.shards
        count = {n: max(1, int(cores * v / total)) for n, v in share.items()}
        while sum(count.values()) > max(cores, len(count)):
            count[max(count, key=lambda n: count[n])] -= 1
        ops = []
        for op in topo.operators:
            if op.name in share:
                e = count[op.name]
                ops.append(
                    Operator(
                        op.name,
                        key=op.key,
                        cost_ms=op.cost_ms,
                        state_bytes=op.state_bytes,
                        tuple_bytes=op.tuple_bytes,
                        instances=e,
                        shards=max(1, per_op // e),
                    )
                )
            else:
                ops.append(op)
        return Topology.build("sse-static", ops, topo.edges)

    def version(self, now: float) -> int:
        return math.floor(now / self.epoch_s + 1e-9)

    def order_cost_ms(self) -> float:
        """Core-milliseconds one order costs over the whole topology."""
        return self.transactor_ms + self.trade_ratio * (
            len(_STATS) * self.statistics_ms + len(_EVENTS) * self.event_ms
        )

    def capacity(self) -> float:
        """Orders/s the cluster's cores can process (every core busy)."""
        return self.nodes * self.cores * 1000.0 / self.order_cost_ms()

    def hot_shard_ceiling(self, end: float) -> float:
        """Orders/s at which the hottest shard of the costliest operator fills one
        core, for the worst popularity epoch before ``end``."""
        per_core = max(self.transactor_ms, self.trade_ratio * self.statistics_ms)
        worst = max(
            float(self._w.shard_weights(self.instances, self.shards, e, self.shares(e)).max())
            for e in range(self.version(end) + 1)
        )
        return 1000.0 / per_core / worst

    def shares(self, epoch: int) -> np.ndarray:
        """Per-stock share of the orders during ``epoch`` (sums to 1)."""
        base = np.log(zipf_weights(self.stocks, self.alpha))
        base = base[np.random.default_rng([self.seed, 0]).permutation(self.stocks)]
        at, logw = self._walk.get(0, (0, base))
        if at > epoch:
            at, logw = 0, base
        while at < epoch:
            at += 1
            rng = np.random.default_rng([self.seed, 1, at])
            logw = logw + rng.normal(0.0, self.volatility, self.stocks)
            # mean reversion towards the base popularity keeps the walk stationary
            logw = logw + 0.05 * (base - logw)
        self._walk[0] = (at, logw)
        out = logw.copy()
        for past in range(max(1, epoch - self.burst_epochs + 1), epoch + 1):
            hot = np.random.default_rng([self.seed, 2, past]).random(self.stocks) < self.burst_p
            out[hot] += math.log(self.burst_x)
        w = np.exp(out - out.max())
        return w / w.sum()

    def demand(self) -> _Demand:
        return _Demand(self, self.shares)


class _Demand:
    """A workload's demand: its rate and shard weights, recomputed only when the
    key frequencies change version (a shuffle or a popularity epoch)."""

    def __init__(
        self, wl: MicroBenchmark | StockExchange, freq: Callable[[int], np.ndarray]
    ) -> None:
        self.wl = wl
        self._freq_of = freq
        self._freq: tuple[int, np.ndarray] = (0, freq(0))

    def rate(self, source: str, now: float) -> float:
        # a finite rate ramps up linearly over ramp_s, so a job is not buried
        # under the backlog of its first seconds
        r, ramp = self.wl.rate, self.wl.ramp_s
        return r * min(1.0, now / ramp) if math.isfinite(r) and ramp > 0 else r

    def weights(
        self, operator: str, instances: int, shards: int, now: float
    ) -> tuple[int, np.ndarray]:
        v = self.wl.version(now)
        if v != self._freq[0]:
            self._freq = (v, self._freq_of(v))
        return v, self.wl._w.shard_weights(instances, shards, v, self._freq[1])
