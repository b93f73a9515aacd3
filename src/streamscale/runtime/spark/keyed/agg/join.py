"""One batch of a stream-stream join in one task, as a pure function of Arrow tables.

The rules are Spark's ``StreamingSymmetricHashJoinExec`` (state format 2):

* rows of either side whose time is at or before the *previous* batch's watermark are
  late and dropped;
* the batch's new left rows join the buffered right rows; each new left row is buffered
  (with whether it matched), even one already behind the left state watermark; then the
  new right rows join every buffered left row (the new ones included) and are buffered
  alike unless already behind the right state watermark (a right or full outer join
  buffers those too when they did not match) — so each pair is produced once, and a
  row's *matched* flag is set as soon as it joins;
* ``left_semi`` emits a left row once, at its first match, and buffers only unmatched
  new left rows;
* keys compare as in Spark's state store, where a null key equals a null key; Spark's
  optimizer first drops rows with a null key from the sides a join does not preserve
  (both for ``inner`` and ``left_semi``, the right for ``left``, the left for
  ``right``, none for ``full``), so null keys meet only in a full outer join;
* after the batch, buffered rows behind their side's state watermark leave the state;
  an outer join emits the leaving rows of its outer side(s) that never matched, with
  nulls for the other side.

With the time condition ``left.t + lower <= right.t <= left.t + upper`` and the batch's
watermark ``wm`` (ms), the state watermarks are Spark's ``StreamingJoinHelper``'s:
``wm - upper - 1`` for the left side and ``wm + lower - 1`` for the right side (ms); a row
leaves when its time (µs) is at or before that value × 1000.

A task's rows of all its shards are folded at once: matching is one hash join
(``pyarrow.Table.join``) of (shard, keys, row index) tables, then vectorized filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.runtime.spark.keyed.agg.fold import Folded

__all__ = ["HOWS", "LCOL", "MATCHED", "RCOL", "SIDE", "TCOL", "JoinOp", "fold_join", "state_marks"]

HOWS: tuple[str, ...] = ("inner", "left", "right", "full", "left_semi")
SIDE, LCOL, RCOL, TCOL = "__ss_side", "__ss_l", "__ss_r", "__ss_t"  # side 0 left, 1 right
MATCHED = "__ss_matched"  # a buffered row joined at least once
_LI, _RI = "__ss_li", "__ss_ri"
#: The sides whose rows with a null key Spark's optimizer filters out before the join
#: (``InferFiltersFromConstraints``: the sides an outer join does not preserve).
_NOT_NULL: dict[str, tuple[int, ...]] = {
    "inner": (0, 1), "left": (1,), "right": (0,), "full": (), "left_semi": (0, 1),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class JoinOp:
    """What a reduce task needs (picklable).

    ``lower_us``/``upper_us``: the time condition's bounds (``None``: keys only).
    """

    keys: tuple[str, ...]
    how: str
    lower_us: int | None = None
    upper_us: int | None = None


def state_marks(op: JoinOp, evict_ms: int | None) -> tuple[int | None, int | None]:
    """The left and right state watermarks (µs) of a batch evicting with ``evict_ms``."""
    if evict_ms is None or op.lower_us is None or op.upper_us is None:
        return None, None
    left = evict_ms - _ceil_ms(op.upper_us) - 1
    right = evict_ms + _floor_ms(op.lower_us) - 1
    return left * 1000, right * 1000


def _floor_ms(us: int) -> int:
    return us // 1000


def _ceil_ms(us: int) -> int:
    return -((-us) // 1000)


def _times(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Row times (µs) and whether they are known."""
    col = t.column(TCOL)
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    vals = pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return vals, valid


def _behind(t: pa.Table, mark_us: int | None) -> np.ndarray:
    """Rows whose time is at or before ``mark_us`` (never for an unknown time)."""
    if mark_us is None or t.num_rows == 0:
        return np.zeros(t.num_rows, dtype=bool)
    vals, valid = _times(t)
    return valid & (vals <= mark_us)


