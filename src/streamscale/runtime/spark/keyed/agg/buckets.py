"""A declarative operator's shard table stored as hash buckets, so a batch writes only
the buckets it changed.

A shard's state (:mod:`~streamscale.runtime.spark.keyed.agg.operator`) is an Arrow table of
groups (keys, accumulators, window bounds; a join's buffered rows; a deduplication's
kept keys). Its rows are split into ``n`` buckets (a power of two) by a stable hash of
the group's key columns (:func:`key_hash`, numpy over the Arrow buffers, the same in
every process and run), each bucket stored as its own state entry
``(PIECE, n, i)`` holding the bucket's Arrow IPC bytes. The shard's versioned state
(:mod:`~streamscale.runtime.spark.state.state_log`) records the entries a batch sets or
deletes, so its changelog holds only the buckets whose rows changed: a batch touching
three groups of a 100,000-group shard writes at most three buckets.

``n`` follows the table's size: about :data:`BUCKET_BYTES` of Arrow data per bucket
(at most ``2**MAX_LOG2`` buckets), kept while the size stays within a factor of two of
that (so a growing shard re-buckets, rewriting every bucket once, each time it grows
about fourfold). A small shard is one bucket: what it writes is what one blob was.

A shard written before buckets existed holds one entry, :data:`LEGACY_KEY` (the whole
table); it is read as it is, and the first batch that changes the shard writes its
buckets and deletes that entry.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.runtime.spark.keyed.agg.kernels import from_ipc, to_ipc

__all__ = [
    "BUCKET_BYTES",
    "LEGACY_KEY",
    "MAX_LOG2",
    "PIECE",
    "bucket_log2",
    "bucket_of",
    "key_hash",
    "read_pieces",
    "split_buckets",
    "store",
    "tables_of",
]

PIECE = "arrow"  # the first item of a bucket's state key: ("arrow", n, i)
LEGACY_KEY = "arrow"  # the one entry of a shard stored as a single table (before buckets)
#: Arrow bytes aimed at per bucket. Each bucket costs ~500 bytes more than its rows (its
#: IPC schema and batch header, its changelog entry). Measured (benchmarks/bench_agg_state.py,
#: 200,000 groups in 8 shards, 10-row batches): 4 KiB buckets write 0.9 % of what one blob
#: per shard did but make the snapshot 16 % larger; 16 KiB write 3 % with a 4 % larger
#: snapshot; 64 KiB write 18-21 %. Batches touching about as many groups per shard as it
#: has buckets (here 1,000 rows) write the whole shard at any size.
BUCKET_BYTES = 16 * 1024
MAX_LOG2 = 12  # at most 4096 buckets per shard

_U = np.uint64
_C1, _C2 = _U(0xFF51AFD7ED558CCD), _U(0xC4CEB9FE1A85EC53)
_P = _U(0x100000001B3)
_NULL = _U(0x9E3779B97F4A7C15)
_SEED = _U(0x27D4EB2F165667C5)


def _fmix(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (every input bit reaches every output bit)."""
    h = h ^ (h >> _U(33))
    h = h * _C1
    h = h ^ (h >> _U(33))
    h = h * _C2
    return h ^ (h >> _U(33))


def _words_hash(data: np.ndarray, start: np.ndarray, length: int) -> np.ndarray:
    """Values of one byte ``length`` (at most :data:`_SHORT`) starting at ``start``: their
    bytes as little-endian 64-bit words (zero-padded), folded word by word."""
    width = (length + 7) // 8 * 8
    m = np.zeros((len(start), width), dtype=np.uint8)
    m[:, :length] = data[start[:, None] + np.arange(length)]
    words = m.view(np.dtype("<u8"))
    h = np.full(len(start), _SEED, dtype=np.uint64)
    for j in range(words.shape[1]):
        h = _fmix((h ^ words[:, j]) * _P)
    return h


