"""Spark's hash functions, reproduced: partitioning and the keyed stage's key hashes.

Spark's ``HashPartitioning`` sends a row to ``pmod(murmur3(col, seed 42), n)``.
:func:`partition_keys` finds, for every partition ``p < n``, a small integer whose
Murmur3 hash lands in ``p``, so the keyed stage can give each row a *native
partition key* and let Spark's own shuffle put it in its unit's partition.
:func:`murmur3_bytes` and :func:`xxhash64_bytes` compute Spark's ``hash()`` and
``xxhash64()`` of strings (numpy over many strings at once), the hashes that place a
key on its instance and shard (:mod:`~streamscale.runtime.spark.routing.routing`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

__all__ = ["murmur3_bytes", "murmur3_long", "partition_keys", "xxhash64_bytes"]

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


# --- Spark's hash() and xxhash64() of strings, vectorised ----------------------------------

_M64 = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _by_length(data: Sequence[bytes]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per distinct byte length ``L``: the rows of that length and their bytes (``n × L``)."""
    lengths = np.fromiter((len(b) for b in data), dtype=np.int64, count=len(data))
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for rows in np.split(order, bounds):
        if len(rows) == 0:
            continue
        width = int(lengths[rows[0]])
        buf = b"".join([data[i] for i in rows.tolist()])
        yield rows, np.frombuffer(buf, dtype=np.uint8).reshape(len(rows), width)


def _words(mat: np.ndarray, start: int, count: int, dtype: str) -> np.ndarray:
    """``count`` little-endian words of ``dtype`` per row, from byte ``start`` on."""
    size = np.dtype(dtype).itemsize
    block = np.ascontiguousarray(mat[:, start : start + count * size])
    return block.view(dtype).reshape(len(mat), count)


def _rotl32(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _rotl64(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _murmur_block(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotl32(k * np.uint32(0xCC9E2D51), 15) * np.uint32(0x1B873593)
    return _rotl32(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def murmur3_bytes(data: Sequence[bytes], seed: int = 42) -> np.ndarray:
    """Spark's ``hash()`` of each string's UTF-8 bytes, as signed 32-bit ints.

    ``Murmur3_x86_32.hashUnsafeBytes``: Murmur3 over the 4-byte little-endian words,
    then, unlike the reference algorithm, every trailing byte mixed as a separate
    *sign-extended* word (Spark keeps this variant for compatibility).
    """
    out = np.empty(len(data), dtype=np.int32)
    for rows, mat in _by_length(data):
        width = mat.shape[1]
        h = np.full(len(rows), seed & _M32, dtype=np.uint32)
        blocks = width // 4
        words = _words(mat, 0, blocks, "<u4")
        for j in range(blocks):
            h = _murmur_block(h, words[:, j])
        for t in range(4 * blocks, width):
            h = _murmur_block(h, mat[:, t].view(np.int8).astype(np.int32).view(np.uint32))
        h ^= np.uint32(width)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
        out[rows] = h.view(np.int32)
    return out


def _xx_round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl64(acc + lane * np.uint64(_P2), 31) * np.uint64(_P1)


def xxhash64_bytes(data: Sequence[bytes], seed: int = 42) -> np.ndarray:
    """Spark's ``xxhash64()`` of each string's UTF-8 bytes (XXH64, seed 42), as signed
    64-bit ints."""
    out = np.empty(len(data), dtype=np.int64)
    p1, p2, p3, p4, p5 = (np.uint64(p) for p in (_P1, _P2, _P3, _P4, _P5))
    for rows, mat in _by_length(data):
        n, width = mat.shape
        stripes = width // 32
        if stripes:
            lanes = _words(mat, 0, 4 * stripes, "<u8")
            acc = [
                np.full(n, (seed + a) & _M64, dtype=np.uint64) for a in (_P1 + _P2, _P2, 0, -_P1)
            ]
            for i in range(stripes):
                for j in range(4):
                    acc[j] = _xx_round(acc[j], lanes[:, 4 * i + j])
            h = _rotl64(acc[0], 1) + _rotl64(acc[1], 7) + _rotl64(acc[2], 12) + _rotl64(acc[3], 18)
            for a in acc:
                h = (h ^ _xx_round(np.zeros(n, dtype=np.uint64), a)) * p1 + p4
        else:
            h = np.full(n, (seed + _P5) & _M64, dtype=np.uint64)
        h += np.uint64(width)
        pos = 32 * stripes
        longs = (width - pos) // 8
        lanes = _words(mat, pos, longs, "<u8")
        for j in range(longs):
            h = _rotl64(h ^ _xx_round(np.zeros(n, dtype=np.uint64), lanes[:, j]), 27) * p1 + p4
        pos += 8 * longs
        if pos + 4 <= width:
            h ^= _words(mat, pos, 1, "<u4")[:, 0].astype(np.uint64) * p1
            h = _rotl64(h, 23) * p2 + p3
            pos += 4
        for t in range(pos, width):
            h ^= mat[:, t].astype(np.uint64) * p5
            h = _rotl64(h, 11) * p1
        h ^= h >> np.uint64(33)
        h *= p2
        h ^= h >> np.uint64(29)
        h *= p3
        h ^= h >> np.uint64(32)
        out[rows] = h.view(np.int64)
    return out
