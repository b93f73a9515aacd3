"""Typed per-key state: value/list/map, TTL at the right batch, schema evolution."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

from streamscale.runtime.spark.compat.state_typed import StatefulHandle
from streamscale.runtime.spark.state.state import LocalStateBackend

BATCH_MS = 1000  # one batch per second of processing time


def _batches(tmp_path: Path, steps: list[Any], **kw: Any) -> list[Any]:
    """Run ``steps[b](handle)`` as batch b through the backend; collect what each returns."""
    be = LocalStateBackend(tmp_path)
    seen = []
    for b, step in enumerate(steps):
        state, _ = LocalStateBackend(tmp_path).read("op", 0, b - 1)  # a fresh reader each batch
        h = StatefulHandle(state, now_ms=b * BATCH_MS, watermark_ms=kw.get("wm", {}).get(b))
        seen.append(step(h))
        be.write("op", 0, b, state)
        be.commit("op", b)
    return seen


def test_value_list_and_map_state_per_key(tmp_path: Path) -> None:
    def b0(h: StatefulHandle) -> None:
        for k in ("a", "b"):
            h.setKey(k)
            h.getValueState("count").update(1)
            h.getListState("events").appendValue(f"{k}0")
            h.getMapState("by_page").updateValue("home", 1)

    def b1(h: StatefulHandle) -> Any:
        h.setKey("a")
        c = h.getValueState("count")
        c.update(c.get() + 1)
        h.getListState("events").appendList(["a1", "a2"])
        m = h.getMapState("by_page")
        m.updateValue("home", m.getValue("home") + 1)
        m.updateValue("cart", 7)
        h.setKey("b")
        h.getMapState("by_page").removeKey("home")
        h.getListState("events").clear()

    def b2(h: StatefulHandle) -> Any:
        out = {}
        for k in ("a", "b", "c"):
            h.setKey(k)
            out[k] = (
                h.getValueState("count").get(),
                list(h.getListState("events").get()),
                dict(h.getMapState("by_page").iterator()),
                h.getMapState("by_page").exists(),
            )
        return out

    got = _batches(tmp_path, [b0, b1, b2])[2]
    assert got == {
        "a": (2, ["a0", "a1", "a2"], {"home": 2, "cart": 7}, True),
        "b": (1, [], {}, False),
        "c": (None, [], {}, False),
    }


def test_processing_time_ttl_expires_at_the_right_batch(tmp_path: Path) -> None:
    def put(h: StatefulHandle) -> None:
        h.setKey("k").getValueState("v", ttlDurationMs=2500).update("x")
        h.getMapState("m", ttlDurationMs=1000).updateValue("u", 1)

    def look(h: StatefulHandle) -> tuple[Any, Any]:
        h.setKey("k")
        return h.getValueState("v").get(), h.getMapState("m").getValue("u")

    seen = _batches(tmp_path, [put, look, look, look, look])
    # written at 0 ms: the map entry (1000 ms) is gone from batch 1, the value
    # (2500 ms) is there at 2000 ms and gone from batch 3 (3000 ms) on.
    assert seen[1:] == [("x", None), ("x", None), (None, None), (None, None)]


def test_event_time_ttl_follows_the_watermark(tmp_path: Path) -> None:
    def put(h: StatefulHandle) -> None:
        h.setKey("k").getListState("l", eventTimeTtlMs=500).put([1, 2], event_time_ms=10_000)

    def look(h: StatefulHandle) -> list[Any]:
        return list(h.setKey("k").getListState("l").get())

    wm = {1: 9_000, 2: 10_499, 3: 10_500}
    seen = _batches(tmp_path, [put, look, look, look], wm=wm)
    assert seen[1:] == [[1, 2], [1, 2], []]


def test_expire_all_sweeps_the_shard(tmp_path: Path) -> None:
    state: dict[Any, Any] = {}
    h = StatefulHandle(state, now_ms=0)
    for k in range(10):
        h.setKey(k).getValueState("v", ttlDurationMs=100 if k % 2 else None).update(k)
    h.setKey(0).getMapState("m", ttlDurationMs=50).updateValue("x", 1)
    later = StatefulHandle(state, now_ms=100)
    assert later.expireAll() == 6
    assert sorted(later.setKey(k).getValueState("v").get() for k in range(0, 10, 2)) == [
        0,
        2,
        4,
        6,
        8,
    ]


@dataclasses.dataclass
class SessionV1:
    user: str
    clicks: int


@dataclasses.dataclass
class SessionV2:
    user: str
    clicks: int
    revenue: float = 0.0  # a field added after state was written with V1


def test_adding_a_field_to_a_value_state_does_not_break_restore(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    state: dict[Any, Any] = {}
    StatefulHandle(state, now_ms=0).setKey("u1").getValueState("s", SessionV1).update(
        SessionV1("u1", 3)
    )
    be.write("op", 0, 0, state)
    be.commit("op", 0)
    restored, _ = pickle.loads(pickle.dumps(LocalStateBackend(tmp_path))).read("op", 0, 0)
    vs = StatefulHandle(restored, now_ms=1).setKey("u1").getValueState("s", SessionV2)
    assert vs.get() == SessionV2("u1", 3, 0.0)
    vs.update(SessionV2("u1", 4, 9.5))
    back = StatefulHandle(restored, now_ms=2).setKey("u1").getValueState("s", SessionV1)
    assert back.get() == SessionV1("u1", 4)  # and removing it again is fine too


def test_typed_updates_write_only_their_keys(tmp_path: Path) -> None:
    be = LocalStateBackend(tmp_path)
    state: dict[Any, Any] = {}
    h = StatefulHandle(state, now_ms=0)
    for k in range(3000):
        h.setKey(k).getValueState("v").update(k)
    full = be.write("op", 0, 0, state)
    be.commit("op", 0)
    state, _ = be.read("op", 0, 0)
    h = StatefulHandle(state, now_ms=1)
    for k in range(10):
        v = h.setKey(k).getValueState("v")
        v.update(v.get() + 1)
    be.write("op", 0, 1, state)
    assert (tmp_path / "op" / "0" / "1.pkl").stat().st_size < full / 20


def test_list_state_expires_each_element_on_its_own(tmp_path: Path) -> None:
    def b0(h: StatefulHandle) -> None:
        h.setKey("k").getListState("l", ttlDurationMs=1500).put(["a", "b"])

    def b1(h: StatefulHandle) -> list[Any]:
        lst = h.setKey("k").getListState("l", ttlDurationMs=1500)
        lst.appendValue("c")  # expires at 1000 + 1500
        return list(lst.get())

    def look(h: StatefulHandle) -> tuple[list[Any], bool]:
        lst = h.setKey("k").getListState("l")
        return list(lst.get()), lst.exists()

    seen = _batches(tmp_path, [b0, b1, look, look])
    # a and b (written at 0 ms) are gone at 2000 ms; c (written at 1000 ms) at 3000 ms
    assert seen[1:] == [["a", "b", "c"], (["c"], True), ([], False)]


def test_expire_all_counts_list_elements_and_keeps_the_key() -> None:
    state: dict[Any, Any] = {}
    h = StatefulHandle(state, now_ms=0)
    h.setKey("k").getListState("l", ttlDurationMs=100).put([1, 2])
    StatefulHandle(state, now_ms=50).setKey("k").getListState("l", ttlDurationMs=100).appendValue(3)
    later = StatefulHandle(state, now_ms=120).setKey("z")
    assert later.expireAll() == 2
    assert later.key == "z"
    assert list(later.setKey("k").getListState("l").get()) == [3]