def _poly_hash(data: np.ndarray, start: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Values of any lengths: a polynomial hash of their bytes (numpy over all at once)."""
    total = int(lengths.sum())
    first = np.zeros(len(start), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    row = np.repeat(np.arange(len(start)), lengths)
    pos = np.arange(total) - first[row]
    b = data[start[row] + pos].astype(np.uint64)
    powers = np.ones(int(lengths.max()), dtype=np.uint64)
    powers[1:] = np.cumprod(np.full(len(powers) - 1, _P, dtype=np.uint64))
    cum = np.zeros(total + 1, dtype=np.uint64)
    np.cumsum((b + _U(1)) * powers[pos], out=cum[1:])
    return cum[first + lengths] - cum[first]  # modulo 2**64, as the sums were


_SHORT = 64  # values up to this many bytes hash as words, longer ones as a polynomial


def _bytes_hash(arr: pa.Array) -> np.ndarray:
    """Per value of a string or binary array: a hash of its bytes and length (how depends
    on the length only, so equal values always hash alike)."""
    n = len(arr)
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[arr.offset : arr.offset + n + 1].astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    start = offsets[:-1] - lo
    lengths = offsets[1:] - offsets[:-1]
    h = np.zeros(n, dtype=np.uint64)
    if hi > lo:
        data = np.frombuffer(bufs[2], dtype=np.uint8)[lo:hi]
        order = np.argsort(lengths, kind="stable")
        cut = np.flatnonzero(np.diff(lengths[order])) + 1
        for rows in np.split(order, cut):
            length = int(lengths[rows[0]])
            if 0 < length <= _SHORT:
                h[rows] = _words_hash(data, start[rows], length)
        long = lengths > _SHORT
        if long.any():
            h[long] = _poly_hash(data, start[long], lengths[long])
    return _fmix(h ^ (lengths.astype(np.uint64) * _P))


def _column_hash(arr: pa.Array) -> np.ndarray:
    """Per value of one key column: a 64-bit hash that depends on the value only (equal
    values hash equally, wherever and whenever computed); nulls hash alike."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string_view(t):
        arr, t = arr.cast(pa.large_string()), pa.large_string()
    elif pa.types.is_binary_view(t):
        arr, t = arr.cast(pa.large_binary()), pa.large_binary()
    if pa.types.is_decimal(t):
        arr, t = arr.cast(pa.string()), pa.string()
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or (pa.types.is_large_binary(t))
    ):
        h = _bytes_hash(arr)
    elif pa.types.is_boolean(t):
        v = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint64)
        h = _fmix(v + _U(1))
    elif pa.types.is_floating(t):
        v = pc.fill_null(arr, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
        v = np.where(np.isnan(v), np.nan, v) + 0.0  # one NaN, and -0.0 is 0.0
        h = _fmix(v.view(np.uint64))
    elif pa.types.is_integer(t) or (pa.types.is_temporal(t) and t.bit_width in (32, 64)):
        if not pa.types.is_integer(t):
            arr = arr.view(pa.int64() if t.bit_width == 64 else pa.int32())
        v = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        h = _fmix(v.view(np.uint64) ^ _SEED)
    elif pa.types.is_struct(t):
        h = np.full(len(arr), _SEED, dtype=np.uint64)
        for child in arr.flatten():
            h = _fmix(h * _P + _column_hash(child))
    else:  # lists, maps…: their values' text (rare as keys)
        h = _bytes_hash(pa.array([repr(v) for v in arr.to_pylist()], pa.large_string()))
    if arr.null_count:
        h = np.where(arr.is_valid().to_numpy(zero_copy_only=False), h, _NULL)
    return h


def key_hash(table: pa.Table, keys: Iterable[str]) -> np.ndarray:
    """A stable 64-bit hash (``uint64``) of each row's ``keys`` columns of ``table``."""
    h = np.full(table.num_rows, _SEED, dtype=np.uint64)
    for k in keys:
        col = table.column(k)
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        h = _fmix(h * _P + _column_hash(arr))
    return h


def bucket_of(table: pa.Table, keys: Iterable[str], log2: int) -> np.ndarray:
    """Each row's bucket among ``2**log2`` (the top bits of :func:`key_hash`)."""
    if log2 <= 0:
        return np.zeros(table.num_rows, dtype=np.int64)
    return (key_hash(table, keys) >> _U(64 - log2)).astype(np.int64)


def split_buckets(table: pa.Table, keys: Iterable[str], log2: int) -> dict[int, pa.Table]:
    """``table``'s rows by bucket (non-empty buckets only), each ordered by key hash (rows
    of one key in ``table``'s order): a bucket's rows come out in the same order whatever
    order the hash aggregation that built ``table`` gave its groups."""
    if table.num_rows == 0:
        return {}
    if log2 <= 0:
        return {0: table}
    h = key_hash(table, keys)
    order = np.argsort(h, kind="stable")
    ids = (h[order] >> _U(64 - log2)).astype(np.int64)
    cut = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(ids)]])
    body = table.take(pa.array(order))
    return {int(ids[a]): body.slice(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)}


