"""Spark's hash partitioning, reproduced: which partition ``repartition(n, col)`` picks.

Spark's ``HashPartitioning`` sends a row to ``pmod(murmur3(col, seed 42), n)``.
:func:`partition_keys` finds, for every partition ``p < n``, a small integer whose
Murmur3 hash lands in ``p``, so the keyed stage can give each row a *native
partition key* and let Spark's own shuffle put it in its unit's partition.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["murmur3_long", "partition_keys"]

_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix(h1: int, k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _M32
    k1 = (_rotl(k1, 15) * 0x1B873593) & _M32
    h1 ^= k1
    return (_rotl(h1, 13) * 5 + 0xE6546B64) & _M32


def murmur3_long(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of a ``long`` (``Murmur3_x86_32.hashLong``), as a signed 32-bit int."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h = _mix(_mix(seed & _M32, v & _M32), v >> 32)
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


@lru_cache(maxsize=256)
def partition_keys(n: int) -> tuple[int, ...]:
    """For each partition ``p < n``, the smallest ``long`` that Spark hash-partitions to ``p``.

    ``repartition(n, col)`` places a row in ``pmod(murmur3(col), n)``; tagging a
    row with ``partition_keys(n)[p]`` therefore lands it in partition ``p``.
    """
    keys: list[int | None] = [None] * n
    missing, i = n, 0
    while missing:
        p = murmur3_long(i) % n
        if keys[p] is None:
            keys[p] = i
            missing -= 1
        i += 1
    return tuple(int(k) for k in keys if k is not None)


# --- files ----------------------------------------------------------------------------------