def _pairs(
    left: pa.Table, right: pa.Table, group: list[str], op: JoinOp
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into ``left``, into ``right``) of the pairs with equal ``group`` values
    (a null never equals) meeting the time condition."""
    empty = np.empty(0, np.int64)
    if left.num_rows == 0 or right.num_rows == 0:
        return empty, empty
    lk = left.select(group).append_column(_LI, pa.array(np.arange(left.num_rows)))
    rk = right.select(group).append_column(_RI, pa.array(np.arange(right.num_rows)))
    on = list(group)
    if op.how == "full":  # no rows were filtered: null keys equal, as in Spark's state
        lk, rk, on = _null_safe(lk, rk, on)
    j = lk.join(rk, keys=on, join_type="inner", use_threads=False)
    li = j.column(_LI).to_numpy().astype(np.int64)
    ri = j.column(_RI).to_numpy().astype(np.int64)
    if op.lower_us is not None and op.upper_us is not None and len(li):
        lt, lv = _times(left)
        rt, rv = _times(right)
        a, b = lt[li], rt[ri]
        ok = lv[li] & rv[ri] & (b >= a + op.lower_us) & (b <= a + op.upper_us)
        li, ri = li[ok], ri[ok]
    return li, ri


def _null_safe(lk: pa.Table, rk: pa.Table, on: list[str]) -> tuple[pa.Table, pa.Table, list[str]]:
    """Key tables on which a null key equals a null key: each key column with a null gets
    its nulls filled (with any value of it) and a flag column of where they were."""
    keys = list(on)
    for k in on:
        a, b = lk.column(k), rk.column(k)
        na, nb = pc.is_null(a), pc.is_null(b)
        if not (pc.any(na).as_py() or pc.any(nb).as_py()):
            continue
        seen = pc.drop_null(pa.chunked_array([*a.chunks, *b.chunks], a.type))
        if len(seen):
            a, b = pc.fill_null(a, seen[0]), pc.fill_null(b, seen[0])
        else:
            a, b = pa.array(np.zeros(len(a), np.int8)), pa.array(np.zeros(len(b), np.int8))
        flag = f"__ss_null_{k}"
        lk = lk.set_column(lk.schema.get_field_index(k), k, a).append_column(flag, na)
        rk = rk.set_column(rk.schema.get_field_index(k), k, b).append_column(flag, nb)
        keys.append(flag)
    return lk, rk, keys


def _null_keys(t: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    out = np.zeros(t.num_rows, dtype=bool)
    for k in keys:
        out |= pc.is_null(t.column(k)).to_numpy(zero_copy_only=False)
    return out


def _hit(n: int, idx: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[idx] = True
    return out


def _with_matched(t: pa.Table, matched: np.ndarray) -> pa.Table:
    i = t.schema.get_field_index(MATCHED)
    arr = pa.array(matched, pa.bool_())
    return t.set_column(i, MATCHED, arr) if i >= 0 else t.append_column(MATCHED, arr)


def _emit_pairs(left: pa.Table, right: pa.Table, li: np.ndarray, ri: np.ndarray, cols: list[str]):
    lt = left.take(pa.array(li, pa.int64())).select(cols)
    return lt.set_column(
        lt.schema.get_field_index(RCOL), RCOL, right.take(pa.array(ri, pa.int64())).column(RCOL)
    )


def _outer(rows: pa.Table, cols: list[str], null_col: str) -> pa.Table:
    t = rows.select(cols)
    i = t.schema.get_field_index(null_col)
    return t.set_column(i, null_col, pa.nulls(t.num_rows, t.schema.field(null_col).type))


def _shards(t: pa.Table, shard: str) -> set[int]:
    return set(np.unique(t.column(shard).to_numpy()).tolist()) if t.num_rows else set()


def _new_rows(
    part: pa.Table | None, op: JoinOp, cols: list[str], late_ms: int | None
) -> tuple[pa.Table | None, int]:
    """The batch's rows (``None``: none) without the late ones (at or before ``late_ms``)
    and those whose null key Spark's inferred ``key IS NOT NULL`` filters drop; the late
    rows' count."""
    late = 0
    new = None
    if part is not None and part.num_rows:
        new = part.select(cols)
        if late_ms is not None:
            is_late = _behind(new, late_ms * 1000)
            late = int(is_late.sum())
            new = new.filter(pa.array(~is_late)) if late else new
    if new is not None and _NOT_NULL[op.how]:
        drop = _null_keys(new, op.keys) & np.isin(new.column(SIDE).to_numpy(), _NOT_NULL[op.how])
        new = new.filter(pa.array(~drop)) if drop.any() else new
    return new, late


def _evict(
    sides: tuple[tuple[pa.Table, np.ndarray], tuple[pa.Table, np.ndarray]],
    op: JoinOp,
    out_cols: list[str],
    shard: str,
    emits: list[pa.Table],
) -> set[int]:
    """Eviction by the state watermarks: each side's buffer and the rows leaving it (left,
    then right); an outer side's never-matched leaving rows appended to ``emits``. The
    shards the leaving rows change."""
    changed: set[int] = set()
    outer = (op.how in ("left", "full"), op.how in ("right", "full"))
    for (buf, gone), is_outer, null_col in zip(sides, outer, (RCOL, LCOL), strict=True):
        if not gone.any():
            continue
        left_now = buf.filter(pa.array(gone))
        changed |= _shards(left_now, shard)
        if is_outer:
            unmatched = ~left_now.column(MATCHED).to_numpy(zero_copy_only=False)
            emits.append(_outer(left_now.filter(pa.array(unmatched)), out_cols, null_col))
    return changed