def bucket_log2(
    nbytes: int, current: int | None = None, *, bucket_bytes: int = BUCKET_BYTES
) -> int:
    """How many buckets (``2**result``) a table of ``nbytes`` gets: about ``bucket_bytes``
    each; ``current`` (the stored layout) is kept while within one doubling of that."""
    want = 0
    if nbytes > bucket_bytes:
        want = min(MAX_LOG2, math.ceil(math.log2(nbytes / bucket_bytes)))
    if current is not None and abs(current - want) <= 1:
        return current
    return want


def is_piece(key: Any) -> bool:
    """Whether a state entry holds (part of) the table: a bucket or the legacy blob."""
    return key == LEGACY_KEY or (isinstance(key, tuple) and len(key) == 3 and key[0] == PIECE)


def read_pieces(state: Mapping[Any, Any]) -> dict[Any, pa.Table]:
    """The stored pieces of a shard's table by state key (buckets, or the legacy blob)."""
    out = {}
    for k in list(dict.keys(state)):  # type: ignore[arg-type]
        if is_piece(k):
            blob = dict.__getitem__(state, k)  # type: ignore[index]
            if blob:
                out[k] = from_ipc(blob)
    return out


def tables_of(pieces: Mapping[Any, pa.Table]) -> list[pa.Table]:
    """The pieces as few tables as their schemas allow (one when all agree)."""
    by_schema: list[list[pa.Table]] = []
    for t in pieces.values():
        for group in by_schema:
            if group[0].schema.equals(t.schema):
                group.append(t)
                break
        else:
            by_schema.append([t])
    return [g[0] if len(g) == 1 else pa.concat_tables(g) for g in by_schema]


def _layout(pieces: Mapping[Any, pa.Table]) -> int | None:
    """The stored bucket count's log2, when every piece is a bucket of one count."""
    counts = {k[1] for k in pieces if isinstance(k, tuple)}
    if len(counts) != 1 or LEGACY_KEY in pieces:
        return None
    n = counts.pop()
    return n.bit_length() - 1 if n > 0 and n & (n - 1) == 0 else None


def store(
    state: MutableMapping[Any, Any],
    table: pa.Table | None,
    keys: Iterable[str],
    pieces: Mapping[Any, pa.Table],
    *,
    bucket_bytes: int = BUCKET_BYTES,
) -> int:
    """Put ``table`` (the shard's new table; ``None``: no rows) into ``state`` as buckets,
    setting only the entries whose rows differ from ``pieces`` (what was read) and
    deleting those no longer used; returns how many entries were set."""
    if table is None or table.num_rows == 0:
        for k in pieces:
            del state[k]
        return 0
    log2 = bucket_log2(table.nbytes, _layout(pieces), bucket_bytes=bucket_bytes)
    n = 1 << log2
    new = {(PIECE, n, i): t for i, t in split_buckets(table, keys, log2).items()}
    for k in pieces:
        if k not in new:
            del state[k]
    written = 0
    for k, t in new.items():
        old = pieces.get(k)
        if old is not None and old.schema.equals(t.schema) and old.equals(t):
            continue
        blob = to_ipc(t)
        if old is not None and blob == dict.__getitem__(state, k):  # type: ignore[index]
            continue  # equal bytes (NaN values compare unequal)
        state[k] = blob
        written += 1
    return written
