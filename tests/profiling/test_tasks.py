"""The bundled profiling tasks run and are thread-safe."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streamscale.errors import StreamscaleError
from streamscale.profiling.tasks import TASKS, check_task, make_task, viete_pi


def test_viete_fifteen_iterations() -> None:
    assert abs(float(viete_pi(15, 50)) - math.pi) < 1e-8
    assert abs(float(viete_pi(3, 50)) - math.pi) > 1e-3


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_runs_concurrently(name: str, tmp_path: Path) -> None:
    params = {
        "batch_write": {"directory": str(tmp_path), "window": 10},
        "service_lookup": {"service_ms": 1},
        "xml_parse": {"elements": 20},
        "pi": {"digits": 40},
    }[name]
    task = make_task(name, params)
    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(lambda i: task(i, 0.0), range(40)))
    assert len(out) == 40
    if name == "batch_write":
        files = list(tmp_path.iterdir())
        assert sum(f.stat().st_size for f in files) == 40 * 100
    if name == "xml_parse":
        assert out[0] == 1 + 4 * 20  # <feed>, and <trade> with three children per record
    if name == "service_lookup":
        assert out[3] == b"record:3\n"


def test_unknown_task() -> None:
    with pytest.raises(StreamscaleError, match="nope"):
        make_task("nope")


def test_task_parameters_are_checked_by_name_and_bounds() -> None:
    with pytest.raises(StreamscaleError, match="digitz: unknown pi task setting"):
        make_task("pi", {"digitz": 3})
    with pytest.raises(StreamscaleError, match="window: must be >= 1"):
        make_task("batch_write", {"window": 0})
    assert check_task("pi", {"digits": "40"}) == {"digits": 40, "iterations": 15}