def fold_join(
    states: Sequence[pa.Table],
    part: pa.Table | None,
    op: JoinOp,
    *,
    shard: str,
    late_ms: int | None = None,
    evict_ms: int | None = None,
) -> Folded:
    """Join a batch's new rows ``part`` with the buffered rows ``states`` under ``op``.

    Parameters
    ----------
    states
        Buffered rows (``shard``, ``SIDE``, ``op.keys``, ``LCOL``, ``RCOL``, ``TCOL``,
        ``MATCHED``), any number of tables.
    part
        The batch's rows of both sides (those columns but ``MATCHED``), or ``None``.
    op
        The join.
    shard
        The shard column's name.
    late_ms, evict_ms
        The previous batch's watermark (rows at or before it are late) and this batch's
        (the state watermarks follow from it).

    Returns
    -------
    ``emit``: the joined rows (``shard``, keys, ``LCOL``, ``RCOL``); ``state``: the rows
    still buffered; ``changed``: shards whose state changed; ``late_rows``.
    """
    cols = [shard, SIDE, *op.keys, LCOL, RCOL, TCOL]
    group = [shard, *op.keys]
    new, late = _new_rows(part, op, cols, late_ms)
    schema = new.schema if new is not None else None
    olds = []
    for t in states:
        t = t.select([*cols, MATCHED])
        if schema is None:
            schema = t.schema.remove(t.schema.get_field_index(MATCHED))
        want = schema.append(pa.field(MATCHED, pa.bool_()))
        olds.append(t if t.schema.equals(want) else t.cast(want))
    if schema is None:
        return Folded(None, None, frozenset(), late)
    if new is None:
        new = schema.empty_table()
    old = pa.concat_tables(olds) if olds else _with_matched(new.slice(0, 0), np.zeros(0, bool))
    side_old = old.column(SIDE).to_numpy()
    side_new = new.column(SIDE).to_numpy()
    old_l, old_r = old.filter(pa.array(side_old == 0)), old.filter(pa.array(side_old == 1))
    new_l, new_r = new.filter(pa.array(side_new == 0)), new.filter(pa.array(side_new == 1))
    lmark, rmark = state_marks(op, evict_ms)
    out_cols = [shard, *op.keys, LCOL, RCOL]
    emits: list[pa.Table] = []
    semi = op.how == "left_semi"
    # the new left rows against the buffered right rows
    p1l, p1r = _pairs(new_l, old_r, group, op)
    hit1 = _hit(new_l.num_rows, p1l)
    if semi:
        emits.append(new_l.filter(pa.array(hit1)).select(out_cols))
        keep_l = ~hit1
    else:
        emits.append(_emit_pairs(new_l, old_r, p1l, p1r, out_cols))
        keep_l = np.ones(new_l.num_rows, dtype=bool)  # even rows leaving in this batch
    old_r_m = old_r.column(MATCHED).to_numpy(zero_copy_only=False)
    if not semi:  # (a semi join never reads the right rows' flags)
        old_r_m = old_r_m | _hit(old_r.num_rows, p1r)
    stored_l = _with_matched(new_l.filter(pa.array(keep_l)), hit1[keep_l])
    buf_l = pa.concat_tables([old_l, stored_l])
    # the new right rows against every buffered left row
    p2l, p2r = _pairs(buf_l, new_r, group, op)
    buf_l_m = buf_l.column(MATCHED).to_numpy(zero_copy_only=False)
    if semi:
        first = _hit(buf_l.num_rows, p2l) & ~buf_l_m
        emits.append(buf_l.filter(pa.array(first)).select(out_cols))
    else:
        emits.append(_emit_pairs(buf_l, new_r, p2l, p2r, out_cols))
    buf_l_m = buf_l_m | _hit(buf_l.num_rows, p2l)
    hit2 = _hit(new_r.num_rows, p2r)
    keep_r = ~_behind(new_r, rmark)  # right rows leaving now: only an unmatched outer row
    if op.how in ("right", "full"):
        keep_r |= ~hit2
    stored_r = _with_matched(new_r.filter(pa.array(keep_r)), hit2[keep_r])
    buf_l = _with_matched(buf_l, buf_l_m)
    buf_r = pa.concat_tables([_with_matched(old_r, old_r_m), stored_r])
    changed = _shards(new, shard)
    gone_l, gone_r = _behind(buf_l, lmark), _behind(buf_r, rmark)
    changed |= _evict(((buf_l, gone_l), (buf_r, gone_r)), op, out_cols, shard, emits)
    state = pa.concat_tables([buf_l.filter(pa.array(~gone_l)), buf_r.filter(pa.array(~gone_r))])
    emit = pa.concat_tables([e for e in emits if e.num_rows] or [emits[0]])
    return Folded(emit if emit.num_rows else None, state, frozenset(changed), late)
